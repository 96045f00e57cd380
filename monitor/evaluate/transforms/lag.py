"""Consumer lag (DOMAIN.md 1) per group-partition: offset lag, lag in seconds, append lag, commit
lag, rates, time to catch up, data loss and the sliding-window status.

The current values come from `latest_group_offsets` (one row per group-partition, the universe of
this entity); the window's samples are `group_offsets` plus that current row.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.evaluate.transforms.common import (
    GROUP_PARTITION_KEYS,
    PARTITION_KEYS,
    endpoints,
    newest,
    non_negative,
    rate,
    ratio,
    seconds_between,
    seconds_since,
)
from monitor.evaluate.transforms.inputs import Inputs
from monitor.evaluate.transforms.retention import with_data_loss
from monitor.evaluate.transforms.status import status_frame

_SAMPLE_COLUMNS = (*GROUP_PARTITION_KEYS, "sampled_at", "committed_offset", "lag", "consumed_timestamp")
_PARTITION_COLUMNS = (
    "latest_timestamp",
    "produce_rate",
    "size_bytes",
    "produce_bytes_rate",
    "retention_ms",
    "retention_bytes",
    "deletes",
)


def group_partition_frame(inputs: Inputs, partition: DataFrame, window_commits: int) -> DataFrame:
    """Per row of `latest_group_offsets`: every group_partition column of the contract, plus
    `window_start_lag` (the lag at the window's first sample, for `group.lag_growing`).

    `partition` is the partition frame (`retention.partition_storage` columns, at least
    `start_offset`, `end_offset` and those in _PARTITION_COLUMNS).
    """
    keys = list(GROUP_PARTITION_KEYS)
    current = inputs.latest_group_offsets
    series = inputs.group_offsets.select(*_SAMPLE_COLUMNS).unionByName(current.select(*_SAMPLE_COLUMNS))
    last_commits = last_commit_times(inputs.commit_observations, current)
    partitions = partition.select(
        *PARTITION_KEYS,
        F.col("start_offset").alias("partition_start_offset"),
        F.col("end_offset").alias("partition_end_offset"),
        *_PARTITION_COLUMNS,
    )
    states = newest(inputs.group_states, ["cluster", "group_id"]).select(
        "cluster", "group_id", F.col("state").alias("group_state"), "members"
    )
    frame = (
        current.join(window_movement(series), keys, "left")
        .join(last_commits, keys, "left")
        .join(commit_lags(series, last_commits), keys, "left")
        .join(status_frame(series, last_commits, inputs.evaluated_at, window_commits), keys, "left")
        .join(partitions, list(PARTITION_KEYS), "left")
        .join(states, ["cluster", "group_id"], "left")
        .withColumn("end_offset", F.coalesce(F.col("end_offset"), F.col("partition_end_offset")))
        .withColumn("start_offset", F.coalesce(F.col("start_offset"), F.col("partition_start_offset")))
        .withColumn("group_state", F.coalesce(F.col("group_state"), F.lit("Unknown")))
    )
    frame = _with_lag(frame, inputs.evaluated_at)
    return with_data_loss(frame, inputs.evaluated_at)


def _with_lag(frame: DataFrame, now: datetime) -> DataFrame:
    """The lag columns of one group-partition row (see columns.py for their meanings)."""
    offset_lag = F.coalesce(
        F.col("lag"), F.greatest(F.col("end_offset") - F.col("committed_offset"), F.lit(0))
    )
    frame = frame.withColumn("offset_lag", offset_lag)
    lagging = F.col("offset_lag") > 0
    lag_seconds = non_negative(seconds_since(F.col("committed_timestamp"), now))
    append_lag = non_negative(seconds_between(F.col("latest_timestamp"), F.col("consumed_timestamp")))
    # A caught-up group has no unconsumed message: its lag of 0 is exact whatever the sample says.
    method = F.when(~lagging, F.lit("exact")).otherwise(F.col("timestamp_method"))
    error = F.when(method == "interpolated", F.col("timestamp_error_ms") / F.lit(1000.0))
    return frame.select(
        "*",
        F.when(lagging, lag_seconds).otherwise(F.lit(0.0)).alias("lag_seconds"),
        F.when(lagging, append_lag).otherwise(F.lit(0.0)).alias("append_lag_seconds"),
        non_negative(seconds_since(F.col("last_commit_at"), now)).alias("time_since_last_commit_seconds"),
        time_to_catch_up(F.col("offset_lag"), F.col("consume_rate"), F.col("produce_rate")).alias(
            "time_to_catch_up_seconds"
        ),
        (F.col("committed_offset") < F.col("start_offset")).alias("data_loss_occurred"),
        method.alias("lag_seconds_method"),
        error.alias("lag_seconds_error"),
    )


def time_to_catch_up(offset_lag: Column, consume_rate: Column, produce_rate: Column) -> Column:
    """offset_lag / (consume_rate - produce_rate) while the group gains on the producers; 0 when
    caught up; null when it does not gain or a rate is unknown (never infinite)."""
    gaining = consume_rate > produce_rate
    return F.when(offset_lag == 0, F.lit(0.0)).when(gaining, ratio(offset_lag, consume_rate - produce_rate))


def window_movement(series: DataFrame) -> DataFrame:
    """Per group-partition: `consume_rate` (committed offset change per second between the oldest
    and newest sample; negative after a rewind) and `window_start_lag`."""
    keys = list(GROUP_PARTITION_KEYS)
    ends = endpoints(series, keys, ["committed_offset", "lag"])
    consumed = rate(
        F.col("first_committed_offset"), F.col("last_committed_offset"), F.col("first_at"), F.col("last_at")
    )
    return ends.select(*keys, consumed.alias("consume_rate"), F.col("first_lag").alias("window_start_lag"))


def last_commit_times(commit_observations: DataFrame, current: DataFrame) -> DataFrame:
    """Per row of `current` (latest_group_offsets): `last_commit_at`, the newest observed commit
    (from the window's observations or the row's `last_commit_observed_at`; null if never)."""
    keys = list(GROUP_PARTITION_KEYS)
    observed = commit_observations.groupBy(*keys).agg(F.max("observed_at").alias("observed_at"))
    newest_commit = F.greatest(F.col("last_commit_observed_at"), F.col("observed_at"))  # skips nulls
    return (
        current.select(*keys, "last_commit_observed_at")
        .join(observed, keys, "left")
        .select(*keys, newest_commit.alias("last_commit_at"))
    )


def commit_lags(series: DataFrame, last_commits: DataFrame) -> DataFrame:
    """Per group-partition with an observed commit: `commit_lag_seconds` = the commit time minus
    the append time of the last consumed message, read from the first sample at or after the
    commit (the committed offset is unchanged from the commit to the next one)."""
    keys = list(GROUP_PARTITION_KEYS)
    after = series.join(last_commits, keys).where(F.col("sampled_at") >= F.col("last_commit_at"))
    at_commit = after.groupBy(*keys, "last_commit_at").agg(
        F.min_by("consumed_timestamp", "sampled_at").alias("consumed_at_commit")
    )
    lag = non_negative(seconds_between(F.col("last_commit_at"), F.col("consumed_at_commit")))
    return at_commit.select(*keys, lag.alias("commit_lag_seconds"))
