"""Rollups of the lag history: each complete day of `derived_group` and `derived_group_partition`
summarised into 15-minute and 1-hour buckets, kept longer than the raw evaluations.

A rollup row has the key of its raw table, `evaluated_at` (the newest evaluation in its bucket,
so it sorts and windows like a raw row), `bucket` (the bucket's start), `samples` (evaluations
summarised) and one column per measure: lags are the bucket's worst (`offset_lag`) with their
least (`offset_lag_min`) and newest (`offset_lag_last`) beside them, rates the mean, the time
until data loss the least, data loss whether any evaluation saw it, the status the worst, state,
members and offsets the newest. The history views (`group_lag_history`, `lag_history`, migration
0029) read raw rows where raw partitions remain and the rollups before them, with the same
columns, so a reader never chooses a resolution.

A day is rolled up once, when it is complete (`ROLLUP_GRACE` after its end), raw into 15 minutes
and those into hours in one transaction, and marked in `rollup_days`; a rerun or a second
instance finds the mark (and waits on the partition lock while the first one writes). Raw days
are dropped after that, by retention, and never before (`monitor.store.partitions`); a pass rolls
up at most `ROLLUP_DAYS_PER_PASS` days of each table, the oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Date,
    DateTime,
    Double,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.types import TypeEngine

from monitor.core.vocabulary import worst_status_first
from monitor.store.base import PARTITION_COLUMN_KEY, Base, Timestamp
from monitor.store.evaluation import DERIVED_TABLES

ROLLUP_GRACE = timedelta(minutes=10)
"""How long after a day's end its last evaluations may still be written: rolled up after that."""
ROLLUP_DAYS_PER_PASS = 2
"""Days of each raw table one maintenance pass rolls up at most: a day of 100,000 group-partitions
is about an hour's work (docs/bench/storage.md), and the pass holds the partition lock meanwhile."""
ORIGIN = "2000-01-03 00:00:00+00"
"""The instant buckets are counted from (a Monday at midnight UTC): buckets align to days."""

AGGREGATES = ("max", "min", "last", "mean", "any", "worst")


@dataclass(frozen=True)
class Measure:
    """A rollup column: `aggregate` of raw `source` in a bucket, stored as `name`."""

    name: str
    source: str
    aggregate: str


@dataclass(frozen=True)
class Resolution:
    suffix: str
    width: str
    """A PostgreSQL interval."""


FINE = Resolution("15m", "15 minutes")
COARSE = Resolution("1h", "1 hour")
RESOLUTIONS = (FINE, COARSE)


def _lag(column: str) -> tuple[Measure, ...]:
    return (
        Measure(column, column, "max"),
        Measure(f"{column}_min", column, "min"),
        Measure(f"{column}_last", column, "last"),
    )


def _same(aggregate: str, *columns: str) -> tuple[Measure, ...]:
    return tuple(Measure(column, column, aggregate) for column in columns)


_SHARED = (
    *_lag("offset_lag"),
    *_lag("lag_seconds"),
    *_same("max", "append_lag_seconds", "commit_lag_seconds"),
    *_same("mean", "consume_rate", "produce_rate"),
    *_same("min", "time_until_data_loss_seconds"),
    *_same("any", "data_loss_occurred"),
    *_same("worst", "status"),
)

MEASURES: dict[str, tuple[Measure, ...]] = {
    "derived_group": (
        *_SHARED,
        *_same("max", "max_offset_lag", "max_lag_seconds"),
        *_same("last", "group_state", "members"),
    ),
    "derived_group_partition": (
        *_SHARED,
        *_same("last", "committed_offset", "end_offset", "lag_seconds_method"),
        Measure("committed_offset_min", "committed_offset", "min"),
        Measure("end_offset_min", "end_offset", "min"),
    ),
}
"""Raw table -> what its rollups keep: the history views' columns, plus least and newest lags."""

SOURCES = tuple(MEASURES)


def rollup_table_name(source: str, resolution: Resolution) -> str:
    return f"{source}_{resolution.suffix}"


def _raw(source: str) -> Table:
    return DERIVED_TABLES[source.removeprefix("derived_")]


def _keys(source: str) -> list[str]:
    table = _raw(source)
    return [c.name for c in table.primary_key.columns if c.name not in ("cluster", "evaluated_at")]


def _column_type(source: str, measure: Measure) -> TypeEngine[Any]:
    if measure.aggregate == "mean":
        return Double()
    if measure.aggregate == "any":
        return Boolean()
    return _raw(source).c[measure.source].type


