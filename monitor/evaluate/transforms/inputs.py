"""The inputs of the derive transforms: one DataFrame per store table, with exactly that table's
columns (as a JDBC read of the table gives them), plus the evaluation time.

The caller restricts the time-series tables (`group_offsets`, `partition_offsets`,
`log_dir_sizes`, `broker_disks`, `group_states`, `share_group_states`,
`share_group_offsets`, `probe_samples`) to the evaluation window;
the transforms take the oldest and newest sample of each key in what they are given. Latest
tables (`latest_*`, `partitions`, `brokers`) hold one row per key; `topic_configs` holds the
history, of which only open rows (`valid_to` null) are read; `collection_runs` may be the whole
recent history (only the newest runs matter).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from monitor.evaluate.transforms.common import local_frame, moment

_GROUP_OFFSET_VALUES = (
    "committed_offset bigint, leader_epoch int, end_offset bigint, start_offset bigint, lag bigint, "
    "lag_clamped boolean, committed_timestamp timestamp, consumed_timestamp timestamp, "
    "timestamp_method string, timestamp_error_ms bigint"
)
_PARTITION_OFFSET_VALUES = (
    "start_offset bigint, end_offset bigint, max_timestamp_offset bigint, max_timestamp timestamp, "
    "start_timestamp timestamp, latest_timestamp timestamp, timestamp_type string, "
    "end_offset_method string, end_offset_listed_at timestamp"
)

SCHEMAS: dict[str, str] = {
    "latest_group_offsets": (
        "cluster string, group_id string, topic string, partition int, sampled_at timestamp, "
        f"{_GROUP_OFFSET_VALUES}, gone_at timestamp"
    ),
    "group_offsets": (
        "cluster string, group_id string, topic string, partition int, sampled_at timestamp, "
        f"{_GROUP_OFFSET_VALUES}, run_id bigint"
    ),
    "latest_commits": (
        "cluster string, group_id string, topic string, partition int, committed_offset bigint, "
        "observed_at timestamp"
    ),
    "latest_partition_offsets": (
        f"cluster string, topic string, partition int, sampled_at timestamp, {_PARTITION_OFFSET_VALUES}"
    ),
    "partition_offsets": (
        f"cluster string, topic string, partition int, sampled_at timestamp, {_PARTITION_OFFSET_VALUES}, "
        "run_id bigint"
    ),
    "partitions": (
        "cluster string, topic string, partition int, leader int, replicas array<int>, isr array<int>, "
        "updated_at timestamp"
    ),
    "brokers": (
        "cluster string, broker_id int, host string, port int, rack string, first_seen timestamp, "
        "last_seen timestamp, up boolean, unregistered_at timestamp"
    ),
    "topic_configs": (
        "id bigint, cluster string, topic string, name string, value string, source string, "
        "sensitive boolean, valid_from timestamp, valid_to timestamp"
    ),
    "log_dir_sizes": (
        "cluster string, broker_id int, log_dir string, topic string, partition int, sampled_at timestamp, "
        "size_bytes bigint, offset_lag bigint, is_future boolean, run_id bigint"
    ),
    "broker_disks": (
        "cluster string, broker_id int, log_dir string, sampled_at timestamp, total_bytes bigint, "
        "usable_bytes bigint, error string, run_id bigint"
    ),
    "group_states": (
        "cluster string, group_id string, sampled_at timestamp, state string, protocol_type string, "
        "protocol string, members int, coordinator int, is_simple boolean, run_id bigint"
    ),
    "share_group_states": (
        "cluster string, group_id string, sampled_at timestamp, state string, members int, assignor string, "
        "coordinator int, run_id bigint"
    ),
    "share_group_offsets": (
        "cluster string, sampled_at timestamp, group_id string, topic string, partition int, "
        "start_offset bigint, end_offset bigint, lag bigint, lag_method string, run_id bigint"
    ),
    "probe_samples": (
        "cluster string, topic string, partition int, sampled_at timestamp, broker_id int, leader int, "
        "ok boolean, produce_seconds double, end_to_end_seconds double, commit_seconds double, "
        "error string, run_id bigint"
    ),
    "collection_runs": (
        "id bigint, cluster string, job string, instance string, started_at timestamp, "
        "finished_at timestamp, duration_ms int, status string, counts string, error string"
    ),
}
"""Table name -> Spark DDL of its columns, in the table's column order (jsonb is read as string)."""

_GROUP_KEYS = ("cluster", "group_id", "topic", "partition")
_PARTITION_KEYS = ("cluster", "topic", "partition")
READ_COLUMNS: dict[str, tuple[str, ...]] = {
    "latest_group_offsets": (
        *_GROUP_KEYS, "sampled_at", "committed_offset", "end_offset", "start_offset", "lag",
        "committed_timestamp", "consumed_timestamp", "timestamp_method", "timestamp_error_ms",
    ),
    "group_offsets": (*_GROUP_KEYS, "sampled_at", "committed_offset", "lag", "consumed_timestamp"),
    "latest_commits": (*_GROUP_KEYS, "observed_at"),
    "latest_partition_offsets": (
        *_PARTITION_KEYS, "sampled_at", "start_offset", "end_offset", "start_timestamp", "latest_timestamp",
    ),
    "partition_offsets": (*_PARTITION_KEYS, "sampled_at", "end_offset"),
    "partitions": (*_PARTITION_KEYS, "leader", "replicas", "isr"),
    "brokers": ("cluster", "broker_id", "rack", "up", "unregistered_at"),
    "topic_configs": ("cluster", "topic", "name", "value", "valid_to"),
    "log_dir_sizes": ("cluster", "broker_id", "topic", "partition", "sampled_at", "size_bytes", "is_future"),
    "broker_disks": ("cluster", "broker_id", "log_dir", "sampled_at", "total_bytes", "usable_bytes"),
    "group_states": ("cluster", "group_id", "sampled_at", "state", "members"),
    "share_group_states": ("cluster", "group_id", "sampled_at", "state", "members"),
    "share_group_offsets": (
        "cluster", "sampled_at", "group_id", "topic", "partition", "start_offset", "end_offset", "lag",
        "lag_method",
    ),
    "probe_samples": (
        "cluster", "sampled_at", "broker_id", "ok", "produce_seconds", "end_to_end_seconds", "commit_seconds",
    ),
    "collection_runs": ("cluster", "job", "started_at", "finished_at", "status"),
}  # fmt: skip
"""Table name -> the columns `derive` reads, in the table's column order: the extract reads only
these (a sample table's other columns are a third to a half of its bytes). A test derives from
inputs holding these columns alone, so a transform that starts to read another column fails it."""


