"""Roll-ups: group-partitions into group-topics, those into groups, partitions (and the
group-topics' data loss) into topics, and partitions, brokers and collection runs into clusters.

How each lag column rolls up (`monitor.core.derived` names only the sum of offset_lag):
- offset_lag, consume_rate, produce_rate: summed;
- lag_seconds, append_lag_seconds, commit_lag_seconds: the largest (the oldest unconsumed
  message of the set is the oldest of its partitions');
- time_since_last_commit_seconds: the smallest (when the group last committed anything);
- time_to_catch_up_seconds: the largest (caught up when the slowest partition is), null when any
  lagging partition does not gain on its producers; catch_up_low_seconds and
  catch_up_high_seconds the same way (null when any lagging partition's is); catching_up: every
  lagging partition catches up (null when any lagging partition's rates are unknown);
- time_until_data_loss_seconds, data_loss_margin_seconds: the smallest; data_loss_occurred: any;
- sampled: all (a roll-up is sampled when every one of its group-partitions is);
- partitions_beyond_end: the group-partitions whose committed offset is beyond the log end;
- the consumer advice (advice.py) from its parts: the needs summed, the hottest partition's kept.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.core.vocabulary import REACHED_RUN_STATUSES
from monitor.evaluate.transforms.advice import consumer_advice, need_parts, regrouped_need_parts
from monitor.evaluate.transforms.common import newest, seconds_since
from monitor.evaluate.transforms.status import as_group_status, worst

OFFSETS_JOB = "offsets"
REACHED = REACHED_RUN_STATUSES
"""Run statuses that reached the cluster (a partial run failed only for some entities)."""
FINISHED = (*REACHED, "failed")
UNREACHABLE_AFTER = timedelta(minutes=2)
SAMPLE_STALE_AFTER = timedelta(minutes=5)
"""A group sample older than this is not a sample of this evaluation, whatever run wrote it (the
age at which the default CollectionStale rule starts to count)."""


def _same_at_every_level() -> list[Column]:
    """The lag roll-ups that aggregate the same way from group-partitions and from roll-ups of
    them: sums of sums, extremes of extremes."""
    return [
        F.sum("offset_lag").alias("offset_lag"),
        F.max("lag_seconds").alias("lag_seconds"),
        F.max("append_lag_seconds").alias("append_lag_seconds"),
        F.max("commit_lag_seconds").alias("commit_lag_seconds"),
        F.min("time_since_last_commit_seconds").alias("time_since_last_commit_seconds"),
        F.sum("consume_rate").alias("consume_rate"),
        F.sum("produce_rate").alias("produce_rate"),
        F.min("time_until_data_loss_seconds").alias("time_until_data_loss_seconds"),
        F.min("data_loss_margin_seconds").alias("data_loss_margin_seconds"),
        F.bool_or("data_loss_occurred").alias("data_loss_occurred"),
        *_forecast_aggregates(),
        F.bool_and("sampled").alias("sampled"),
        F.max("group_state").alias("group_state"),
        F.max("members").alias("members"),
    ]


def _forecast_aggregates() -> list[Column]:
    """The catch-up forecast of a roll-up, from group-partitions or from roll-ups of them alike:
    caught up when the slowest lagging partition is (the largest of each end), known only when
    every lagging row's is; catching up when every lagging row is."""
    lagging = F.col("offset_lag") > 0

    def slowest(column: str) -> Column:
        return F.when(F.count_if(lagging & F.col(column).isNull()) == 0, F.max(column)).alias(column)

    every = F.when(F.count_if(lagging & F.col("catching_up").isNull()) == 0, F.bool_and("catching_up"))
    return [slowest("catch_up_low_seconds"), slowest("catch_up_high_seconds"), every.alias("catching_up")]