def _rollup_table(source: str, resolution: Resolution) -> Table:
    name = rollup_table_name(source, resolution)
    keys = _keys(source)
    raw = _raw(source)
    return Table(
        name,
        Base.metadata,
        Column("cluster", Text(), nullable=False),
        *(Column(key, raw.c[key].type, nullable=False) for key in keys),
        Column("evaluated_at", DateTime(timezone=True), nullable=False),
        Column("bucket", DateTime(timezone=True), nullable=False),
        Column("samples", Integer(), nullable=False),
        *(Column(m.name, _column_type(source, m)) for m in MEASURES[source]),
        PrimaryKeyConstraint("cluster", *keys, "evaluated_at"),
        postgresql_partition_by="RANGE (evaluated_at)",
        info={PARTITION_COLUMN_KEY: "evaluated_at"},
    )


ROLLUP_TABLES: dict[str, Table] = {
    rollup_table_name(source, resolution): _rollup_table(source, resolution)
    for source in SOURCES
    for resolution in RESOLUTIONS
}

rollup_days = Table(
    "rollup_days",
    Base.metadata,
    Column("source", Text(), primary_key=True),
    Column("day", Date(), primary_key=True),
    Column("rolled_at", Timestamp, nullable=False),
)
"""Which raw days are rolled up (into both resolutions): the mark that makes a rerun a no-op."""


def _aggregate(measure: Measure, *, from_rollup: bool) -> str:
    column = measure.name if from_rollup else measure.source
    match measure.aggregate:
        case "max" | "min":
            return f"{measure.aggregate}({column})"
        case "last":
            return f"(array_agg({column} ORDER BY evaluated_at DESC))[1]"
        case "mean" if from_rollup:
            return f"sum({column} * samples) / nullif(sum(samples) FILTER (WHERE {column} IS NOT NULL), 0)"
        case "mean":
            return f"avg({column})"
        case "any":
            return f"bool_or({column})"
        case "worst":
            return f"(array_agg({column} ORDER BY {worst_status_first(column)}))[1]"
    raise ValueError(f"unknown aggregate {measure.aggregate!r}; one of {', '.join(AGGREGATES)}")


def rollup_sql(source: str, resolution: Resolution) -> str:
    """INSERT ... SELECT of one day (:since, :until) of `source` into its `resolution` rollup:
    from the raw table for the fine one, from the fine rollup for the coarse one."""
    from_rollup = resolution != FINE
    reads = rollup_table_name(source, FINE) if from_rollup else source
    keys = ", ".join(["cluster", *_keys(source)])
    measures = MEASURES[source]
    bucket = (
        f"date_bin(CAST('{resolution.width}' AS interval), {'bucket' if from_rollup else 'evaluated_at'}, "
    )
    bucket += f"CAST('{ORIGIN}' AS timestamptz))"
    values = [
        "max(evaluated_at)",
        bucket,
        "sum(samples)" if from_rollup else "count(*)",
        *(_aggregate(m, from_rollup=from_rollup) for m in measures),
    ]
    columns = ", ".join([keys, "evaluated_at", "bucket", "samples", *(m.name for m in measures)])
    return f"""
        INSERT INTO {rollup_table_name(source, resolution)} ({columns})
        SELECT {keys}, {", ".join(values)} FROM {reads}
        WHERE evaluated_at >= :since AND evaluated_at < :until
        GROUP BY {keys}, {bucket}
        ON CONFLICT DO NOTHING
    """


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def rolled_days(conn: Connection, source: str) -> set[date]:
    rows = conn.execute(text("SELECT day FROM rollup_days WHERE source = :s"), {"s": source})
    return set(rows.scalars())


def roll_up_day(conn: Connection, source: str, day: date, now: datetime) -> None:
    """Summarise one day of `source` into both resolutions and mark it; the caller holds the
    partition lock and has created the rollups' partitions for `day`."""
    window = {"since": day_start(day), "until": day_start(day + timedelta(days=1))}
    for resolution in RESOLUTIONS:
        conn.execute(text(rollup_sql(source, resolution)), window)
    conn.execute(
        text("INSERT INTO rollup_days (source, day, rolled_at) VALUES (:s, :d, :now) ON CONFLICT DO NOTHING"),
        {"s": source, "d": day, "now": now},
    )


def prune_marks(conn: Connection, before: date) -> int:
    """Forget the marks of days whose rollups are gone too."""
    result = conn.execute(text("DELETE FROM rollup_days WHERE day < :d"), {"d": before})
    return int(result.rowcount or 0)