def column_types(ddl: str) -> dict[str, str]:
    """The columns of a Spark DDL of columns (no type with a comma in it), name -> type, in order."""
    return dict(part.strip().split(" ", 1) for part in ddl.split(","))


def _read_ddl(table: str) -> str:
    """The DDL of the columns of `table` that `derive` reads (READ_COLUMNS), in order."""
    types = column_types(SCHEMAS[table])
    return ", ".join(f"{name} {types[name]}" for name in READ_COLUMNS[table])


GROUP_WINDOWS = (
    f"{_read_ddl('latest_group_offsets')}, observed_at timestamp, window_at array<bigint>, "
    "window_offset array<bigint>, window_lag array<bigint>, window_consumed array<bigint>"
)
"""The Spark DDL of `Inputs.group_windows`: one row per row of `latest_group_offsets` (the columns
read of it), with `observed_at`, the key's newest commit observation (`latest_commits`; null if
none), and the window's samples (`group_offsets` and the row
itself, those with a `sampled_at`) as parallel arrays, in any order: their time and consumed
timestamp in epoch microseconds, their committed offset and lag."""


def column_names(table: str) -> tuple[str, ...]:
    """The column names of an input table, in order (parsed from its DDL in SCHEMAS)."""
    return tuple(column_types(SCHEMAS[table]))


@dataclass(frozen=True)
class Inputs:
    """Everything `derive` reads. Each DataFrame has columns of the table it is named after (see
    SCHEMAS): all of them, or at least READ_COLUMNS; `evaluated_at` is timezone-aware and is "now"
    for every derived value.

    Raises ValueError on construction when a DataFrame lacks a column `derive` reads or has one
    its table does not, or when `evaluated_at` is naive: a wrong input fails here, not halfway
    through a Spark plan.
    """

    latest_group_offsets: DataFrame
    group_offsets: DataFrame
    latest_commits: DataFrame
    latest_partition_offsets: DataFrame
    partition_offsets: DataFrame
    partitions: DataFrame
    brokers: DataFrame
    topic_configs: DataFrame
    log_dir_sizes: DataFrame
    broker_disks: DataFrame
    group_states: DataFrame
    share_group_states: DataFrame
    share_group_offsets: DataFrame
    probe_samples: DataFrame
    collection_runs: DataFrame
    evaluated_at: datetime
    clock: Column | None = None
    """"Now" as a column read when the plan runs (monitor.evaluate.plan), so that one plan serves
    every evaluation; None: `evaluated_at` as a literal."""
    group_windows: DataFrame | None = None
    """The group-partitions with their window's samples gathered per key (GROUP_WINDOWS), as
    the extract has PostgreSQL group them: the transforms then read one row per group-partition
    instead of grouping `latest_group_offsets`, `group_offsets` and `latest_commits`
    themselves, which they do when it is None (monitor.evaluate.transforms.lag)."""

    @property
    def now(self) -> Column:
        """The time every derived value is computed at: `clock`, or else `evaluated_at`."""
        return self.clock if self.clock is not None else moment(self.evaluated_at)

    def __post_init__(self) -> None:
        if self.evaluated_at.tzinfo is None or self.evaluated_at.utcoffset() is None:
            raise ValueError("evaluated_at must be timezone-aware")
        problems = []
        for table in table_names():
            frame: DataFrame = getattr(self, table)
            got, needed = set(frame.columns), set(READ_COLUMNS[table])
            missing, unexpected = needed - got, got - set(column_names(table))
            if missing or unexpected:
                problems.append(f"{table}: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
        if self.group_windows is not None:
            got_windows, wanted = self.group_windows.columns, list(column_types(GROUP_WINDOWS))
            if got_windows != wanted:
                problems.append(f"group_windows: columns {got_windows}, not {wanted}")
        if problems:
            raise ValueError("inputs do not match their tables: " + "; ".join(problems))


_NOT_TABLES = ("evaluated_at", "clock", "group_windows")


def table_names() -> tuple[str, ...]:
    """The input tables, in the order of the Inputs fields."""
    return tuple(f.name for f in fields(Inputs) if f.name not in _NOT_TABLES)


def empty_inputs(spark: SparkSession, evaluated_at: datetime) -> Inputs:
    """Inputs with an empty DataFrame of the right schema for every table (a base for tests and
    for evaluating a cluster with nothing collected yet)."""
    frames: dict[str, Any] = {table: local_frame(spark, SCHEMAS[table]) for table in table_names()}
    return Inputs(**frames, evaluated_at=evaluated_at)