def _lag_aggregates() -> list[Column]:
    """Aggregates of group-partition rows into the lag columns (see the module docstring), plus
    `partitions`, `max_offset_lag`, `max_lag_seconds`, `group_state` and `members`, and the
    parts a coarser roll-up needs: `lagging_without_estimate`, `max_time_to_catch_up_seconds`,
    `window_start_lag` and the advice's `need_rate` and `hottest` (beyond the group_topic
    contract: `conform` leaves them out of the entity)."""
    lagging_without_estimate = (F.col("offset_lag") > 0) & F.col("time_to_catch_up_seconds").isNull()
    catch_up = F.when(F.count_if(lagging_without_estimate) == 0, F.max("time_to_catch_up_seconds"))
    return [
        *_same_at_every_level(),
        F.count(F.lit(1)).alias("partitions"),
        catch_up.alias("time_to_catch_up_seconds"),
        F.max("offset_lag").alias("max_offset_lag"),
        F.max("lag_seconds").alias("max_lag_seconds"),
        F.count_if(lagging_without_estimate).alias("lagging_without_estimate"),
        F.max("time_to_catch_up_seconds").alias("max_time_to_catch_up_seconds"),
        F.sum("window_start_lag").alias("window_start_lag"),
        *need_parts(),
    ]


def _regrouped() -> list[Column]:
    """`_lag_aggregates` of group-topic rows (rolled up from group-partitions) into coarser ones:
    sums of sums, extremes of extremes, and the catch-up time from its parts."""
    catch_up = F.when(F.sum("lagging_without_estimate") == 0, F.max("max_time_to_catch_up_seconds"))
    return [
        *_same_at_every_level(),
        F.sum("partitions").alias("partitions"),
        catch_up.alias("time_to_catch_up_seconds"),
        F.max("max_offset_lag").alias("max_offset_lag"),
        F.max("max_lag_seconds").alias("max_lag_seconds"),
        *regrouped_need_parts(),
    ]


def group_topics(group_partitions: DataFrame) -> DataFrame:
    """Per (cluster, group, topic), from `lag.group_partition_frame`: the lag roll-ups, the worst
    partition status (STOP, STALL and REWIND kept apart) and the parts `groups` rolls up from."""
    return group_partitions.groupBy("cluster", "group_id", "topic").agg(
        *_lag_aggregates(),
        worst(F.col("status")).alias("status"),
        F.count_if(F.col("committed_beyond_end")).cast("int").alias("partitions_beyond_end"),
    )


def groups(group_topics: DataFrame) -> DataFrame:
    """Per (cluster, group), from `group_topics` (a group has far fewer topics than partitions,
    so this rolls up thousands of rows, not millions): the lag roll-ups, `topics`, the worst
    status as a group status (OK, WARN, ERR) and `lag_growing` (total offset lag above the total
    at the window's first samples), and the consumer advice (advice.py)."""
    rolled = group_topics.groupBy("cluster", "group_id").agg(
        *_regrouped(),
        F.count(F.lit(1)).alias("topics"),
        as_group_status(worst(F.col("status"))).alias("status"),
        (F.sum("offset_lag") > F.sum("window_start_lag")).alias("lag_growing"),
        F.sum("partitions_beyond_end").cast("int").alias("partitions_beyond_end"),
    )
    return rolled.select("*", *consumer_advice())


def topics(partitions: DataFrame, group_topics: DataFrame) -> DataFrame:
    """Per (cluster, topic) of the partition frame: sums and extremes of its partitions, and the
    soonest data loss of any group on it (from `group_topics`)."""
    data_loss = group_topics.groupBy("cluster", "topic").agg(
        F.min("time_until_data_loss_seconds").alias("min_time_until_data_loss_seconds"),
        F.min("data_loss_margin_seconds").alias("min_data_loss_margin_seconds"),
    )
    per_topic = partitions.groupBy("cluster", "topic").agg(
        F.count(F.lit(1)).alias("partitions"),
        F.sum("produce_rate").alias("produce_rate"),
        F.sum("produce_bytes_rate").alias("produce_bytes_rate"),
        F.sum("size_bytes").alias("size_bytes"),
        F.max("size_ratio").alias("max_size_ratio"),
        F.min("time_coverage_seconds").alias("min_time_coverage_seconds"),
        F.max("retention_ms").alias("retention_ms"),
        F.max("retention_bytes").alias("retention_bytes"),
        F.max("retention_shortfall_seconds").alias("retention_shortfall_seconds"),
        F.max("replicas_lost").alias("max_replicas_lost"),
        F.count_if(F.col("under_replicated")).alias("under_replicated_partitions"),
        F.count_if(F.col("under_min_isr")).alias("under_min_isr_partitions"),
        F.count_if(F.col("offline")).alias("offline_partitions"),
    )
    return per_topic.join(data_loss, ["cluster", "topic"], "left")


