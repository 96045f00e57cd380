"""Retention (DOMAIN.md 2): per-partition offsets, rates, size against retention.bytes, time
coverage and retention shortfall; and, per lagging group-partition, the time until retention
deletes its oldest unconsumed message and the risk that it does so before the group reads it
(the data-loss margin).
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.evaluate.transforms.common import (
    PARTITION_KEYS,
    endpoints,
    moment,
    non_negative,
    rate,
    ratio,
    seconds_since,
)
from monitor.evaluate.transforms.inputs import Inputs

SIZE_CAPPED_RATIO = 0.8
"""A partition at or above this fraction of retention.bytes is being trimmed by the size limit:
segments are deleted whole, so a capped partition hovers between retention.bytes minus one
segment and retention.bytes, not at exactly 1.0."""

KEEP_UP_RATIO = 0.9
"""A group consuming at least this fraction of the produce rate over the window keeps up. Not
1.0: commits come in steps (every 5 s by default), so over a short window the measured rate of a
healthy group swings by the few seconds of lag it commits at. A group falling behind more slowly
is told once its backlog outlasts the oldest unread message (data_loss_margin), which at 90% is
still several retention spans before the loss."""

LAG_STEP_SECONDS = 10.0
"""A group whose lag grew by no more than this many seconds of production over the window keeps
up, whatever its measured rate: over a short window (a new group, a new monitor) one commit step
of an auto-committing consumer (5 s by default) moves its measured rate by a lot; a group really
falling behind grows its lag past that within one more evaluation."""

_RETENTION_SETTINGS = ("retention_ms", "retention_bytes", "deletes")


def partition_storage(inputs: Inputs, leaders: DataFrame, settings: DataFrame) -> DataFrame:
    """Per partition of `latest_partition_offsets`: `start_offset`, `end_offset`,
    `start_timestamp`, `latest_timestamp`, `produce_rate`, `size_bytes`, `produce_bytes_rate`,
    `retention_ms`, `retention_bytes`, `deletes`, `size_ratio`, `time_coverage_seconds` and
    `retention_shortfall_seconds`.

    `leaders` has the partition keys and `leader` (the broker whose replica size counts; null
    when offline, which leaves the size unknown). `settings` is `common.topic_settings`.
    """
    keys = list(PARTITION_KEYS)
    latest = inputs.latest_partition_offsets
    columns = [*keys, "sampled_at", "end_offset"]
    series = inputs.partition_offsets.select(*columns).unionByName(latest.select(*columns))
    ends = endpoints(series, keys, ["end_offset"])
    produce_rate = rate(
        F.col("first_end_offset"), F.col("last_end_offset"), F.col("first_at"), F.col("last_at")
    )
    rates = ends.select(*keys, produce_rate.alias("produce_rate"))

    storage = (
        latest.select(*keys, "start_offset", "end_offset", "start_timestamp", "latest_timestamp")
        .join(rates, keys, "left")
        .join(leader_sizes(inputs.log_dir_sizes, leaders), keys, "left")
        .join(settings.select("cluster", "topic", *_RETENTION_SETTINGS), ["cluster", "topic"], "left")
    )
    size_ratio = ratio(F.col("size_bytes"), F.col("retention_bytes"))
    coverage = non_negative(seconds_since(F.col("start_timestamp"), inputs.now))
    return (
        storage.withColumn("deletes", F.coalesce(F.col("deletes"), F.lit(True)))
        .withColumn("size_ratio", size_ratio)
        .withColumn("time_coverage_seconds", coverage)
        .withColumn("retention_shortfall_seconds", retention_shortfall())
    )


def leader_sizes(log_dir_sizes: DataFrame, leaders: DataFrame) -> DataFrame:
    """Per partition: `size_bytes` (newest size of the leader's replica; replicas are never summed)
    and `produce_bytes_rate` (its growth per second over the window; null when it shrank, because
    retention deleting segments is not a negative produce rate)."""
    keys = list(PARTITION_KEYS)
    on_leader = log_dir_sizes.where(~F.col("is_future")).join(
        leaders.withColumnRenamed("leader", "broker_id"), [*keys, "broker_id"]
    )
    sizes = endpoints(on_leader, keys, ["size_bytes"])
    growth = rate(F.col("first_size_bytes"), F.col("last_size_bytes"), F.col("first_at"), F.col("last_at"))
    return sizes.select(
        *keys,
        F.col("last_size_bytes").alias("size_bytes"),
        F.when(growth >= 0, growth).alias("produce_bytes_rate"),
    )


def retention_shortfall() -> Column:
    """retention.ms (in s) minus the time coverage, when the size limit is what deletes (a
    retention.bytes is set and the partition is at the cap), else 0. Expects the columns of
    `partition_storage`; null when the coverage is unknown in the capped case."""
    capped = (
        F.col("deletes")
        & F.col("retention_ms").isNotNull()
        & F.col("retention_bytes").isNotNull()
        & (F.col("size_ratio") >= SIZE_CAPPED_RATIO)
    )
    missing = F.col("retention_ms") / F.lit(1000.0) - F.col("time_coverage_seconds")
    return F.when(capped, non_negative(missing)).otherwise(F.lit(0.0))


def with_data_loss(frame: DataFrame, now: datetime | Column) -> DataFrame:
    """Adds `time_until_data_loss_seconds`, `data_loss_limit` ('time' | 'size'),
    `time_to_read_seconds` and `data_loss_margin_seconds` (the risk) to a frame of group-partitions
    with `offset_lag`, `window_start_lag`, `data_loss_occurred`, `committed_offset`, `committed_timestamp`,
    `start_offset`, `end_offset`, `consume_rate` and the partition's `produce_rate`, `size_bytes`,
    `produce_bytes_rate`, `retention_ms`, `retention_bytes` and `deletes`.

    Only a lagging group on a topic that deletes is at risk; otherwise both are null, as they are
    when neither limit applies (unlimited, or unknown). A limit already reached gives 0; so does a
    loss that already happened (the oldest unconsumed message is gone). On a tie the time limit
    is named. Deletion is per segment, so the real deletion can come up to one segment earlier.
    """
    by_time = non_negative(_time_limit_seconds(moment(now)))
    by_size = non_negative(_size_limit_seconds())
    applies = by_time.isNotNull() | by_size.isNotNull()
    at_risk = (F.col("offset_lag") > 0) & F.col("deletes") & applies
    earliest = F.least(by_time, by_size)  # least() skips nulls
    seconds = F.when(F.col("data_loss_occurred"), F.lit(0.0)).otherwise(earliest)
    limit = F.when(by_size.isNull() | (by_time <= by_size), F.lit("time")).otherwise(F.lit("size"))
    return (
        frame.withColumn("time_until_data_loss_seconds", F.when(at_risk, seconds))
        .withColumn("data_loss_limit", F.when(at_risk, limit))
        .withColumn("time_to_read_seconds", time_to_read())
        .withColumn("data_loss_margin_seconds", data_loss_margin())
    )


def time_to_read() -> Column:
    """`time_to_read_seconds`: offset_lag / consume_rate, the time the group needs to read its
    backlog at the rate it consumed over the window; 0 when caught up; null when it made no
    progress (never, at that rate) or has no rate yet (one sample)."""
    return F.when(F.col("offset_lag") == 0, F.lit(0.0)).when(
        F.col("consume_rate") > 0, ratio(F.col("offset_lag"), F.col("consume_rate"))
    )


def data_loss_margin() -> Column:
    """`data_loss_margin_seconds` (DOMAIN.md 2: the deletion time is a risk only when the group
    will not read the message first), from `time_until_data_loss_seconds`,
    `time_to_read_seconds`, `consume_rate` and `produce_rate`:

    - no deletion ahead (not lagging, no limit, compacted only): null;
    - no consume rate yet (one sample): null, no verdict (as the status gives none);
    - no progress over the window (a stopped, stalled or rewound group): it reads nothing before
      the deletion, so the margin is the time until it;
    - otherwise the time until deletion minus the time it needs to read its backlog, except that
      a group that keeps up (consumes at least KEEP_UP_RATIO of the produce rate, or its lag grew
      by at most LAG_STEP_SECONDS of production over the window: one commit step) and reads its
      backlog before the deletion has no margin at all: it is not at risk,
      however short the retention. Its margin shows only once its backlog outlasts the oldest
      unread message (the margin is then negative).
    """
    until = F.col("time_until_data_loss_seconds")
    consume = F.col("consume_rate")
    margin = until - F.col("time_to_read_seconds")
    produce = F.coalesce(F.col("produce_rate"), F.lit(0.0))
    lag_step = F.col("offset_lag") - F.coalesce(F.col("window_start_lag"), F.col("offset_lag"))
    keeps_up = (consume >= F.lit(KEEP_UP_RATIO) * produce) | (lag_step <= F.lit(LAG_STEP_SECONDS) * produce)
    return (
        F.when(until.isNull() | consume.isNull(), F.lit(None).cast("double"))
        .when(consume <= 0, until)
        .when(keeps_up & (margin > 0), F.lit(None).cast("double"))
        .otherwise(margin)
    )


def _time_limit_seconds(now: Column) -> Column:
    """append_time(oldest unconsumed) + retention.ms - now, in seconds."""
    deleted_at_us = F.unix_micros(F.col("committed_timestamp")) + F.col("retention_ms") * F.lit(1000)
    return (deleted_at_us - F.unix_micros(now)) / F.lit(1_000_000)


def _size_limit_seconds() -> Column:
    """(retention.bytes - bytes from the oldest unconsumed message to the end) / bytes written per
    second.

    Approximation: records are assumed of even size across the partition (compaction gaps and
    batches of mixed record sizes make it rough): the unconsumed bytes are size * (end - oldest) /
    (end - start), and the bytes written per second are the produce rate times size / (end -
    start). Not the partition's growth (`produce_bytes_rate`): a partition at its cap does not
    grow, retention deletes as much as is written, and between two deletions its growth is
    anything from 0 to a segment. The growth stands in when the produce rate is unknown. Null
    without retention.bytes or without writes (nothing pushes the message out at the current rate).
    """
    oldest = F.greatest(F.col("committed_offset"), F.col("start_offset"))
    retained = F.col("end_offset") - F.col("start_offset")
    share = ratio(F.col("end_offset") - oldest, retained)
    unconsumed_bytes = F.col("size_bytes") * share
    headroom = F.col("retention_bytes") - unconsumed_bytes
    written = F.coalesce(
        F.col("produce_rate") * ratio(F.col("size_bytes"), retained), F.col("produce_bytes_rate")
    )
    return F.when(written > 0, ratio(headroom, written))
