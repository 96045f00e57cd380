"""Files shipped inside the package, found with `importlib.resources`: the same code finds them in
a checkout (an editable install) and in an installed wheel, whatever the working directory.

The shipped folders are `templates/` (notifications and web pages), `alert_rules/` (the default
rules, routing, ownership and retention policy) and `migrations/` (the alembic scripts).
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from monitor.core.errors import MonitorError

_PACKAGE = "monitor.resources"


def shipped(*parts: str) -> Path:
    """The path of a shipped file or folder, e.g. `shipped("alert_rules", "owners.yaml")`.

    Raises MonitorError when the package is not installed as files on disk (a zipped import)."""
    root = files(_PACKAGE)
    if not isinstance(root, Path):
        raise MonitorError(
            f"the package's files are not on disk ({root!r}); install kafka-health with pip, not as a zip"
        )
    return root.joinpath(*parts).resolve()


def templates_dir() -> Path:
    """`templates/`: `notifications/` and `web/`."""
    return shipped("templates")


def rules_dir() -> Path:
    """`alert_rules/`: the default rules, routing, ownership and retention policy."""
    return shipped("alert_rules")


def migrations_dir() -> Path:
    """`migrations/`: the alembic scripts the `migrate` command runs."""
    return shipped("migrations")


def state_dir() -> Path:
    """The service's own files on disk (the retention button's repository unless
    `retention.repo_path` says otherwise; the development stack's data): `$KAFKA_HEALTH_VAR`, else
    `./var` under the working directory."""
    return Path(os.environ.get("KAFKA_HEALTH_VAR", "var")).resolve()


def cache_dir() -> Path:
    """Downloads kept across checkouts and installs (the PostgreSQL JDBC driver, the development
    stack's Kafka jars): `$KAFKA_HEALTH_CACHE`, else `$XDG_CACHE_HOME/kafka-health` or
    `~/.cache/kafka-health`."""
    explicit = os.environ.get("KAFKA_HEALTH_CACHE")
    if explicit:
        return Path(explicit).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-health"
