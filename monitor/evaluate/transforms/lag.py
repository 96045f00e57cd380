"""Consumer lag (DOMAIN.md 1) per group-partition: offset lag, lag in seconds, append lag, commit
lag, rates, time to catch up, data loss and the sliding-window status.

The current values come from `latest_group_offsets` (one row per group-partition, the universe of
this entity); the window's samples are `group_offsets` plus that current row.
"""

from __future__ import annotations

from collections.abc import Callable
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
from monitor.evaluate.transforms.inputs import READ_COLUMNS, Inputs
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
    "samples", "points", "first_at", "last_at", "first_committed_offset", "last_committed_offset",
    "first_lag", "observed_at", "entries", "consumed", "trend_n", "trend_sxx", "trend_syy", "trend_sxy",
)  # fmt: skip
"""Columns of key_summaries' own work, not part of its result."""


def key_summaries(inputs: Inputs, window_commits: int) -> DataFrame:
    """Per row of `latest_group_offsets` (the columns read of it): `consume_rate` (committed
    offset change per second between the oldest and newest sample; negative after a rewind),
    `window_start_lag`, `last_commit_at` (the newest observed commit, `latest_commits`; null if
    never), `commit_lag_seconds`,
    `lag_trend_error` and the sliding-window `status` (status.py).

    Every value is computed from one row per key holding the key's window samples as an array
    (`windows`), in a projection: no shuffle of the group-partitions, when the extract has
    PostgreSQL gather the samples.
    """
    # In time order (null fields first at one time): the sums below add in the same order
    # however the samples were gathered.
    samples = F.col("samples")
    first, last = F.get(samples, 0), F.get(samples, F.size(samples) - 1)
    points = F.col("points")
    frame = (
        windows(inputs)
        .withColumn("samples", F.array_sort(samples))
        .withColumn("points", F.filter(samples, lambda s: s["lag"].isNotNull()))
        .select(
            "*",
            F.timestamp_micros(first["at"]).alias("first_at"),
            F.timestamp_micros(last["at"]).alias("last_at"),
            first["offset"].alias("first_committed_offset"),
            last["offset"].alias("last_committed_offset"),
            first["lag"].alias("first_lag"),
            F.transform(points, lambda s: entry(F.timestamp_micros(s["at"]), s["offset"], s["lag"])).alias(
                "entries"
            ),
            F.transform(
                samples,
                lambda s: F.struct(
                    F.timestamp_micros(s["at"]).alias("sampled_at"),
                    F.timestamp_micros(s["consumed"]).alias("consumed_timestamp"),
                ),
            ).alias("consumed"),
        )
    )
    frame = _with_trend_sums(frame, "points")
    consumed = rate(
        F.col("first_committed_offset"), F.col("last_committed_offset"), F.col("first_at"), F.col("last_at")
    )
    frame = frame.select(
        "*",
        F.col("observed_at").alias("last_commit_at"),
        consumed.alias("consume_rate"),
        F.col("first_lag").alias("window_start_lag"),
        _trend_error().alias("lag_trend_error"),
    ).withColumn("commit_lag_seconds", _commit_lag(F.col("consumed"), F.col("last_commit_at")))
    return with_status(frame, "entries", millis(F.col("last_commit_at")), inputs.now, window_commits).drop(
        *_WORK_COLUMNS
    )


SAMPLE_FIELDS = "at bigint, offset bigint, lag bigint, consumed bigint"
"""A window sample in `windows`' `samples`: its time and consumed timestamp in epoch microseconds,
its committed offset and lag."""


