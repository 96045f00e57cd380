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
    MICROS_PER_SECOND,
    PARTITION_KEYS,
    newest,
    non_negative,
    rate,
    ratio,
    seconds_between,
    seconds_since,
)
from monitor.evaluate.transforms.inputs import Inputs
from monitor.evaluate.transforms.retention import with_data_loss
from monitor.evaluate.transforms.rollups import newest_run, of_newest_run
from monitor.evaluate.transforms.status_columns import entry, millis, with_status

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
    `start_offset`, `end_offset` and those in _PARTITION_COLUMNS). It and the group states are
    small next to the group-partitions (one row per partition, per group): they are broadcast,
    so the group-partitions are shuffled once, in `key_summaries`.
    """
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
        key_summaries(inputs, window_commits)
        .join(F.broadcast(partitions), list(PARTITION_KEYS), "left")
        .join(F.broadcast(states), ["cluster", "group_id"], "left")
        .withColumn("end_offset", F.coalesce(F.col("end_offset"), F.col("partition_end_offset")))
        .withColumn("start_offset", F.coalesce(F.col("start_offset"), F.col("partition_start_offset")))
        .withColumn("group_state", F.coalesce(F.col("group_state"), F.lit("Unknown")))
    )
    frame = _with_lag(frame, inputs.now)
    frame = frame.join(F.broadcast(newest_run(inputs.collection_runs)), "cluster", "left")
    frame = frame.withColumn("sampled", sampled(inputs.now)).drop("run_started_at")
    return with_data_loss(frame, inputs.now)


def sampled(now: datetime | Column) -> Column:
    """`sampled`: the current row is a sample of the newest offsets run that reached the cluster
    (when runs are known), not older than SAMPLE_STALE_AFTER, with a known lag (a run that could
    not list the partition's offsets leaves it null). A row that is not is carried from an older
    sample: the rules neither match it nor resolve what they found on it (engine.py)."""
    return F.coalesce(F.col("lag").isNotNull() & of_newest_run(F.col("sampled_at"), now), F.lit(False))


_WORK_COLUMNS: tuple[str, ...] = (
    "first_at", "last_at", "first_committed_offset", "last_committed_offset", "first_lag", "observed_at",
    "entries", "consumed", "trend_n", "trend_sxx", "trend_syy", "trend_sxy",
)  # fmt: skip
"""Columns of key_summaries' own work, not part of its result."""


def key_summaries(inputs: Inputs, window_commits: int) -> DataFrame:
    """Per row of `latest_group_offsets` (its columns kept): `consume_rate` (committed offset
    change per second between the oldest and newest sample; negative after a rewind),
    `window_start_lag`, `last_commit_at` (the newest observed commit, from the window's
    observations or the row's `last_commit_observed_at`; null if never), `commit_lag_seconds` and
    the sliding-window `status` (status.py).

    The window's samples (`group_offsets` plus the current row) and the commit observations are
    brought together per key by one grouping, the only shuffle of the group-partitions: each key's
    samples become an array that the per-key values are computed from.
    """
    keys = list(GROUP_PARTITION_KEYS)
    is_sample = F.col("sampled_at").isNotNull()
    window_entry = entry(F.col("sampled_at"), F.col("committed_offset"), F.col("lag"))
    # Hash-partitioned by key first: the grouping then needs no partial aggregation before a
    # shuffle (which, for lists, only copies them), and no second shuffle after it.
    summaries = (
        _key_rows(inputs)
        .repartition(*keys)
        .groupBy(*keys)
        .agg(
            F.first("current", ignorenulls=True).alias("current"),
            *_endpoint_aggregates(),
            F.max("observed_at").alias("observed_at"),
            F.collect_list(F.when(is_sample & F.col("lag").isNotNull(), window_entry)).alias("entries"),
            F.collect_list(F.when(is_sample, F.struct("sampled_at", "consumed_timestamp"))).alias("consumed"),
            *_trend_aggregates(),
        )
    )
    consumed = rate(
        F.col("first_committed_offset"), F.col("last_committed_offset"), F.col("first_at"), F.col("last_at")
    )
    frame = (
        summaries.where(F.col("current").isNotNull())  # the universe is latest_group_offsets
        .select(*keys, "current.*", *_WORK_COLUMNS)
        .select(
            "*",
            F.greatest(F.col("last_commit_observed_at"), F.col("observed_at")).alias("last_commit_at"),
            consumed.alias("consume_rate"),
            F.col("first_lag").alias("window_start_lag"),
            _trend_error().alias("lag_trend_error"),
        )
        .withColumn("commit_lag_seconds", _commit_lag(F.col("consumed"), F.col("last_commit_at")))
    )
    return with_status(frame, "entries", millis(F.col("last_commit_at")), inputs.now, window_commits).drop(
        *_WORK_COLUMNS
    )


def _key_rows(inputs: Inputs) -> DataFrame:
    """The current rows (with all their columns in the struct `current`), the window's samples
    and the commit observations (`observed_at`), in one frame of shared columns."""
    keys = list(GROUP_PARTITION_KEYS)
    current = inputs.latest_group_offsets
    row = F.struct(*[F.col(c) for c in current.columns if c not in keys])
    no_row = F.lit(None).cast(current.select(row.alias("current")).schema["current"].dataType)
    no_time = F.lit(None).cast("timestamp")
    no_offset = F.lit(None).cast("bigint")
    sample = (*keys, "sampled_at", "committed_offset", "lag", "consumed_timestamp")
    observations = inputs.commit_observations.select(
        *keys, no_time.alias("sampled_at"), no_offset.alias("committed_offset"), no_offset.alias("lag"),
        no_time.alias("consumed_timestamp"), no_row.alias("current"), "observed_at",
    )  # fmt: skip
    return (
        current.select(*sample, row.alias("current"), no_time.alias("observed_at"))
        .unionByName(
            inputs.group_offsets.select(*sample, no_row.alias("current"), no_time.alias("observed_at"))
        )
        .unionByName(observations)
    )


def _endpoint_aggregates() -> list[Column]:
    """common.endpoints of the samples: the oldest and newest sample time, and the committed
    offset (and the lag) at them. Rows without `sampled_at` (commit observations) are skipped."""
    time = F.col("sampled_at")
    return [
        F.min(time).alias("first_at"),
        F.max(time).alias("last_at"),
        F.min_by("committed_offset", time).alias("first_committed_offset"),
        F.max_by("committed_offset", time).alias("last_committed_offset"),
        F.min_by("lag", time).alias("first_lag"),
    ]


def _trend_aggregates() -> list[Column]:
    """The sums of the least-squares line of the lag over time (seconds) through the window's
    samples: their count and centred sums of squares and products."""
    lag = F.when(F.col("sampled_at").isNotNull(), F.col("lag")).cast("double")
    at = F.unix_micros(F.col("sampled_at")) / F.lit(MICROS_PER_SECOND)
    return [
        F.regr_count(lag, at).alias("trend_n"),
        F.regr_sxx(lag, at).alias("trend_sxx"),
        F.regr_syy(lag, at).alias("trend_syy"),
        F.regr_sxy(lag, at).alias("trend_sxy"),
    ]


def _trend_error() -> Column:
    """`lag_trend_error`: the standard error of the lag's slope over the window (records/s), from
    the scatter of the samples around the fitted line; null below 3 samples or in one instant.
    The slope is the produce rate minus the consume rate: its error is their difference's."""
    n, sxx, sxy = F.col("trend_n").cast("double"), F.col("trend_sxx"), F.col("trend_sxy")
    residual = F.greatest(F.col("trend_syy") - ratio(sxy * sxy, sxx), F.lit(0.0))
    return F.when((n >= 3) & (sxx > 0), F.sqrt(residual / (n - 2) / sxx))


def _commit_lag(consumed: Column, last_commit_at: Column) -> Column:
    """`commit_lag_seconds`: the commit time minus the append time of the last consumed message,
    read from the first sample at or after the commit (the committed offset is unchanged from the
    commit to the next one). Null without an observed commit or a sample after it."""
    after = F.filter(consumed, lambda x: x["sampled_at"] >= last_commit_at)
    at_commit = F.array_min(after)["consumed_timestamp"]
    return non_negative(seconds_between(last_commit_at, at_commit))


def _with_lag(frame: DataFrame, now: Column) -> DataFrame:
    """The lag columns of one group-partition row (see `monitor.core.derived` for their meanings)."""
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
        *catch_up_forecast(F.col("offset_lag"), F.col("consume_rate"), F.col("produce_rate")),
        (F.col("committed_offset") < F.col("start_offset")).alias("data_loss_occurred"),
        method.alias("lag_seconds_method"),
        error.alias("lag_seconds_error"),
        beyond_end(F.col("committed_offset"), F.col("end_offset"), F.col("partition_end_offset")).alias(
            "committed_beyond_end"
        ),
    )


