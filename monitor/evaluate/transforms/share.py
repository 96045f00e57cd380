"""Share groups (KIP-932, DOMAIN.md 7) per share partition, rolled up into share-group-topics and
share groups: lag (as the collector stored it: the broker's where it reports it, else end - SPSO,
`lag_method`), whether it grows, the rates records arrive and are finished at, the backlog in
seconds of production, and how long a start offset (SPSO) has stood still while records arrive.

The share partitions are those of `share_group_offsets` in the window (the newest sample of each
is its current value); the groups are those of `share_group_states` in the window, with or
without share partitions. A key not in the newest share-groups run is not sampled (as
`lag.sampled` for consumer groups): the rules neither match nor resolve it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.core.share_groups import LAG_BROKER, LAG_END_MINUS_START, LAG_NONE
from monitor.evaluate.transforms.common import newest, rate, ratio, seconds_since
from monitor.evaluate.transforms.inputs import Inputs
from monitor.evaluate.transforms.rollups import newest_run, of_newest_run

SHARE_GROUPS_JOB = "share_groups"
"""The collector job that writes the share-group samples (`collection_runs.job`)."""

SHARE_KEYS: tuple[str, ...] = ("cluster", "group_id", "topic", "partition")
SHARE_ROLLUP_PARTS = ("window_start_lag",)
"""Columns of `share_group_topics` beyond the share_group_topic contract, from which
`share_groups` rolls up."""


def share_partitions(inputs: Inputs) -> DataFrame:
    """Per share partition of the window: `lag`, `lag_method` (newest sample), `first_lag`,
    `produce_rate`, `consume_rate`, `stalled_seconds` and `sampled`.

    `stalled_seconds`: the newest run of samples with the current start offset began at
    `still_since`; when records arrived after it (the end offset grew) and wait (lag > 0), the
    SPSO has stood still for `now - still_since`; otherwise 0. One sample tells nothing: 0."""
    time = F.col("sampled_at")
    entry = F.struct("sampled_at", "start_offset", "end_offset")
    summaries = inputs.share_group_offsets.groupBy(*SHARE_KEYS).agg(
        F.max(time).alias("sampled_at"),
        *_known_endpoints("start_offset", "start"),
        *_known_endpoints("end_offset", "end"),
        F.max_by("start_offset", time).alias("current_start"),
        F.min_by("lag", F.when(F.col("lag").isNotNull(), time)).alias("first_lag"),
        F.max_by("lag", time).alias("lag"),
        F.max_by("lag_method", time).alias("lag_method"),
        F.array_sort(F.collect_list(entry)).alias("_samples"),  # structs compare by time first
    )
    samples, current_start = F.col("_samples"), F.col("current_start")
    moved_at = F.array_max(F.filter(samples, lambda s: ~s["start_offset"].eqNullSafe(current_start)))
    still = F.filter(
        samples, lambda s: moved_at.isNull() | (s["sampled_at"] > moved_at["sampled_at"])
    ).getItem(0)
    stalled = current_start.isNotNull() & (F.col("lag") > 0) & (F.col("last_end") > still["end_offset"])
    frame = summaries.select(
        *SHARE_KEYS, "lag", "lag_method", "first_lag",
        _rate("end").alias("produce_rate"),
        _rate("start").alias("consume_rate"),
        F.when(stalled, seconds_since(still["sampled_at"], inputs.now)).otherwise(F.lit(0.0)).alias(
            "stalled_seconds"
        ),
        "sampled_at",
    )  # fmt: skip
    return _with_sampled(frame, inputs)


def _known_endpoints(column: str, name: str) -> list[Column]:
    """The oldest and newest sample that knows `column` (`first_<name>_at`, `last_<name>_at`) and
    its value at them (`first_<name>`, `last_<name>`): a share partition has no start offset until
    the group initialises it, and no end offset in a sample whose ListOffsets failed."""
    known = F.when(F.col(column).isNotNull(), F.col("sampled_at"))
    return [
        F.min(known).alias(f"first_{name}_at"),
        F.max(known).alias(f"last_{name}_at"),
        F.min_by(column, known).alias(f"first_{name}"),
        F.max_by(column, known).alias(f"last_{name}"),
    ]


def _rate(name: str) -> Column:
    """Per second between the `_known_endpoints` of `name`."""
    first, last = F.col(f"first_{name}"), F.col(f"last_{name}")
    return rate(first, last, F.col(f"first_{name}_at"), F.col(f"last_{name}_at"))


def _with_sampled(frame: DataFrame, inputs: Inputs) -> DataFrame:
    """`frame` (with `cluster` and `sampled_at`, its key's newest sample) plus `sampled`."""
    runs = F.broadcast(newest_run(inputs.collection_runs, SHARE_GROUPS_JOB))
    sampled = F.coalesce(of_newest_run(F.col("sampled_at"), inputs.now), F.lit(False))
    with_runs = frame.join(runs, "cluster", "left")
    return with_runs.withColumn("sampled", sampled).drop("run_started_at", "sampled_at")


def _worst_method(methods: Column) -> Column:
    """How a sum of lags is known: an upper bound when any part is, the broker's when all known
    parts are, else none."""
    return (
        F.when(F.bool_or(methods == LAG_END_MINUS_START), F.lit(LAG_END_MINUS_START))
        .when(F.bool_or(methods == LAG_BROKER), F.lit(LAG_BROKER))
        .otherwise(F.lit(LAG_NONE))
    )


def _backlog(lag: Column, produce_rate: Column) -> Column:
    return F.when(produce_rate > 0, ratio(lag, produce_rate))


def share_states(inputs: Inputs) -> DataFrame:
    """The newest state of each share group in the window, with its own `sampled` (as
    `state_sampled`): read once, for both roll-ups."""
    states = newest(inputs.share_group_states, ["cluster", "group_id"]).select(
        "cluster", "group_id", F.col("state").alias("group_state"), "members", "sampled_at"
    )
    return _with_sampled(states, inputs).withColumnRenamed("sampled", "state_sampled")


def share_group_topics(partitions: DataFrame, states: DataFrame) -> DataFrame:
    """Per (cluster, share group, topic) of `share_partitions`: the share_group_topic columns and
    SHARE_ROLLUP_PARTS. The group's state and members are its newest sample's (`share_states`;
    "Unknown" and null without one)."""
    rolled = partitions.groupBy("cluster", "group_id", "topic").agg(
        F.count(F.lit(1)).alias("partitions"),
        F.sum("lag").alias("lag"),
        F.max("lag").alias("max_lag"),
        _worst_method(F.col("lag_method")).alias("lag_method"),
        F.sum("first_lag").alias("window_start_lag"),
        F.sum("produce_rate").alias("produce_rate"),
        F.sum("consume_rate").alias("consume_rate"),
        F.max("stalled_seconds").alias("stalled_seconds"),
        F.count_if(F.col("stalled_seconds") > 0).alias("stalled_partitions"),
        F.bool_and("sampled").alias("sampled"),
    )
    return (
        rolled.join(states, ["cluster", "group_id"], "left")
        .withColumn("group_state", F.coalesce(F.col("group_state"), F.lit("Unknown")))
        .withColumn("lag_growing", F.coalesce(F.col("lag") > F.col("window_start_lag"), F.lit(False)))
        .withColumn("backlog_seconds", _backlog(F.col("lag"), F.col("produce_rate")))
        .withColumn("sampled", F.col("sampled") & F.coalesce(F.col("state_sampled"), F.lit(False)))
    )


def share_groups(topics: DataFrame, states: DataFrame) -> DataFrame:
    """Per share group of `share_states` (those of the window), from `share_group_topics`: the
    share_group columns. A group without share partitions has no lag (null), 0 topics and
    partitions, and is sampled when its state is."""
    rolled = topics.groupBy("cluster", "group_id").agg(
        F.count(F.lit(1)).alias("topics"),
        F.sum("partitions").alias("partitions"),
        F.sum("lag").alias("lag"),
        F.max("max_lag").alias("max_lag"),
        _worst_method(F.col("lag_method")).alias("lag_method"),
        (F.sum("lag") > F.sum("window_start_lag")).alias("lag_growing"),
        F.sum("produce_rate").alias("produce_rate"),
        F.sum("consume_rate").alias("consume_rate"),
        F.max("backlog_seconds").alias("backlog_seconds"),
        F.max("stalled_seconds").alias("stalled_seconds"),
        F.sum("stalled_partitions").alias("stalled_partitions"),
        F.bool_and("sampled").alias("topics_sampled"),
    )
    counts = ["topics", "partitions", "stalled_partitions"]
    return (
        states.join(rolled, ["cluster", "group_id"], "left")
        .fillna(0, subset=counts)
        .fillna(0.0, subset=["stalled_seconds"])
        .fillna(False, subset=["lag_growing"])
        .fillna(LAG_NONE, subset=["lag_method"])
        .withColumn("sampled", F.col("state_sampled") & F.coalesce(F.col("topics_sampled"), F.lit(True)))
    )
