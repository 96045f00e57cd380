"""Extract: the inputs of one evaluation, read from PostgreSQL over JDBC.

Each input is a table restricted to the configured clusters, to the columns the transforms read
and, for time series, to the evaluation window ending at `evaluated_at`. The inputs that grow
with partitions x groups are read in parallel slices (a hash of topic and partition, so topics
of any size spread evenly), one per executor core.

The reads are lazy: Spark runs them inside the jobs that need the rows, streaming them into the
first transforms rather than keeping a copy (which cost as much CPU as the reads, and memory the
aggregations need). Each large input is used by one transform only, so it is read once. Their
time is part of the evaluation's compute phase (`job`).

The consumer lag's inputs (the latest group offsets, the window's samples and the commit
observations) reach Spark gathered per group-partition by PostgreSQL (`group_windows_query`):
a row per group-partition with its samples as arrays, where Spark read and grouped a row per
sample (docs/bench/evaluate-daemon-window.md). The three tables are still given as inputs, read
only if a transform asks for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from monitor.core.objectives import BURN_WINDOWS, LONGEST_BURN_WINDOW, Objective, objectives_rows
from monitor.evaluate.io import read_table
from monitor.evaluate.spark import JdbcTarget
from monitor.evaluate.transforms import Inputs
from monitor.evaluate.transforms.common import local_frame
from monitor.evaluate.transforms.inputs import GROUP_WINDOWS, READ_COLUMNS, column_types, table_names
from monitor.evaluate.transforms.objectives import OBJECTIVES_DDL, ObjectiveInputs, no_objectives

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Input -> (time column restricting it to the window, or None for a whole "latest" table).
WINDOWED: dict[str, str | None] = {
    "latest_group_offsets": None,
    "group_offsets": "sampled_at",
    "latest_commits": None,
    "latest_partition_offsets": None,
    "partition_offsets": "sampled_at",
    "partitions": None,
    "brokers": None,
    "topic_configs": None,
    "log_dir_sizes": "sampled_at",
    "broker_disks": "sampled_at",
    "group_states": "sampled_at",
    "share_group_states": "sampled_at",
    "share_group_offsets": "sampled_at",
    "probe_samples": "sampled_at",
    "collection_runs": "started_at",
}
PARALLEL = (
    "group_offsets", "latest_group_offsets", "latest_commits", "log_dir_sizes", "partition_offsets",
)  # fmt: skip
"""Inputs read in parallel slices (the ones that grow with partitions x groups)."""

GROUP_KEYS = ("cluster", "group_id", "topic", "partition")
GROUP_INPUTS = ("latest_group_offsets", "group_offsets", "latest_commits", "group_states")
"""Inputs keyed by consumer group: an incremental evaluation reads none of the groups it carries
(`evaluation_carried`, monitor.store.carry). Of the commits only each key's newest is read
(`latest_commits`): the transforms use the time of the last one alone, where the window held an
observation per active consumer per cycle."""

WINDOW_SCAN = (
    "SELECT set_config('enable_indexscan', 'off', false), set_config('enable_nestloop', 'off', false)"
)
"""The planner settings of a windowed input's read (run on its connection first). The window's
bounds come from the clock, a subquery whose value the planner does not know when it plans, so it
guesses a handful of rows for any window. At 1,000,000 group-partitions that guess cost 11.4 s
per slice of `group_offsets` (the time-first key walked entry by entry, a heap page fetched per
row, for 5,000,000 samples). Without plain index scans and nested loops the same index is read as
a bitmap, the window's pages in their physical order: 1.5 s."""

GROUPING_SCAN = (
    f"{WINDOW_SCAN}, set_config('enable_sort', 'off', false), set_config('work_mem', '64MB', false)"
)
"""The planner settings of `group_windows_query`'s read: WINDOW_SCAN's, and a grouping by hash in
up to 64 MB (twice that with the default `hash_mem_multiplier`; beyond it the grouping spills to
disk) instead of a sort of every sample by key, which at 10,000 group-partitions with 60 samples
spilled 22 MB to disk at the default `work_mem`: 1.7 s instead of 2.4 s per slice
(docs/bench/evaluate-daemon-window.md)."""

