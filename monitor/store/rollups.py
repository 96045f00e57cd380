"""Rollups of the lag history: `derived_group` and `derived_group_partition` summarised into
15-minute and 1-hour buckets, hour by hour as the evaluations arrive, kept longer than the raw
evaluations.

A rollup row has the key of its raw table, `evaluated_at` (the newest evaluation in its bucket,
so it sorts and windows like a raw row), `bucket` (the bucket's start), `samples` (evaluations
summarised) and one column per measure: lags are the bucket's worst (`offset_lag`) with their
least (`offset_lag_min`) and newest (`offset_lag_last`) beside them, rates the mean, the time
until data loss the least, data loss whether any evaluation saw it, the status the worst, state,
members and offsets the newest. The history views (`group_lag_history`, `lag_history`, migration
0029) read raw rows where raw partitions remain and the rollups before them, with the same
columns, so a reader never chooses a resolution.

An hour is rolled up once, when it is complete (`ROLLUP_GRACE` after its end): raw into 15
minutes and those into the hour in one statement per cluster (the hour's rows found through the
raw table's (cluster, evaluated_at) index, so an hour costs its own rows, never its day's), and
marked in `rollup_hours`; a rerun or a second instance finds the mark (and waits on the partition
lock while the first one writes). A raw day is dropped by retention only once its 24 hours are
marked (`monitor.store.partitions`); a pass rolls up at most `ROLLUP_HOURS_PER_PASS` hours of
each table, the oldest first, so the work keeps pace with the evaluations instead of
arriving as a whole day at once (an hour of a million group-partitions, evaluated every 30 s,
is 120 million raw rows: most of an hour's work on two CPUs, docs/bench/storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
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
"""How long after an hour's end its last evaluations may still be written: rolled up after that."""
ROLLUP_HOURS_PER_PASS = 48
"""Hours of each raw table one maintenance pass (hourly by default) rolls up at most: one hour is
due each pass, and a backlog (the days kept before rollups existed, or a daemon that was down) is
worked off 47 hours a pass while the pass stays bounded (it holds the partition lock)."""
HOUR = timedelta(hours=1)
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

rollup_hours = Table(
    "rollup_hours",
    Base.metadata,
    Column("source", Text(), primary_key=True),
    Column("hour", DateTime(timezone=True), primary_key=True),
    Column("rolled_at", Timestamp, nullable=False),
)
"""Which raw hours are rolled up (into both resolutions): the mark that makes a rerun a no-op."""


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


def _select(source: str, resolution: Resolution, reads: str, where: str) -> str:
    """SELECT of `source`'s buckets at `resolution` from `reads` (the raw table, or the fine
    rows just written), in the rollup table's column order."""
    from_rollup = resolution != FINE
    keys = ", ".join(["cluster", *_keys(source)])
    bucket = (
        f"date_bin(CAST('{resolution.width}' AS interval), {'bucket' if from_rollup else 'evaluated_at'}, "
        f"CAST('{ORIGIN}' AS timestamptz))"
    )
    values = [
        "max(evaluated_at)",
        bucket,
        "sum(samples)" if from_rollup else "count(*)",
        *(_aggregate(m, from_rollup=from_rollup) for m in MEASURES[source]),
    ]
    return f"SELECT {keys}, {', '.join(values)} FROM {reads} {where} GROUP BY {keys}, {bucket}"


def _columns(source: str) -> str:
    return ", ".join(
        ["cluster", *_keys(source), "evaluated_at", "bucket", "samples", *(m.name for m in MEASURES[source])]
    )


def rollup_sql(source: str) -> str:
    """One cluster's (:cluster) hour (:since, :until) of `source` into both rollups: the raw rows
    into 15-minute buckets, and the rows that wrote into the hour's bucket, in one statement."""
    columns = _columns(source)
    raw = _select(
        source, FINE, source, "WHERE cluster = :cluster AND evaluated_at >= :since AND evaluated_at < :until"
    )
    return f"""
        WITH fine AS (
            INSERT INTO {rollup_table_name(source, FINE)} ({columns}) {raw}
            ON CONFLICT DO NOTHING RETURNING {columns}
        )
        INSERT INTO {rollup_table_name(source, COARSE)} ({columns}) {_select(source, COARSE, "fine", "")}
        ON CONFLICT DO NOTHING
    """


def hour_start(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def day_hours(day: date) -> list[datetime]:
    return [day_start(day) + HOUR * n for n in range(24)]


def rolled_hours(conn: Connection, source: str, since: datetime | None = None) -> set[datetime]:
    """The hours of `source` marked rolled up (from `since` on, when given)."""
    query = "SELECT hour FROM rollup_hours WHERE source = :s" + (" AND hour >= :since" if since else "")
    rows = conn.execute(text(query), {"s": source, "since": since})
    return {hour_start(hour) for hour in rows.scalars()}


def rolled_days(conn: Connection, source: str) -> set[date]:
    """The days of `source` whose every hour is rolled up."""
    rows = conn.execute(
        text(
            "SELECT CAST(hour AT TIME ZONE 'UTC' AS date) FROM rollup_hours WHERE source = :s "
            "GROUP BY 1 HAVING count(*) = 24"
        ),
        {"s": source},
    )
    return set(rows.scalars())


def _clusters(conn: Connection, source: str) -> list[str]:
    """The clusters with rows in `source`: one index descent per cluster and partition (a loose
    scan of the (cluster, evaluated_at) index), never a read of the rows."""
    rows = conn.execute(
        text(
            f"""
            WITH RECURSIVE c(cluster) AS (
                (SELECT cluster FROM {source} ORDER BY cluster LIMIT 1)
                UNION ALL
                SELECT (
                    SELECT s.cluster FROM {source} s WHERE s.cluster > c.cluster ORDER BY s.cluster LIMIT 1
                ) FROM c WHERE c.cluster IS NOT NULL
            )
            SELECT cluster FROM c WHERE cluster IS NOT NULL
            """
        )
    )
    return [str(cluster) for cluster in rows.scalars()]


def roll_up_hours(conn: Connection, source: str, hours: list[datetime], now: datetime) -> None:
    """Summarise `hours` of `source` into both resolutions and mark them; the caller holds the
    partition lock and has created the rollups' partitions for their days."""
    if not hours:
        return
    clusters = _clusters(conn, source)
    statement = text(rollup_sql(source))
    for hour in hours:
        for cluster in clusters:
            conn.execute(statement, {"cluster": cluster, "since": hour, "until": hour + HOUR})
        conn.execute(
            text(
                "INSERT INTO rollup_hours (source, hour, rolled_at) VALUES (:s, :h, :now)"
                " ON CONFLICT DO NOTHING"
            ),
            {"s": source, "h": hour, "now": now},
        )


def prune_marks(conn: Connection, before: date) -> int:
    """Forget the marks of days whose rollups are gone too."""
    result = conn.execute(text("DELETE FROM rollup_hours WHERE hour < :d"), {"d": day_start(before)})
    return int(result.rowcount or 0)
