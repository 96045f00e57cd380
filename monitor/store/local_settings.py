"""PostgreSQL settings for some statements of the caller's transaction, restored after them.

`set_config(name, value, true)` holds until the transaction ends; the statements after the block
run under the settings as they were (a statement that fails aborts the transaction, which takes
the settings with it). The names and values come from the code, never from a request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from sqlalchemy import Connection, text


def setting_statement(settings: Mapping[str, str]) -> str:
    """The statement that sets `settings` for the rest of the transaction."""
    return "SELECT " + ", ".join(f"set_config('{name}', '{value}', true)" for name, value in settings.items())


@contextmanager
def local_settings(conn: Connection, settings: Mapping[str, str]) -> Iterator[None]:
    """Within the block, `conn`'s statements run under `settings`; after it, under those it found."""
    names = list(settings)
    current = ", ".join(f"current_setting('{name}')" for name in names)
    was = conn.execute(text(f"SELECT {current}")).one()
    conn.execute(text(setting_statement(settings)))
    yield
    restore = ", ".join(f"set_config('{name}', :s{i}, true)" for i, name in enumerate(names))
    conn.execute(text(f"SELECT {restore}"), {f"s{i}": value for i, value in enumerate(was)})