def clusters(
    partitions: DataFrame, brokers: DataFrame, collection_runs: DataFrame, now: datetime | Column
) -> DataFrame:
    """Per cluster seen in the partitions, brokers or runs: broker and partition counts, the
    largest leader imbalance, `collection_age_seconds` (since the newest offsets run that reached
    the cluster ended) and `unreachable` (the newest finished offsets run failed and none reached
    the cluster within UNREACHABLE_AFTER)."""
    per_broker = brokers.groupBy("cluster").agg(
        F.count_if(~F.col("unregistered")).alias("brokers"),
        F.count_if(F.col("down")).alias("brokers_down"),
        F.max("leader_imbalance").alias("max_leader_imbalance"),
    )
    per_partition = partitions.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("partitions"),
        F.count_if(F.col("offline")).alias("offline_partitions"),
        F.count_if(F.col("under_replicated")).alias("under_replicated_partitions"),
        F.count_if(F.col("under_min_isr")).alias("under_min_isr_partitions"),
    )
    names = (
        brokers.select("cluster")
        .unionByName(partitions.select("cluster"))
        .unionByName(collection_runs.where(F.col("cluster").isNotNull()).select("cluster"))
        .distinct()
    )
    frame = (
        names.join(per_broker, "cluster", "left")
        .join(per_partition, "cluster", "left")
        .join(collection_health(collection_runs, now), "cluster", "left")
    )
    counts = ["brokers", "brokers_down", "partitions", "offline_partitions"]
    counts += ["under_replicated_partitions", "under_min_isr_partitions"]
    return frame.fillna(0, subset=counts).fillna(False, subset=["unreachable"])


def newest_run(collection_runs: DataFrame, job: str = OFFSETS_JOB) -> DataFrame:
    """Per cluster: `run_started_at`, the start of the newest run of `job` (the offsets job by
    default) that reached the cluster (ok or partial). Its samples are dated after it; a key
    sampled before it was missed by that run."""
    runs = collection_runs.where((F.col("job") == job) & F.col("status").isin(*REACHED))
    return runs.groupBy("cluster").agg(F.max("started_at").alias("run_started_at"))


def of_newest_run(at: Column, now: datetime | Column) -> Column:
    """A key's newest sample, dated `at`, is one of this evaluation: not older than
    SAMPLE_STALE_AFTER, and of the newest run that reached the cluster (`run_started_at` of
    `newest_run`, joined beside it; null when no run is known). Null when `at` is."""
    fresh = seconds_since(at, now) <= SAMPLE_STALE_AFTER.total_seconds()
    return fresh & (F.col("run_started_at").isNull() | (at >= F.col("run_started_at")))


def collection_health(collection_runs: DataFrame, now: datetime | Column) -> DataFrame:
    """Per cluster with offsets runs: `collection_age_seconds` and `unreachable`."""
    runs = collection_runs.where((F.col("job") == OFFSETS_JOB) & F.col("status").isin(*FINISHED))
    ended = F.coalesce(F.col("finished_at"), F.col("started_at"))
    reached = (
        runs.where(F.col("status").isin(*REACHED)).groupBy("cluster").agg(F.max(ended).alias("reached_at"))
    )
    latest = newest(runs, ["cluster"], "started_at").select("cluster", F.col("status").alias("latest_status"))
    recently = seconds_since(F.col("reached_at"), now) <= UNREACHABLE_AFTER.total_seconds()
    unreachable = (F.col("latest_status") == "failed") & ~F.coalesce(recently, F.lit(False))
    return latest.join(reached, "cluster", "left").select(
        "cluster",
        seconds_since(F.col("reached_at"), now).alias("collection_age_seconds"),
        unreachable.alias("unreachable"),
    )
