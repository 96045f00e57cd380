"""Schema migrations, driven from code: the same alembic scripts as ``alembic upgrade``.

The alembic Config is built here rather than read from alembic.ini, so these functions work from
any working directory. The URL reaches ``migrations/env.py`` through ``Config.attributes`` (not the
ini text, where a ``%`` in a password would break interpolation).
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from monitor.core.resources import migrations_dir
from monitor.store.engine import make_engine, normalize_url


def alembic_config(url: str | None = None) -> Config:
    """An alembic Config for the project's migrations, bound to `url` when given."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.attributes["url"] = normalize_url(url)
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` up to `revision`. Raises StoreUnavailableError if unreachable."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` (``base`` removes every table)."""
    command.downgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    """The revision the database at `url` is at; None when it has never been migrated."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def heads() -> list[str]:
    """The head revisions of the migration scripts (exactly one in a healthy tree)."""
    return list(ScriptDirectory.from_config(alembic_config()).get_heads())
