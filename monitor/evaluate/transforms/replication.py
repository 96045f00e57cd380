"""Replication (DOMAIN.md 3): per-partition replica health and failure domains, and per-broker
leadership balance, replicas and disk headroom."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.evaluate.transforms.common import DEFAULT_MIN_INSYNC_REPLICAS, PARTITION_KEYS, newest, ratio


def partition_replication(partitions: DataFrame, brokers: DataFrame, settings: DataFrame) -> DataFrame:
    """Per row of `partitions`: `leader` (null when offline; a negative id counts as none),
    `replicas` (the assignment, preferred leader first), `replication_factor`, `isr`,
    `min_insync_replicas`, `replicas_lost`, `under_replicated`, `under_min_isr`, `offline`,
    `non_preferred_leader` and `replicas_sharing_rack`.

    `brokers` gives each broker's rack; `settings` is `common.topic_settings` (min.insync.replicas
    defaults to 1 when the topic's config is unknown).
    """
    keys = list(PARTITION_KEYS)
    leader = F.when(F.col("leader") >= 0, F.col("leader"))
    min_isr = F.coalesce(F.col("min_insync_replicas"), F.lit(DEFAULT_MIN_INSYNC_REPLICAS))
    frame = (
        partitions.select(
            *keys,
            leader.alias("leader"),
            F.col("replicas"),
            F.size("replicas").alias("replication_factor"),
            F.size("isr").alias("isr"),
        )
        .join(settings.select("cluster", "topic", "min_insync_replicas"), ["cluster", "topic"], "left")
        .withColumn("min_insync_replicas", min_isr)
        .join(replicas_sharing_rack(partitions, brokers), keys, "left")
    )
    return frame.select(
        *keys,
        "leader",
        "replicas",
        "replication_factor",
        "isr",
        "min_insync_replicas",
        (F.col("replication_factor") - F.col("isr")).alias("replicas_lost"),
        (F.col("isr") < F.col("replication_factor")).alias("under_replicated"),
        (F.col("isr") < F.col("min_insync_replicas")).alias("under_min_isr"),
        F.col("leader").isNull().alias("offline"),
        _non_preferred().alias("non_preferred_leader"),
        F.coalesce(F.col("replicas_sharing_rack"), F.lit(0)).alias("replicas_sharing_rack"),
    )


def _non_preferred() -> Column:
    """A leader that is not the first assigned replica (false when offline)."""
    preferred = F.get(F.col("replicas"), 0)
    return F.coalesce(F.col("leader").isNotNull() & (F.col("leader") != preferred), F.lit(False))


def replicas_sharing_rack(partitions: DataFrame, brokers: DataFrame) -> DataFrame:
    """Per partition: replicas placed in a rack that already holds another of its replicas
    (replicas with a known rack minus distinct racks; replicas of unknown rack are not counted)."""
    keys = list(PARTITION_KEYS)
    placed = partitions.select(*keys, F.explode("replicas").alias("broker_id")).join(
        brokers.select("cluster", "broker_id", "rack"), ["cluster", "broker_id"], "left"
    )
    return placed.groupBy(*keys).agg(
        (F.count("rack") - F.countDistinct("rack")).cast("int").alias("replicas_sharing_rack")
    )


def broker_frame(brokers: DataFrame, replication: DataFrame, broker_disks: DataFrame) -> DataFrame:
    """Per row of `brokers`: `rack`, `up`, `down` (not up, and still registered), `unregistered`
    (decommissioned: gone, not down), `leaders`, `fair_share_leaders` (partitions of
    the cluster / live brokers), `leader_imbalance`, `non_preferred_leaders`, `replicas`, and disk
    totals over the newest sample of each of its log dirs.

    `replication` is the output of `partition_replication`.
    """
    live = brokers.where(F.col("up")).groupBy("cluster").agg(F.count(F.lit(1)).alias("live_brokers"))
    per_cluster = replication.groupBy("cluster").agg(F.count(F.lit(1)).alias("cluster_partitions"))
    fair_share = per_cluster.join(live, "cluster", "full").select(
        "cluster", ratio(F.col("cluster_partitions"), F.col("live_brokers")).alias("fair_share_leaders")
    )
    led = (
        replication.where(F.col("leader").isNotNull())
        .groupBy("cluster", F.col("leader").alias("broker_id"))
        .agg(
            F.count(F.lit(1)).alias("leaders"),
            F.count_if(F.col("non_preferred_leader")).alias("non_preferred_leaders"),
        )
    )
    hosted = (
        replication.select("cluster", F.explode("replicas").alias("broker_id"))
        .groupBy("cluster", "broker_id")
        .agg(F.count(F.lit(1)).alias("replicas"))
    )
    disks = (
        newest(broker_disks, ["cluster", "broker_id", "log_dir"])
        .groupBy("cluster", "broker_id")
        .agg(F.sum("total_bytes").alias("disk_total_bytes"), F.sum("usable_bytes").alias("disk_usable_bytes"))
    )
    frame = (
        brokers.select("cluster", "broker_id", "rack", "up", "unregistered_at")
        .join(fair_share, "cluster", "left")
        .join(led, ["cluster", "broker_id"], "left")
        .join(hosted, ["cluster", "broker_id"], "left")
        .join(disks, ["cluster", "broker_id"], "left")
        .withColumn("leaders", F.coalesce(F.col("leaders"), F.lit(0)))
        .withColumn("non_preferred_leaders", F.coalesce(F.col("non_preferred_leaders"), F.lit(0)))
        .withColumn("replicas", F.coalesce(F.col("replicas"), F.lit(0)))
    )
    return frame.select(
        "*",
        (~F.col("up") & F.col("unregistered_at").isNull()).alias("down"),
        F.col("unregistered_at").isNotNull().alias("unregistered"),
        ratio(F.col("leaders"), F.col("fair_share_leaders")).alias("leader_imbalance"),
        (F.lit(1.0) - ratio(F.col("disk_usable_bytes"), F.col("disk_total_bytes"))).alias("disk_used_ratio"),
    )
