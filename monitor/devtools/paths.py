"""Where the embedded stack keeps its state and its downloads."""

from __future__ import annotations

import os
from pathlib import Path


def var_dir() -> Path:
    """Runtime state (data directories, logs, pid files): `$KAFKA_HEALTH_VAR` or `./var`."""
    return Path(os.environ.get("KAFKA_HEALTH_VAR", "var")).resolve()


def cache_dir() -> Path:
    """Downloads kept across checkouts: `$KAFKA_HEALTH_CACHE` or `~/.cache/kafka-health`."""
    explicit = os.environ.get("KAFKA_HEALTH_CACHE")
    if explicit:
        return Path(explicit).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-health"


def maven_pom(name: str) -> Path:
    """The pom that resolves one runtime (`kafka` or `jdbc`) from Maven Central."""
    return Path(__file__).parent / "maven" / name / "pom.xml"


def retention_repo_dir() -> Path:
    """The retention button's config-as-code repository when `retention.repo_path` is unset."""
    return var_dir() / "retention-configs"


def project_root() -> Path:
    """The checkout the package runs from: where `migrations/`, `templates/` and `alert_rules/` are.

    The package is installed editable (`pip install -e .`) from a checkout, in development, CI and
    the Docker image alike.
    """
    return Path(__file__).resolve().parents[2]
