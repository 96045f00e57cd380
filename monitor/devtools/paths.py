"""Where the embedded stack keeps its state and its downloads."""

from __future__ import annotations

from pathlib import Path

from monitor.core.resources import cache_dir, state_dir

__all__ = ["cache_dir", "maven_pom", "project_root", "var_dir"]


def var_dir() -> Path:
    """Runtime state (data directories, logs, pid files): `$KAFKA_HEALTH_VAR` or `./var`."""
    return state_dir()


def maven_pom(name: str) -> Path:
    """The pom that resolves one runtime (`kafka` or `jdbc`) from Maven Central."""
    return Path(__file__).parent / "maven" / name / "pom.xml"


def project_root() -> Path:
    """The checkout the package runs from: where `migrations/`, `templates/` and `alert_rules/` are.

    The package is installed editable (`pip install -e .`) from a checkout, in development, CI and
    the Docker image alike.
    """
    return Path(__file__).resolve().parents[2]
