"""Retention on a hand-made world, evaluated at AT (samples at AT-610 s and AT-10 s).

- logs: retention.bytes caps it at 10 minutes of history though retention.ms promises 2 hours
  (retention shortfall); followers and a future replica do not count towards the size.
- payments (1 h, 10 MB): `settlement` about to lose data, by the time limit on p0 and by the size
  limit on p1 (the earlier wins); `laggard` past the time limit already (0, never negative).
- ledger: `archive` fell off the log (data loss occurred); the partition shrank (no byte rate).
- profiles (compact only) and forever (unlimited): nothing is at risk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.fixtures.spark import derived_once
from tests.fixtures.transform_inputs import World, ago, assert_finite, committed, expect, offsets, sizes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

TOPICS = ("logs", "payments", "ledger", "profiles", "forever")


def retention_world() -> World:
    world = World()
    for broker in (1, 2):
        world.add("brokers", broker_id=broker, rack=None)
    for topic, partitions in (("logs", 1), ("payments", 2), ("ledger", 1), ("profiles", 1), ("forever", 1)):
        for p in range(partitions):
            world.add("partitions", topic=topic, partition=p, leader=1, replicas=[1, 2], isr=[1, 2])
    world.config("logs", retention_ms="7200000", retention_bytes="1000000", cleanup_policy="delete")
    world.config("payments", retention_ms="3600000", retention_bytes="10000000", cleanup_policy="delete")
    world.config("ledger", retention_ms="86400000", retention_bytes="-1", cleanup_policy="delete")
    world.config("profiles", retention_ms="604800000", cleanup_policy="compact")
    world.config("forever", retention_ms="-1", retention_bytes="-1", cleanup_policy="compact,delete")

    world.partition_offsets("logs", 0, offsets(ago(610), 10000, 20000, ago(1200), ago(611)),
                            offsets(ago(10), 10500, 21000, ago(600), ago(11)))  # fmt: skip
    sizes(world, "logs", 0, 1, (610, 940_000), (10, 950_000))
    sizes(world, "logs", 0, 2, (10, 949_000))  # a follower: not summed, not used
    sizes(world, "logs", 0, 1, (10, 123), is_future=True, log_dir="/data2")  # a move in progress

    for p, start_ts, first, last in ((0, 3800, 940_000, 1_000_000), (1, 3000, 9_000_000, 9_600_000)):
        world.partition_offsets("payments", p, offsets(ago(610), 0, 9000, ago(start_ts), ago(611)),
                                offsets(ago(10), 0, 10000, ago(start_ts), ago(11)))  # fmt: skip
        sizes(world, "payments", p, 1, (610, first), (10, last))
    world.group_offsets(
        "settlement", "payments", 0,
        committed(ago(610), 2000, 9000, committed_ts=ago(3000), consumed_ts=ago(3001)),
        committed(ago(10), 2000, 10000, committed_ts=ago(3000), consumed_ts=ago(3001)),
    )  # fmt: skip
    world.group_offsets(
        "settlement", "payments", 1,
        committed(ago(610), 1000, 9000, committed_ts=ago(1800), consumed_ts=ago(1801)),
        committed(ago(10), 1000, 10000, committed_ts=ago(1800), consumed_ts=ago(1801)),
    )  # fmt: skip
    world.group_offsets("laggard", "payments", 0, committed(ago(10), 100, 10000, committed_ts=ago(3700)))

    world.partition_offsets("ledger", 0, offsets(ago(610), 4500, 7000, ago(8000), ago(611)),
                            offsets(ago(10), 5000, 8000, ago(7000), ago(11)))  # fmt: skip
    sizes(world, "ledger", 0, 1, (610, 600_000), (10, 500_000))
    world.group_offsets(
        "archive", "ledger", 0,
        committed(ago(610), 4000, 7000, start=4500, committed_ts=ago(8000)),
        committed(ago(10), 4000, 8000, start=5000, committed_ts=ago(7000)),
    )  # fmt: skip

    world.partition_offsets("profiles", 0, offsets(ago(610), 0, 100, ago(5000), ago(611)),
                            offsets(ago(10), 0, 160, ago(5000), ago(11)))  # fmt: skip
    world.group_offsets("profiler", "profiles", 0, committed(ago(10), 100, 160, committed_ts=ago(100)))
    world.partition_offsets("forever", 0, offsets(ago(610), 0, 100, ago(9000), ago(611)),
                            offsets(ago(10), 0, 100, ago(9000), ago(11)))  # fmt: skip
    world.group_offsets("keeper", "forever", 0, committed(ago(10), 50, 100, committed_ts=ago(8000)))
    return world


@pytest.fixture(scope="module")
def derived(spark: SparkSession) -> dict[str, DataFrame]:
    return derived_once(retention_world().inputs(spark))


def test_partition_size_coverage_and_shortfall(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["topic", "partition", "start_offset", "end_offset", "produce_rate", "produce_bytes_rate", "size_bytes",
               "retention_bytes", "retention_ms", "size_ratio", "time_coverage_seconds", "retention_shortfall_seconds"]  # fmt: skip
    expect(spark, derived["partition"], columns, [
        # 2 h promised, 10 min kept: the size cap deletes first.
        ("logs", 0, 10500, 21000, 1000 / 600, 10_000 / 600, 950_000, 1_000_000, 7_200_000, 0.95, 600.0, 6600.0),
        ("payments", 0, 0, 10000, 1000 / 600, 100.0, 1_000_000, 10_000_000, 3_600_000, 0.1, 3800.0, 0.0),
        ("payments", 1, 0, 10000, 1000 / 600, 1000.0, 9_600_000, 10_000_000, 3_600_000, 0.96, 3000.0, 600.0),
        # The size shrank (segments deleted): no byte rate rather than a negative one.
        ("ledger", 0, 5000, 8000, 1000 / 600, None, 500_000, None, 86_400_000, None, 7000.0, 0.0),
        ("profiles", 0, 0, 160, 0.1, None, None, None, 604_800_000, None, 5000.0, 0.0),
        ("forever", 0, 0, 100, 0.0, None, None, None, None, None, 9000.0, 0.0),
    ])  # fmt: skip


def test_time_until_data_loss(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "topic", "partition", "offset_lag", "data_loss_occurred",
               "time_until_data_loss_seconds", "data_loss_limit", "status", "data_loss_margin_seconds"]  # fmt: skip
    expect(spark, derived["group_partition"], columns, [
        # time: appended 3000 s ago, kept 3600 s -> 600 s; size: (10 MB - 0.8 MB) written at
        # 1000/600 msg/s of 1 MB / 10000 messages = 55200 s. No progress: the margin is the 600 s.
        ("settlement", "payments", 0, 8000, False, 600.0, "time", "STOP", 600.0),
        # time: 3600 - 1800 = 1800 s; size: (10 MB - 9.6 MB * 0.9) at 1000/600 msg/s of 960 B = 850 s
        # (not at its 1000 B/s growth: the size a partition grows by is not what is written).
        ("settlement", "payments", 1, 9000, False, 850.0, "size", "STOP", 850.0),
        # One sample: no status, no consume rate, so no verdict on the risk either.
        ("laggard", "payments", 0, 9900, False, 0.0, "time", "OK", None),
        ("archive", "ledger", 0, 4000, True, 0.0, "time", "STOP", 0.0),
        ("profiler", "profiles", 0, 60, False, None, None, "OK", None),
        ("keeper", "forever", 0, 50, False, None, None, "OK", None),
    ])  # fmt: skip


def test_topic_rollup(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["topic", "partitions", "produce_rate", "produce_bytes_rate", "size_bytes", "max_size_ratio",
               "min_time_coverage_seconds", "retention_ms", "retention_bytes", "retention_shortfall_seconds",
               "min_time_until_data_loss_seconds"]  # fmt: skip
    expect(spark, derived["topic"], columns, [
        ("logs", 1, 1000 / 600, 10_000 / 600, 950_000, 0.95, 600.0, 7_200_000, 1_000_000, 6600.0, None),
        ("payments", 2, 2000 / 600, 1100.0, 10_600_000, 0.96, 3000.0, 3_600_000, 10_000_000, 600.0, 0.0),
        ("ledger", 1, 1000 / 600, None, 500_000, None, 7000.0, 86_400_000, None, 0.0, 0.0),
        ("profiles", 1, 0.1, None, None, None, 5000.0, 604_800_000, None, 0.0, None),
        ("forever", 1, 0.0, None, None, None, 9000.0, None, None, 0.0, None),
    ])  # fmt: skip


def test_group_rollup_takes_the_soonest_loss(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "offset_lag", "time_until_data_loss_seconds", "data_loss_occurred"]
    expect(spark, derived["group"], columns, [
        ("settlement", 17000, 600.0, False),
        ("laggard", 9900, 0.0, False),
        ("archive", 4000, 0.0, True),
        ("profiler", 60, None, False),
        ("keeper", 50, None, False),
    ])  # fmt: skip


def test_no_nan_or_infinity(derived: dict[str, DataFrame]) -> None:
    assert_finite(derived)
