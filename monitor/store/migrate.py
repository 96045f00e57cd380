"""Schema migrations, driven from code: the same alembic scripts as ``alembic upgrade``.

The alembic Config is built here rather than read from alembic.ini, so these functions work from
any working directory. The URL reaches ``migrations/env.py`` through ``Config.attributes`` (not the
ini text, where a ``%`` in a password would break interpolation).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from monitor.core.resources import migrations_dir
from monitor.store.engine import make_engine, normalize_url

if TYPE_CHECKING:
    from alembic.config import Config

_DECLARED = re.compile(r"^(down_revision|revision)\b[^=]*=\s*(None|['\"]([^'\"]+)['\"])", re.MULTILINE)


def alembic_config(url: str | None = None) -> Config:
    """An alembic Config for the project's migrations, bound to `url` when given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.attributes["url"] = normalize_url(url)
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` up to `revision`. Raises StoreUnavailableError if unreachable.

    A database already at the head, as at every start but the first after an upgrade, is told
    by one query (`declared_head`, `current`): alembic and its 30-odd scripts are imported and
    read only to migrate (half a second of a daemon's start that comes before any answer)."""
    if revision == "head" and (head := declared_head()) is not None and _current(url) == head:
        return
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` (``base`` removes every table)."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def at_head(url: str) -> tuple[str | None, list[str]]:
    """The revision the database at `url` is at, and the scripts' heads: read from the scripts'
    declarations and one query when they declare one head (alembic and its scripts are not
    imported: a quarter of a second of every daemon's start), else from alembic."""
    head = declared_head()
    if head is not None:
        return _current(url), [head]
    return current(url), heads()


def current(url: str) -> str | None:
    """The revision the database at `url` is at; None when it has never been migrated."""
    from alembic.migration import MigrationContext

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def heads() -> list[str]:
    """The head revisions of the migration scripts (exactly one in a healthy tree)."""
    from alembic.script import ScriptDirectory

    return list(ScriptDirectory.from_config(alembic_config()).get_heads())


@functools.cache
def declared_head() -> str | None:
    """The one head revision of the migration scripts, read from their `revision` and
    `down_revision` lines without importing them; None when that does not tell one (a script
    that declares either otherwise, a merge, several heads): alembic decides then. Read once a
    process: the start's migration check and the store's both ask."""
    revisions: set[str] = set()
    replaced: set[str] = set()
    for script in sorted((migrations_dir() / "versions").glob("*.py")):
        declared = {name: value for name, literal, value in _DECLARED.findall(script.read_text()) if literal}
        if "revision" not in declared or not declared["revision"]:
            return None
        revisions.add(declared["revision"])
        if declared.get("down_revision"):
            replaced.add(declared["down_revision"])
    head = revisions - replaced
    return next(iter(head)) if len(head) == 1 else None


def _current(url: str) -> str | None:
    """The revision in the database's alembic_version (None: never migrated). One connection;
    raises StoreUnavailableError when the server cannot be reached (`make_engine`)."""
    engine = make_engine(url, check=False)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except ProgrammingError:  # no alembic_version table yet
        return None
    finally:
        engine.dispose()
    return str(rows[0]) if len(rows) == 1 else None
