"""Which database a command works on, without starting anything."""

from __future__ import annotations

from monitor.core.settings import Settings
from monitor.devtools.paths import var_dir
from monitor.devtools.postgres import LocalPostgres
from monitor.store.engine import normalize_url


def database_url(settings: Settings) -> str:
    """database.url (DATABASE_URL) when set, else the project-local server's (which must be up:
    `kafka-health db up`)."""
    if settings.database.url is not None:
        return normalize_url(settings.database.url.get_secret_value())
    return LocalPostgres(var_dir() / "postgres", settings.database.local_port).url()
