"""The inputs of the derive transforms: one DataFrame per store table, with exactly that table's
columns (as a JDBC read of the table gives them), plus the evaluation time.

The caller restricts the time-series tables (`group_offsets`, `partition_offsets`,
`commit_observations`, `log_dir_sizes`, `broker_disks`, `group_states`) to the evaluation window;
the transforms take the oldest and newest sample of each key in what they are given. Latest
tables (`latest_*`, `partitions`, `brokers`) hold one row per key; `topic_configs` holds the
history, of which only open rows (`valid_to` null) are read; `collection_runs` may be the whole
recent history (only the newest runs matter).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession

_GROUP_OFFSET_VALUES = (
    "committed_offset bigint, leader_epoch int, end_offset bigint, start_offset bigint, lag bigint, "
    "lag_clamped boolean, committed_timestamp timestamp, consumed_timestamp timestamp, "
    "timestamp_method string, timestamp_error_ms bigint"
)
_PARTITION_OFFSET_VALUES = (
    "start_offset bigint, end_offset bigint, max_timestamp_offset bigint, max_timestamp timestamp, "
    "start_timestamp timestamp, latest_timestamp timestamp, timestamp_type string"
)

SCHEMAS: dict[str, str] = {
    "latest_group_offsets": (
        "cluster string, group_id string, topic string, partition int, sampled_at timestamp, "
        f"{_GROUP_OFFSET_VALUES}, last_commit_observed_at timestamp"
    ),
    "group_offsets": (
        "cluster string, group_id string, topic string, partition int, sampled_at timestamp, "
        f"{_GROUP_OFFSET_VALUES}, run_id bigint"
    ),
    "commit_observations": (
        "cluster string, group_id string, topic string, partition int, observed_at timestamp, "
        "committed_offset bigint, previous_offset bigint"
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
        "last_seen timestamp, up boolean"
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
    "collection_runs": (
        "id bigint, cluster string, job string, instance string, started_at timestamp, "
        "finished_at timestamp, duration_ms int, status string, counts string, error string"
    ),
}
"""Table name -> Spark DDL of its columns, in the table's column order (jsonb is read as string)."""


def column_names(table: str) -> tuple[str, ...]:
    """The column names of an input table, in order (parsed from its DDL in SCHEMAS)."""
    return tuple(part.strip().split(" ", 1)[0] for part in SCHEMAS[table].split(","))


@dataclass(frozen=True)
class Inputs:
    """Everything `derive` reads. Each DataFrame has exactly the columns of the table it is named
    after (see SCHEMAS); `evaluated_at` is timezone-aware and is "now" for every derived value.

    Raises ValueError on construction when a DataFrame's columns differ from its table's or when
    `evaluated_at` is naive: a wrong input fails here, not halfway through a Spark plan.
    """

    latest_group_offsets: DataFrame
    group_offsets: DataFrame
    commit_observations: DataFrame
    latest_partition_offsets: DataFrame
    partition_offsets: DataFrame
    partitions: DataFrame
    brokers: DataFrame
    topic_configs: DataFrame
    log_dir_sizes: DataFrame
    broker_disks: DataFrame
    group_states: DataFrame
    collection_runs: DataFrame
    evaluated_at: datetime

    def __post_init__(self) -> None:
        if self.evaluated_at.tzinfo is None or self.evaluated_at.utcoffset() is None:
            raise ValueError("evaluated_at must be timezone-aware")
        problems = []
        for table in table_names():
            frame: DataFrame = getattr(self, table)
            got, want = set(frame.columns), set(column_names(table))
            if got != want:
                problems.append(f"{table}: missing {sorted(want - got)}, unexpected {sorted(got - want)}")
        if problems:
            raise ValueError("inputs do not match their tables: " + "; ".join(problems))


def table_names() -> tuple[str, ...]:
    """The input tables, in the order of the Inputs fields."""
    return tuple(f.name for f in fields(Inputs) if f.name != "evaluated_at")


def empty_inputs(spark: SparkSession, evaluated_at: datetime) -> Inputs:
    """Inputs with an empty DataFrame of the right schema for every table (a base for tests and
    for evaluating a cluster with nothing collected yet)."""
    frames = {table: spark.createDataFrame([], SCHEMAS[table]) for table in table_names()}
    return Inputs(**frames, evaluated_at=evaluated_at)