SLOW_WINDOW = timedelta(minutes=10)
"""Log dirs are sampled every two minutes: their window is at least this long."""


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def clock(plan_id: str) -> str:
    """The SQL of the evaluation's "now": the `evaluation_clocks` row of the plan, which the job
    sets before each run (monitor.evaluate.plan), so that the same queries read each window."""
    return f"(SELECT evaluated_at FROM evaluation_clocks WHERE plan_id = {_quote(plan_id)})"


def query(table: str, clusters: Sequence[str], window: timedelta, plan_id: str) -> str:
    """The SQL (as a JDBC `dbtable` subquery) for one input: the columns `derive` reads
    (READ_COLUMNS) of the rows in the window ending at the plan's clock."""
    where = _conditions(table, clusters, window, plan_id)
    columns = ", ".join(f'"{c}"' for c in READ_COLUMNS[table])
    if table in GROUP_INPUTS:
        where.append(_not_carried(table, plan_id))
    condition = " AND ".join(where)
    return f"(SELECT {columns} FROM {table} WHERE {condition}) AS {table}_q"


def _conditions(table: str, clusters: Sequence[str], window: timedelta, plan_id: str) -> list[str]:
    """The conditions of `query`'s read of `table` on its own columns: the clusters, open rows,
    the window ending at the plan's clock."""
    where = [f"cluster IN ({', '.join(_quote(c) for c in clusters)})"]
    column = WINDOWED[table]
    if table == "topic_configs":
        where.append("valid_to IS NULL")
    if column is not None:
        span = max(window, SLOW_WINDOW) if table in ("log_dir_sizes", "broker_disks") else window
        now = clock(plan_id)
        where.append(f"{column} > {now} - make_interval(secs => {span.total_seconds()!r})")
        where.append(f"{column} <= {now}")
    return where


def _not_carried(alias: str, plan_id: str) -> str:
    """The condition leaving out the rows of the groups the plan's next evaluation carries."""
    return (
        f"NOT EXISTS (SELECT 1 FROM evaluation_carried k WHERE k.plan_id = {_quote(plan_id)} "
        f"AND k.cluster = {alias}.cluster AND k.group_id = {alias}.group_id)"
    )


_SQL_TYPES = {"timestamp": "timestamptz", "string": "text", "bigint": "bigint", "int": "integer"}


def _null(spark_type: str) -> str:
    """A NULL of the PostgreSQL type read as `spark_type` (a union's columns need one type)."""
    return f"NULL::{_SQL_TYPES[spark_type]}"


