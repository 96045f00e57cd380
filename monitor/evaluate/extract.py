"""Extract: the inputs of one evaluation, read from PostgreSQL over JDBC.

Each input is a table restricted to the configured clusters and, for time series, to the
evaluation window ending at `evaluated_at`. The large time series are read in parallel ranges of
their `partition` column so the read spreads over the Spark executors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from monitor.evaluate.io import read_table
from monitor.evaluate.spark import JdbcTarget
from monitor.evaluate.transforms import Inputs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Input -> (time column restricting it to the window, or None for a whole "latest" table).
WINDOWED: dict[str, str | None] = {
    "latest_group_offsets": None,
    "group_offsets": "sampled_at",
    "commit_observations": "observed_at",
    "latest_partition_offsets": None,
    "partition_offsets": "sampled_at",
    "partitions": None,
    "brokers": None,
    "topic_configs": None,
    "log_dir_sizes": "sampled_at",
    "broker_disks": "sampled_at",
    "group_states": "sampled_at",
    "collection_runs": "started_at",
}
PARALLEL = {"group_offsets", "partition_offsets", "latest_group_offsets", "log_dir_sizes"}
"""Inputs read in parallel ranges of `partition` (the ones that grow with partitions x groups)."""

SLOW_WINDOW = timedelta(minutes=10)
"""Log dirs are sampled every two minutes: their window is at least this long."""


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def query(table: str, clusters: Sequence[str], evaluated_at: datetime, window: timedelta) -> str:
    """The SQL (as a JDBC `dbtable` subquery) for one input."""
    where = [f"cluster IN ({', '.join(_quote(c) for c in clusters)})"]
    column = WINDOWED[table]
    if table == "topic_configs":
        where.append("valid_to IS NULL")
    if column is not None:
        span = max(window, SLOW_WINDOW) if table in ("log_dir_sizes", "broker_disks") else window
        where.append(f"{column} > {_quote((evaluated_at - span).isoformat())}::timestamptz")
        where.append(f"{column} <= {_quote(evaluated_at.isoformat())}::timestamptz")
    return f"(SELECT * FROM {table} WHERE {' AND '.join(where)}) AS {table}_q"


def read_inputs(
    spark: SparkSession,
    target: JdbcTarget,
    clusters: Sequence[str],
    evaluated_at: datetime,
    window: timedelta,
) -> Inputs:
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    frames: dict[str, DataFrame] = {}
    names = [f.name for f in fields(Inputs) if f.name != "evaluated_at"]
    for name in names:
        sql = query(name, clusters, evaluated_at, window)
        if name in PARALLEL and parallelism > 1:
            frames[name] = read_table(
                spark, target, sql, partition_column="partition", lower_bound=0, upper_bound=64,
                num_partitions=parallelism,
            )  # fmt: skip
        else:
            frames[name] = read_table(spark, target, sql)
    return Inputs(evaluated_at=evaluated_at, **frames)


def release(inputs: Inputs) -> None:
    """Drop cached inputs (the transforms may cache them)."""
    for f in fields(Inputs):
        value = getattr(inputs, f.name)
        if hasattr(value, "unpersist"):
            value.unpersist()
