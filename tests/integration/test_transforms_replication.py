"""Replication, brokers and clusters on a hand-made world, evaluated at AT.

Brokers 1 and 2 in rack a, 3 in rack b, 4 in rack c and down. Topic t (min.insync.replicas 2):
t-0 healthy but two replicas in rack a; t-1 one replica lost; t-2 two lost and under min ISR;
t-3 offline (leader -1); t-4 led by a non-preferred leader. Topic u: one replica, no configs.
The end-to-end probe: broker 1 passed twice, broker 2's newest round failed, broker 3 is slow,
broker 4 has no probe samples.
Clusters c2 and c3 only have runs: c2's newest offsets run failed and none succeeded for 10
minutes (unreachable); c3's failed too but one succeeded 99 s ago (reachable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.fixtures.spark import derived_once
from tests.fixtures.transform_inputs import World, ago, assert_finite, expect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


def run(world: World, cluster: str, job: str, status: str, started: int, finished: int | None) -> None:
    world.add("collection_runs", cluster=cluster, job=job, status=status, started_at=ago(started),
              finished_at=None if finished is None else ago(finished))  # fmt: skip


def replication_world() -> World:
    world = World()
    for broker, rack, up in ((1, "a", True), (2, "a", True), (3, "b", True), (4, "c", False)):
        world.add("brokers", broker_id=broker, rack=rack, up=up)
    assignments = [
        ("t", 0, 1, [1, 2, 3], [1, 2, 3]),
        ("t", 1, 2, [2, 3, 4], [2, 3]),
        ("t", 2, 3, [3, 4, 1], [3]),
        ("t", 3, -1, [4, 1, 2], []),
        ("t", 4, 3, [1, 3, 2], [1, 3, 2]),
        ("u", 0, 1, [1], [1]),
    ]
    for topic, partition, leader, replicas, isr in assignments:
        world.add("partitions", topic=topic, partition=partition, leader=leader, replicas=replicas, isr=isr)
    world.config("t", min_insync_replicas="2")
    disks = [
        (1, "/d1", 600, 1000, 500, None),
        (1, "/d1", 60, 1000, 400, None),  # the newest sample of /d1 counts
        (1, "/d2", 60, 2000, 1600, None),
        (2, "/d1", 60, 1000, 250, None),
        (3, "/d1", 60, None, None, "KafkaStorageException"),
    ]
    for broker, log_dir, seconds, total, usable, error in disks:
        world.add("broker_disks", broker_id=broker, log_dir=log_dir, sampled_at=ago(seconds),
                  total_bytes=total, usable_bytes=usable, error=error)  # fmt: skip
    run(world, "c1", "offsets", "ok", 40, 29)
    run(world, "c1", "offsets", "running", 5, None)
    run(world, "c1", "metadata", "failed", 5, 4)
    run(world, "c2", "offsets", "ok", 600, 598)
    run(world, "c2", "offsets", "failed", 60, 50)
    run(world, "c3", "offsets", "ok", 101, 99)
    run(world, "c3", "offsets", "failed", 20, 10)
    probes = [  # broker (its probe partition), seconds ago, ok, produce, end-to-end, commit
        (1, 70, True, 0.010, 0.030, 0.005),
        (1, 10, True, 0.004, 0.020, 0.003),
        (2, 70, True, 0.010, 0.030, 0.005),
        (2, 10, False, None, None, None),
        (3, 10, True, 0.400, 2.500, 0.100),
    ]
    for broker, seconds, ok, produce, end_to_end, commit in probes:
        world.add("probe_samples", partition=broker - 1, broker_id=broker, sampled_at=ago(seconds), ok=ok,
                  produce_seconds=produce, end_to_end_seconds=end_to_end, commit_seconds=commit)  # fmt: skip
    return world


@pytest.fixture(scope="module")
def derived(spark: SparkSession) -> dict[str, DataFrame]:
    return derived_once(replication_world().inputs(spark))


def test_partition_replication(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["topic", "partition", "leader", "replication_factor", "isr", "min_insync_replicas", "replicas_lost",
               "under_replicated", "under_min_isr", "offline", "non_preferred_leader", "replicas_sharing_rack"]  # fmt: skip
    expect(spark, derived["partition"], columns, [
        ("t", 0, 1, 3, 3, 2, 0, False, False, False, False, 1),
        ("t", 1, 2, 3, 2, 2, 1, True, False, False, False, 0),
        ("t", 2, 3, 3, 1, 2, 2, True, True, False, False, 0),
        ("t", 3, None, 3, 0, 2, 3, True, True, True, False, 1),
        ("t", 4, 3, 3, 3, 2, 0, False, False, False, True, 1),
        ("u", 0, 1, 1, 1, 1, 0, False, False, False, False, 0),
    ])  # fmt: skip


def test_topic_replication_rollup(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["topic", "partitions", "max_replicas_lost", "under_replicated_partitions",
               "under_min_isr_partitions", "offline_partitions"]  # fmt: skip
    expect(spark, derived["topic"], columns, [("t", 5, 3, 3, 2, 1), ("u", 1, 0, 0, 0, 0)])


def test_brokers_leadership_and_disks(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["broker_id", "rack", "up", "down", "leaders", "fair_share_leaders", "leader_imbalance",
               "non_preferred_leaders", "replicas", "disk_total_bytes", "disk_usable_bytes", "disk_used_ratio"]  # fmt: skip
    expect(spark, derived["broker"], columns, [
        (1, "a", True, False, 2, 2.0, 1.0, 0, 5, 3000, 2000, 1 / 3),
        (2, "a", True, False, 1, 2.0, 0.5, 0, 4, 1000, 250, 0.75),
        (3, "b", True, False, 2, 2.0, 1.0, 1, 4, None, None, None),
        (4, "c", False, True, 0, 2.0, 0.0, 0, 3, None, None, None),
    ])  # fmt: skip


def test_brokers_end_to_end_probe(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["broker_id", "probe_successes", "probe_failures", "probe_failing", "probe_produce_latency_seconds",
               "probe_end_to_end_latency_seconds", "probe_commit_latency_seconds"]  # fmt: skip
    expect(spark, derived["broker"], columns, [
        (1, 2, 0, False, 0.004, 0.020, 0.003),
        (2, 1, 1, True, None, None, None),
        (3, 1, 0, False, 0.400, 2.500, 0.100),
        (4, None, None, None, None, None, None),
    ])  # fmt: skip


def test_clusters(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["cluster", "brokers", "brokers_down", "partitions", "offline_partitions",
               "under_replicated_partitions", "under_min_isr_partitions", "max_leader_imbalance",
               "collection_age_seconds", "unreachable"]  # fmt: skip
    expect(spark, derived["cluster"], columns, [
        ("c1", 4, 1, 6, 1, 3, 2, 1.0, 29.0, False),
        ("c2", 0, 0, 0, 0, 0, 0, None, 598.0, True),
        ("c3", 0, 0, 0, 0, 0, 0, None, 99.0, False),
    ])  # fmt: skip


def test_no_nan_or_infinity(derived: dict[str, DataFrame]) -> None:
    assert_finite(derived)