def windows(inputs: Inputs) -> DataFrame:
    """One row per row of `latest_group_offsets`: the columns read of it, `observed_at` (the
    newest commit observation, null if none) and `samples`, the window's samples of the key
    (`group_offsets` and the row itself, those with a `sampled_at`; SAMPLE_FIELDS) in any order.

    From `Inputs.group_windows` (gathered by PostgreSQL, inputs.GROUP_WINDOWS) when given, else by
    one grouping of the three tables here, the only shuffle of the group-partitions (hash
    partitioned by key first: the grouping then needs no partial aggregation, which for lists
    only copies them, and no second shuffle)."""
    columns = [*READ_COLUMNS["latest_group_offsets"], "observed_at"]
    if inputs.group_windows is not None:
        at = F.coalesce(F.col("window_at"), F.array().cast("array<bigint>"))

        def gathered(time: Column, i: Column) -> Column:
            values = [F.get(F.col(f"window_{name}"), i).alias(name) for name in ("offset", "lag", "consumed")]
            return F.struct(time.alias("at"), *values)

        return inputs.group_windows.select(*columns, F.transform(at, gathered).alias("samples"))
    keys = list(GROUP_PARTITION_KEYS)
    current = inputs.latest_group_offsets
    row = F.struct(*[F.col(c) for c in READ_COLUMNS["latest_group_offsets"] if c not in keys])
    no_row = F.lit(None).cast(current.select(row.alias("current")).schema["current"].dataType)
    no_time = F.lit(None).cast("timestamp")
    sample = F.struct(
        F.unix_micros(F.col("sampled_at")).alias("at"),
        F.col("committed_offset").cast("bigint").alias("offset"),
        F.col("lag").cast("bigint").alias("lag"),
        F.unix_micros(F.col("consumed_timestamp")).alias("consumed"),
    )
    no_sample = F.lit(None).cast(f"struct<{SAMPLE_FIELDS.replace(' bigint', ': bigint')}>")

    def key_rows(frame: DataFrame, one: Column, current: Column, observed_at: Column) -> DataFrame:
        values = (one.alias("sample"), current.alias("current"), observed_at.alias("observed_at"))
        return frame.select(*keys, *values)

    rows = (
        key_rows(current, sample, row, no_time)
        .unionByName(key_rows(inputs.group_offsets, sample, no_row, no_time))
        .unionByName(key_rows(inputs.latest_commits, no_sample, no_row, F.col("observed_at")))
    )
    grouped = (
        rows.repartition(*keys)
        .groupBy(*keys)
        .agg(
            F.first("current", ignorenulls=True).alias("current"),
            F.max("observed_at").alias("observed_at"),
            F.collect_list(F.when(F.col("sample.at").isNotNull(), F.col("sample"))).alias("samples"),
        )
    )
    # The struct holds the columns read after the keys, in order: the same columns as above.
    return grouped.where(F.col("current").isNotNull()).select(*keys, "current.*", "observed_at", "samples")


def _with_trend_sums(frame: DataFrame, points: str) -> DataFrame:
    """`frame` plus `trend_n`, `trend_sxx`, `trend_syy` and `trend_sxy`: the count and the centred
    sums of squares and products of the least-squares line of the lag over time (seconds) through
    the array `points` (samples with a lag, SAMPLE_FIELDS), as regr_count, regr_sxx, regr_syy
    and regr_sxy give them. Time counts from the first point and the sums are taken around the
    means (a second pass), so that neither loses precision to epoch seconds."""
    array = F.col(points)
    origin = F.get(array, 0)["at"]
    mean_x, mean_y = F.col("trend_mean_x"), F.col("trend_mean_y")

    def x(s: Column) -> Column:
        return (s["at"] - origin) / F.lit(float(MICROS_PER_SECOND))

    def y(s: Column) -> Column:
        return s["lag"].cast("double")

    def total(value: Callable[[Column], Column]) -> Column:
        return F.when(F.size(array) > 0, F.aggregate(array, F.lit(0.0), lambda acc, s: acc + value(s)))

    means = frame.select(
        "*",
        F.size(array).cast("bigint").alias("trend_n"),
        ratio(total(x), F.size(array)).alias("trend_mean_x"),
        ratio(total(y), F.size(array)).alias("trend_mean_y"),
    )
    return means.select(
        "*",
        total(lambda s: (x(s) - mean_x) * (x(s) - mean_x)).alias("trend_sxx"),
        total(lambda s: (y(s) - mean_y) * (y(s) - mean_y)).alias("trend_syy"),
        total(lambda s: (x(s) - mean_x) * (y(s) - mean_y)).alias("trend_sxy"),
    ).drop("trend_mean_x", "trend_mean_y")


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