def _micros(column: str) -> str:
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def group_windows_query(clusters: Sequence[str], window: timedelta, plan_id: str) -> str:
    """The SQL (a JDBC `dbtable` subquery) of `Inputs.group_windows` (inputs.GROUP_WINDOWS): the
    rows of `latest_group_offsets`, `group_offsets` and `latest_commits` that `query` reads,
    gathered per group-partition by PostgreSQL in one grouping. Spark then reads a row per
    group-partition instead of one per sample (about 60 in the daemon's 15-minute window) and
    does not shuffle them to group them again. A slice's condition on topic and partition reaches
    every part of the union under the grouping."""
    latest = [c for c in READ_COLUMNS["latest_group_offsets"] if c not in GROUP_KEYS]
    values = (*GROUP_KEYS, *latest, "observed_at")
    types = column_types(GROUP_WINDOWS)

    def part(kind: int, source: str, alias: str, columns: Sequence[str]) -> str:
        chosen = [
            f'{alias}"{c}"' if c in (*GROUP_KEYS, *columns) else f'{_null(types[c])} AS "{c}"' for c in values
        ]
        return f"SELECT {kind} AS kind, {', '.join(chosen)} {source}"

    def plain(table: str) -> str:
        condition = " AND ".join(
            [*_conditions(table, clusters, window, plan_id), _not_carried(table, plan_id)]
        )
        return f"FROM {table} WHERE {condition}"

    union = " UNION ALL ".join(
        [
            part(0, plain("latest_group_offsets"), "", latest),
            part(
                1, plain("group_offsets"), "", ("sampled_at", "committed_offset", "lag", "consumed_timestamp")
            ),
            part(2, plain("latest_commits"), "", ["observed_at"]),
        ]
    )
    keys = [f'u."{c}"' for c in GROUP_KEYS]
    sample = "FILTER (WHERE u.kind < 2 AND u.sampled_at IS NOT NULL)"
    columns = [
        *keys,
        *(f'max(u."{c}") FILTER (WHERE u.kind = 0) AS "{c}"' for c in latest),
        'max(u."observed_at") AS "observed_at"',
        f"array_agg({_micros('u.sampled_at')}) {sample} AS window_at",
        f"array_agg(u.committed_offset) {sample} AS window_offset",
        f"array_agg(u.lag) {sample} AS window_lag",
        f"array_agg({_micros('u.consumed_timestamp')}) {sample} AS window_consumed",
    ]
    return (
        f"(SELECT {', '.join(columns)} FROM ({union}) AS u GROUP BY {', '.join(keys)} "
        "HAVING bool_or(u.kind = 0)) AS group_windows_q"
    )


def session_statement(table: str) -> str | None:
    """The statement run on the connection of `table`'s read first: WINDOW_SCAN for an input read
    by its time window."""
    return WINDOW_SCAN if WINDOWED[table] is not None else None


def slices(count: int) -> list[str]:
    """`count` conditions that split rows with `topic` and `partition` into disjoint slices of
    about equal size, whatever the number of partitions per topic."""
    bucket = f'abs((hashtext(topic)::bigint + "partition") % {count})'
    return [f"{bucket} = {n}" for n in range(count)]


def read_inputs(
    spark: SparkSession,
    target: JdbcTarget,
    clusters: Sequence[str],
    window: timedelta,
    plan_id: str,
    built_at: datetime,
    readers: int | None = None,
    keep: Callable[[DataFrame], DataFrame] = lambda frame: frame,
) -> Inputs:
    """The inputs as DataFrames, read when a job needs them, of the window ending at the plan's
    clock (`clock`, also the inputs' `now`); the large ones in `readers` slices at most (default:
    one per executor core). A small cluster's are read whole, in one query each, and known to
    Spark as one partition without a shuffle (`coalesce(1)`): with an exchange instead, each read
    was a stage of its own in every cached frame's plan that reads it (25 of a small cluster's 42
    stages), where reading a small input again is a query of milliseconds
    (docs/bench/evaluation-profile.md). `built_at` is only the inputs' `evaluated_at` (their
    `now` is the clock). `keep` is given the clock's one-row frame (`clock_column`)."""
    parallelism = max(
        1, min(spark.sparkContext.defaultParallelism, readers or spark.sparkContext.defaultParallelism)
    )
    frames: dict[str, DataFrame] = {}
    for name in table_names():
        sql = query(name, clusters, window, plan_id)
        predicates = slices(parallelism) if name in PARALLEL and parallelism > 1 else None
        statement = session_statement(name)
        frame = read_table(spark, target, sql, predicates=predicates, session_statement=statement)
        frames[name] = frame.coalesce(1) if parallelism == 1 else frame
    windows = read_table(
        spark,
        target,
        group_windows_query(clusters, window, plan_id),
        predicates=slices(parallelism) if parallelism > 1 else None,
        session_statement=GROUPING_SCAN,
    )
    return Inputs(
        evaluated_at=built_at,
        clock=clock_column(spark, target, plan_id, keep),
        group_windows=windows.coalesce(1) if parallelism == 1 else windows,
        **frames,
    )