def beyond_end(committed: Column, *ends: Column) -> Column:
    """The committed offset is above the newest of the known log end offsets (vocabulary
    COMMITTED_BEYOND_END); false when no end is known."""
    return F.coalesce(committed > F.greatest(*ends), F.lit(False))


def time_to_catch_up(offset_lag: Column, consume_rate: Column, produce_rate: Column) -> Column:
    """offset_lag / (consume_rate - produce_rate) while the group gains on the producers; 0 when
    caught up; null when it does not gain or a rate is unknown (never infinite)."""
    gaining = consume_rate > produce_rate
    return F.when(offset_lag == 0, F.lit(0.0)).when(gaining, ratio(offset_lag, consume_rate - produce_rate))


CATCH_UP_SPREAD_ERRORS = 2.0
"""The catch-up forecast's interval: the net rate (consume - produce) give or take this many
standard errors of the lag's trend over the window (about 95 % for a line through many samples)."""


def catch_up_forecast(offset_lag: Column, consume_rate: Column, produce_rate: Column) -> list[Column]:
    """`catch_up_low_seconds`, `catch_up_high_seconds` and `catching_up` (monitor.core.derived)
    of a row with `lag_trend_error`: time_to_catch_up's division at the net rate plus and minus
    CATCH_UP_SPREAD_ERRORS errors (no spread known: both ends at the net rate itself)."""
    gain = consume_rate - produce_rate
    spread = F.coalesce(F.col("lag_trend_error"), F.lit(0.0)) * F.lit(CATCH_UP_SPREAD_ERRORS)
    caught_up = offset_lag == 0
    low = F.when(caught_up, F.lit(0.0)).when(gain > 0, ratio(offset_lag, gain + spread))
    high = F.when(caught_up, F.lit(0.0)).when(gain - spread > 0, ratio(offset_lag, gain - spread))
    return [
        low.alias("catch_up_low_seconds"),
        high.alias("catch_up_high_seconds"),
        F.when(~caught_up, gain > 0).alias("catching_up"),
    ]
