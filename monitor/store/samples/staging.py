"""What the sample writers share: epoch-millisecond times, and the staging tables batches go
through. A batch is sent over the wire once, by COPY into a temporary table dropped at the end of
the write (`Stage`, `staged`); set-based statements then fill the sample tables from it, creating
the day partitions they need first (`monitor.store.partitions.ensure_days`). Millisecond times
stay integers on the wire and become ``timestamptz`` in PostgreSQL (`tstz`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from monitor.store.ingest import copy_rows
from monitor.store.partitions import day_of, ensure_days

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
DAY_MS = 86_400_000


def to_datetime(ms: int) -> datetime:
    """An epoch-milliseconds time as an aware UTC datetime (exact: no float on the way)."""
    return _EPOCH + ms * _MS


def to_ms(value: datetime) -> int:
    """An aware datetime as epoch milliseconds (exact: no float on the way)."""
    return (value - _EPOCH) // _MS


def tstz(column: str) -> str:
    """SQL turning an epoch-milliseconds column into timestamptz (NULL stays NULL)."""
    return f"(TIMESTAMPTZ 'epoch' + {column} * INTERVAL '1 millisecond')"


def int_array(values: Iterable[int | None]) -> str:
    """An array literal of integers (None: NULL), for a parameter the statement casts to
    integer[] or bigint[]. psycopg turns a list into an array element by element in Python
    (6 ms for 5,000 values); this is one join (about 1 ms): the commit stream sends arrays of
    thousands of values several times a second."""
    return "{" + ",".join(["NULL" if v is None else str(v) for v in values]) + "}"


def text_array(values: Iterable[str]) -> str:
    """An array literal of strings, each quoted (a backslash and a double quote escaped), for a
    parameter the statement casts to text[]; each distinct value is quoted once (a group's name
    comes with each of its partitions). See `int_array`."""
    quoted: dict[str, str] = {}
    parts = []
    for value in values:
        part = quoted.get(value)
        if part is None:
            part = quoted[value] = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(part)
    return "{" + ",".join(parts) + "}"


@dataclass(frozen=True)
class Stage:
    """A temporary table holding one kind of record of a batch, as sent by COPY.

    `columns` is the column list of its CREATE TABLE: "name type, name type ...".
    """

    name: str
    columns: str

    @property
    def names(self) -> list[str]:
        return [column.split()[0] for column in self.columns.split(",")]


@contextmanager
def staged(conn: Connection, stage: Stage, rows: Iterable[Sequence[Any]]) -> Iterator[None]:
    """`rows` in the temporary table `stage.name` for the duration of the block.

    ON COMMIT DROP is the safety net; the table is dropped at the end of the block so that two
    writes in one transaction do not meet.
    """
    conn.execute(text(f"CREATE TEMPORARY TABLE {stage.name} ({stage.columns}) ON COMMIT DROP"))
    copy_rows(conn, stage.name, stage.names, rows)
    yield
    conn.execute(text(f"DROP TABLE pg_temp.{stage.name}"))


def on_conflict(idempotent: bool) -> str:
    """The clause that makes an append of rows already written a no-op (a replay)."""
    return " ON CONFLICT DO NOTHING" if idempotent else ""


def insert_staged(
    conn: Connection, stage: Stage, rows: Sequence[Sequence[Any]], statement: str, params: dict[str, Any]
) -> int:
    """Run `statement` over `rows` staged in `stage`; the rows it wrote (0, and no staging, for
    no rows)."""
    if not rows:
        return 0
    with staged(conn, stage, rows):
        return rowcount(conn, statement, params)


def rowcount(conn: Connection, statement: str, params: dict[str, Any]) -> int:
    """Run `statement`; the rows it inserted or updated."""
    return int(conn.execute(text(statement), params).rowcount)


def append_rows(
    conn: Connection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    sampled_at: datetime,
    idempotent: bool,
) -> int:
    """COPY `rows` into the sample table `table`; when `idempotent`, through a staging table and
    ``INSERT ... ON CONFLICT DO NOTHING``, returning the rows actually inserted."""
    if not rows:
        return 0
    if not idempotent:
        return copy_rows(conn, table, columns, rows)
    ensure_days(conn, {table: {day_of(sampled_at)}})
    stage = f"stage_{table}"
    names = ", ".join(columns)
    conn.execute(text(f"CREATE TEMPORARY TABLE {stage} (LIKE {table}) ON COMMIT DROP"))
    copy_rows(conn, stage, columns, rows)
    inserted = rowcount(
        conn, f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage} ON CONFLICT DO NOTHING", {}
    )
    conn.execute(text(f"DROP TABLE pg_temp.{stage}"))
    return inserted