def clock_column(
    spark: SparkSession, target: JdbcTarget, plan_id: str, keep: Callable[[DataFrame], DataFrame]
) -> Column:
    """The plan's clock as a timestamp column, read when the plan runs. Its one-row frame goes
    through `keep`: a plan caches it first, so that each use of the clock (39 in a small cluster's
    plan) reads the cache rather than PostgreSQL (docs/bench/evaluation-profile.md).

    Spark writes the value of a scalar subquery into the Java source it generates as a literal
    when it is a timestamp or a number Java has a literal for, so each evaluation's source would
    differ from the last one's and its classes be compiled anew (seconds of CPU for a large
    cluster, and code the JIT compilers start over on). A decimal is passed to the generated code
    as a reference instead: the clock is read as microseconds in a decimal, then made a timestamp.
    """
    from pyspark.sql import functions as F

    micros = (
        f"(SELECT (extract(epoch FROM evaluated_at) * 1000000)::numeric(20, 0) AS micros "
        f"FROM evaluation_clocks WHERE plan_id = {_quote(plan_id)}) AS clock"
    )
    return F.timestamp_micros(keep(read_table(spark, target, micros)).scalar().cast("long"))


def objectives_history_query(clusters: Sequence[str], objectives: Sequence[Objective], plan_id: str) -> str:
    """The SQL (a JDBC `dbtable` subquery) counting each (cluster, objective, group)'s recorded
    and bad minutes of `objective_minutes` per burn window and per objective window, before the
    minute of the plan's clock, and whether that minute is already recorded bad
    (transforms.objectives.HISTORY_DDL). PostgreSQL counts: an objective's 28 days are 40,320
    rows per group, of which the evaluation needs a dozen numbers."""
    values = ", ".join(f"({_quote(o.name)}, {int(o.window_days)})" for o in objectives)
    minute = f"date_trunc('minute', {clock(plan_id)})"
    before = "m.minute < n.at"

    def count(since: str, column: str) -> str:
        return (
            f"count(*) FILTER (WHERE m.bad AND m.minute > n.at - {since} AND {before}) AS bad_{column}, "
            f"count(*) FILTER (WHERE m.minute > n.at - {since} AND {before}) AS minutes_{column}"
        )

    counts = [count(f"make_interval(secs => {w.length.total_seconds()!r})", w.column) for w in BURN_WINDOWS]
    counts.append(count("make_interval(days => o.window_days)", "window"))
    longest = f"make_interval(secs => {LONGEST_BURN_WINDOW.total_seconds()!r})"
    return (
        "(SELECT m.cluster, m.objective, m.group_id, "
        "bool_or(m.bad) FILTER (WHERE m.minute = n.at) AS stored_bad, "
        f"{', '.join(counts)} FROM objective_minutes m CROSS JOIN (SELECT {minute} AS at) n "
        f"JOIN (VALUES {values}) AS o(objective, window_days) ON o.objective = m.objective "
        f"WHERE m.cluster IN ({', '.join(_quote(c) for c in clusters)}) AND m.minute <= n.at "
        f"AND m.minute > n.at - greatest(make_interval(days => o.window_days), {longest}) "
        "GROUP BY m.cluster, m.objective, m.group_id) AS objective_history_q"
    )


def read_objectives(
    spark: SparkSession,
    target: JdbcTarget,
    clusters: Sequence[str],
    objectives: Sequence[Objective],
    plan_id: str,
) -> ObjectiveInputs:
    """The objectives as a DataFrame, the groups each applies to (written beside the plan's clock
    before each evaluation: monitor.store.objectives) and their counted history, read when a job
    needs them (none without an objective)."""
    if not objectives:
        return no_objectives(spark)
    frame = local_frame(spark, OBJECTIVES_DDL, objectives_rows(objectives))
    groups_sql = (
        "(SELECT objective, cluster, group_id FROM objective_groups "
        f"WHERE plan_id = {_quote(plan_id)}) AS objective_groups_q"
    )
    groups = read_table(spark, target, groups_sql)
    history = read_table(spark, target, objectives_history_query(clusters, objectives, plan_id))
    return ObjectiveInputs(frame, groups.coalesce(1), history.coalesce(1))
