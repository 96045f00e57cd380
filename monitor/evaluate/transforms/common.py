"""Expressions and small transforms every entity uses: time arithmetic, safe ratios, the newest
and oldest sample of a key, topic settings from the config history, and the output contract.

Spark runs with ANSI SQL on, where `x / 0` raises: every division here goes through `ratio`,
which gives null instead, so no derived value is ever infinite or NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from monitor.core.derived import COMMON, ENTITIES

MICROS_PER_SECOND = 1_000_000
DEFAULT_MIN_INSYNC_REPLICAS = 1

Keys = Sequence[str]
PARTITION_KEYS: tuple[str, ...] = ("cluster", "topic", "partition")
GROUP_PARTITION_KEYS: tuple[str, ...] = ("cluster", "group_id", "topic", "partition")


def moment(at: datetime | Column) -> Column:
    """A time as a timestamp column: an aware datetime as a literal, or a column as it is (the
    evaluation's clock, read when the plan runs: monitor.evaluate.plan)."""
    return at if isinstance(at, Column) else F.lit(at).cast("timestamp")


def seconds_between(later: Column, earlier: Column) -> Column:
    """`later - earlier` in seconds (double) of two timestamp columns; null when either is."""
    return (F.unix_micros(later) - F.unix_micros(earlier)) / F.lit(MICROS_PER_SECOND)


def seconds_since(at: Column, now: datetime | Column) -> Column:
    """`now - at` in seconds (double) for a timestamp column `at` (see `moment` for `now`)."""
    return seconds_between(moment(now), at)


def ratio(numerator: Column, denominator: Column) -> Column:
    """numerator / denominator as a double, null when the denominator is 0 or null."""
    return F.try_divide(numerator.cast("double"), denominator.cast("double"))


def rate(first: Column, last: Column, first_at: Column, last_at: Column) -> Column:
    """(last - first) per second between two samples; null unless `last_at` is after `first_at`
    (one sample, or none, has no rate)."""
    return F.when(last_at > first_at, ratio(last - first, seconds_between(last_at, first_at)))


def non_negative(value: Column) -> Column:
    """Clamp at 0 (null stays null). Used for ages computed from record timestamps, which a
    producer's clock (CreateTime) can put in the future."""
    return F.when(value < 0, F.lit(0.0)).otherwise(value)


def newest(frame: DataFrame, keys: Keys, time_column: str = "sampled_at") -> DataFrame:
    """The newest row of each key (ties broken arbitrarily); all columns kept."""
    order = Window.partitionBy(*keys).orderBy(F.col(time_column).desc())
    return frame.withColumn("_newest", F.row_number().over(order)).where("_newest = 1").drop("_newest")


def endpoints(
    frame: DataFrame, keys: Keys, values: Sequence[str], time_column: str = "sampled_at"
) -> DataFrame:
    """Per key: `first_at`/`last_at` (oldest and newest sample time) and `first_<v>`/`last_<v>`
    (the value at those samples) of each column `v` in `values`."""
    time = F.col(time_column)
    aggregates = [F.min(time).alias("first_at"), F.max(time).alias("last_at")]
    for value in values:
        aggregates.append(F.min_by(value, time).alias(f"first_{value}"))
        aggregates.append(F.max_by(value, time).alias(f"last_{value}"))
    return frame.groupBy(*keys).agg(*aggregates)


def _limit(value: Column) -> Column:
    """A retention limit from its text value: -1 (or any negative, or unparsable) = unlimited = null."""
    parsed = value.try_cast("bigint")
    return F.when(parsed >= 0, parsed)


def topic_settings(topic_configs: DataFrame) -> DataFrame:
    """Per (cluster, topic), from the open config rows: `retention_ms`, `retention_bytes` (bigint,
    null = unlimited or not collected), `deletes` (cleanup.policy includes delete; Kafka's default
    `delete` when absent) and `min_insync_replicas` (int, 1 when absent)."""
    open_rows = topic_configs.where(F.col("valid_to").isNull())

    def setting(name: str) -> Column:
        return F.max(F.when(F.col("name") == name, F.col("value")))

    settings = open_rows.groupBy("cluster", "topic").agg(
        setting("retention.ms").alias("retention_ms_text"),
        setting("retention.bytes").alias("retention_bytes_text"),
        setting("cleanup.policy").alias("cleanup_policy"),
        setting("min.insync.replicas").alias("min_isr_text"),
    )
    policy = F.coalesce(F.lower(F.col("cleanup_policy")), F.lit("delete"))
    min_isr = F.col("min_isr_text").try_cast("int")
    return settings.select(
        "cluster",
        "topic",
        _limit(F.col("retention_ms_text")).alias("retention_ms"),
        _limit(F.col("retention_bytes_text")).alias("retention_bytes"),
        policy.contains("delete").alias("deletes"),
        F.coalesce(min_isr, F.lit(DEFAULT_MIN_INSYNC_REPLICAS)).alias("min_insync_replicas"),
    )


def conform(frame: DataFrame, entity: str, now: Column, extra: Sequence[str] = ()) -> DataFrame:
    """Exactly the contract of `entity` (monitor.core.derived): `evaluated_at` (`now`), `cluster`,
    then the entity's columns in order, each cast to its declared type; then the `extra` columns
    as they are."""
    columns = [now.alias("evaluated_at")]
    columns += [F.col(c.name).cast(c.type).alias(c.name) for c in (*COMMON[1:], *ENTITIES[entity])]
    return frame.select(*columns, *extra)


def local_frame(spark: SparkSession, ddl: str, rows: Sequence[Sequence[object]] = ()) -> DataFrame:
    """A DataFrame of `rows` (each a value per column of `ddl`, in its order; none: empty) made of
    literals in the JVM. `spark.createDataFrame` of a Python list sends the rows through an RDD
    that a Python worker re-serialises: the first such frame in an evaluation starts PySpark's
    worker daemon and two workers, which then stay (about 160 MB resident beside the daemon at
    10,000 group-partitions, docs/bench/footprint.md) for work the JVM does alone."""
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    fields = schema.fields
    if not rows:
        return spark.range(0, 0, 1, 1).select(*(F.lit(None).cast(f.dataType).alias(f.name) for f in fields))
    structs = [
        F.struct(*(F.lit(value).cast(f.dataType).alias(f.name) for value, f in zip(row, fields, strict=True)))
        for row in rows
    ]
    return spark.range(0, 1, 1, 1).select(F.inline(F.array(*structs)))


def union_by_name(frames: Sequence[DataFrame], allow_missing_columns: bool = False) -> DataFrame:
    """`frames` unioned by column name, in their order (`DataFrame.unionByName`), as a balanced
    tree of pairs (`_in_pairs`)."""
    return _in_pairs(
        frames, lambda left, right: left.unionByName(right, allowMissingColumns=allow_missing_columns)
    )


def union_by_position(frames: Sequence[DataFrame]) -> DataFrame:
    """`frames` (the same columns in the same order) unioned by position (`DataFrame.union`), as a
    balanced tree of pairs (`_in_pairs`)."""
    return _in_pairs(frames, lambda left, right: left.union(right))


def _in_pairs(frames: Sequence[DataFrame], union: Callable[[DataFrame, DataFrame], DataFrame]) -> DataFrame:
    """`frames` combined by `union` as a balanced tree of pairs: Spark analyses each union as it is
    made, the whole plan under it, so the chain `((a | b) | c) | d` analyses the first frames
    again at every step; pairs analyse each frame about log2(n) times (the same rows, columns and
    types)."""
    if not frames:
        raise ValueError("a union needs at least one frame")
    level = list(frames)
    while len(level) > 1:
        paired = [union(left, right) for left, right in zip(level[0::2], level[1::2], strict=False)]
        level = paired + level[len(paired) * 2 :]
    return level[0]
