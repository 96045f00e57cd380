"""Consumer lag, status and the group roll-ups on a hand-made world, evaluated at AT.

Samples are taken at AT-610 s, AT-310 s and AT-10 s (a 600 s window). Topics keep 7 days.

- orders (busy, 2 msg/s on p0; p1 a flat line):
  billing    p0 lagging and falling behind (WARN: 900 behind, more than the 600 written between
             two samples); p1 caught up
  stopped    p0 committed last at -510 s while the producers write (STOP)
- audit (idle; p1 got one message in the last sample):
  auditor    p0 1 message behind, nothing new since its last commit (Burrow: STOP; here OK);
             p1 caught up until the new message (Burrow: STOP; here OK)
  idle-reader p0 5 messages behind, never moving, nothing new (STALL)
- clicks (busy): reporting, every consumer gone (Empty), interpolated timestamps (STOP)
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from monitor.evaluate.transforms import derive
from tests.fixtures.spark import derived_once
from tests.fixtures.transform_inputs import AT, World, ago, assert_finite, committed, expect, offsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

WEEK_MS = "604800000"
WEEK = 604800.0


def busy(
    world: World, topic: str, partition: int, first_end: int, times: tuple[int, ...] = (610, 310, 10)
) -> None:
    """2 messages/s: end grows 600 per 300 s; the newest record is 1 s older than each sample."""
    samples = [offsets(ago(t), 0, first_end + 2 * (610 - t), ago(86400), ago(t + 1)) for t in times]
    world.partition_offsets(topic, partition, *samples)


def reporting_world(times: tuple[int, ...]) -> World:
    """clicks p0 (busy) and the dead `reporting` group, sampled at `times` (s before AT)."""
    world = World().config("clicks", retention_ms=WEEK_MS, retention_bytes="-1")
    busy(world, "clicks", 0, 5000, times)
    samples = [
        committed(ago(t), 4000, 5000 + 2 * (610 - t), committed_ts=ago(4000), consumed_ts=ago(4001),
                  method="interpolated", error_ms=15000)
        for t in times
    ]  # fmt: skip
    world.group_offsets("reporting", "clicks", 0, *samples, last_commit=ago(3600))
    world.add("group_states", group_id="reporting", sampled_at=ago(10), state="Empty", members=0)
    return world


def lag_world() -> World:
    world = reporting_world((610, 310, 10))
    for topic in ("orders", "audit"):
        world.config(topic, retention_ms=WEEK_MS, retention_bytes="-1", cleanup_policy="delete")
    busy(world, "orders", 0, 1000)
    world.partition_offsets(
        "orders", 1, *[offsets(ago(t), 0, 500, ago(3600), ago(2000)) for t in (610, 310, 10)]
    )
    world.partition_offsets(
        "audit", 0, *[offsets(ago(t), 0, 100, ago(86400), ago(7200)) for t in (610, 310, 10)]
    )
    world.partition_offsets(
        "audit", 1,
        offsets(ago(610), 0, 100, ago(86400), ago(7200)),
        offsets(ago(310), 0, 100, ago(86400), ago(7200)),
        offsets(ago(10), 0, 101, ago(86400), ago(12)),
    )  # fmt: skip
    world.group_offsets(
        "billing", "orders", 0,
        committed(ago(610), 300, 1000, committed_ts=ago(950), consumed_ts=ago(961)),
        committed(ago(310), 800, 1600, committed_ts=ago(700), consumed_ts=ago(711)),
        committed(ago(10), 1300, 2200, committed_ts=ago(450), consumed_ts=ago(461)),
    )  # fmt: skip
    world.group_offsets(
        "billing", "orders", 1, *[committed(ago(t), 500, 500, consumed_ts=ago(2000)) for t in (610, 310, 10)]
    )
    world.add("group_states", group_id="billing", sampled_at=ago(310), state="PreparingRebalance", members=1)
    world.add("group_states", group_id="billing", sampled_at=ago(10), state="Stable", members=2)
    world.group_offsets(
        "stopped", "orders", 0,
        committed(ago(610), 900, 1000, committed_ts=ago(700), consumed_ts=ago(701)),
        committed(ago(510), 1000, 1200, committed_ts=ago(600), consumed_ts=ago(601)),
        committed(ago(310), 1000, 1600, committed_ts=ago(600), consumed_ts=ago(601)),
        committed(ago(10), 1000, 2200, committed_ts=ago(600), consumed_ts=ago(601)),
    )  # fmt: skip
    world.group_offsets(
        "auditor", "audit", 0,
        committed(ago(610), 90, 100, committed_ts=ago(7300), consumed_ts=ago(7301)),
        committed(ago(410), 99, 100, committed_ts=ago(7200), consumed_ts=ago(7210)),
        committed(ago(10), 99, 100, committed_ts=ago(7200), consumed_ts=ago(7210)),
    )  # fmt: skip
    world.group_offsets(
        "auditor", "audit", 1,
        committed(ago(610), 100, 100, consumed_ts=ago(7200)),
        committed(ago(310), 100, 100, consumed_ts=ago(7200)),
        committed(ago(10), 100, 101, committed_ts=ago(12), consumed_ts=ago(7200)),
        last_commit=ago(7000),
    )  # fmt: skip
    world.add("group_states", group_id="auditor", sampled_at=ago(10), state="Stable", members=1)
    world.group_offsets(
        "idle-reader", "audit", 0,
        *[committed(ago(t), 95, 100, committed_ts=ago(7250), consumed_ts=ago(7260)) for t in (610, 310, 10)],
        last_commit=ago(3600),
    )  # fmt: skip
    return world


@pytest.fixture(scope="module")
def derived(spark: SparkSession) -> dict[str, DataFrame]:
    return derived_once(lag_world().inputs(spark))


def test_offset_lag_lag_seconds_and_append_lag(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "topic", "partition", "committed_offset", "end_offset", "offset_lag", "lag_seconds",
               "append_lag_seconds", "lag_seconds_method", "lag_seconds_error"]  # fmt: skip
    expect(spark, derived["group_partition"], columns, [
        ("billing", "orders", 0, 1300, 2200, 900, 450.0, 450.0, "exact", None),
        ("billing", "orders", 1, 500, 500, 0, 0.0, 0.0, "exact", None),
        ("stopped", "orders", 0, 1000, 2200, 1200, 600.0, 590.0, "exact", None),
        ("auditor", "audit", 0, 99, 100, 1, 7200.0, 10.0, "exact", None),
        ("auditor", "audit", 1, 100, 101, 1, 12.0, 7188.0, "exact", None),
        ("idle-reader", "audit", 0, 95, 100, 5, 7250.0, 60.0, "exact", None),
        ("reporting", "clicks", 0, 4000, 6200, 2200, 4000.0, 3990.0, "interpolated", 15.0),
    ])  # fmt: skip


def test_commits_rates_and_catch_up(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    # A flat end-offset line (orders p1, audit p0) gives produce_rate 0, never infinity: the group
    # caught up needs 0 s, one that does not move never catches up (null).
    columns = ["group_id", "topic", "partition", "commit_lag_seconds", "time_since_last_commit_seconds",
               "consume_rate", "produce_rate", "time_to_catch_up_seconds"]  # fmt: skip
    expect(spark, derived["group_partition"], columns, [
        ("billing", "orders", 0, 451.0, 10.0, 1000 / 600, 2.0, None),
        ("billing", "orders", 1, None, None, 0.0, 0.0, 0.0),
        ("stopped", "orders", 0, 91.0, 510.0, 100 / 600, 2.0, None),
        ("auditor", "audit", 0, 6800.0, 410.0, 9 / 600, 0.0, 1 / (9 / 600)),
        ("auditor", "audit", 1, 200.0, 7000.0, 0.0, 1 / 600, None),
        ("idle-reader", "audit", 0, 3660.0, 3600.0, 0.0, 0.0, None),
        ("reporting", "clicks", 0, 401.0, 3600.0, 0.0, 2.0, None),
    ])  # fmt: skip


def test_status_data_loss_and_group_state(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "topic", "partition", "status", "time_until_data_loss_seconds", "data_loss_limit",
               "data_loss_occurred", "group_state", "members"]  # fmt: skip
    expect(spark, derived["group_partition"], columns, [
        ("billing", "orders", 0, "WARN", WEEK - 450, "time", False, "Stable", 2),
        ("billing", "orders", 1, "OK", None, None, False, "Stable", 2),
        ("stopped", "orders", 0, "STOP", WEEK - 600, "time", False, "Unknown", None),
        ("auditor", "audit", 0, "OK", WEEK - 7200, "time", False, "Stable", 1),
        ("auditor", "audit", 1, "OK", WEEK - 12, "time", False, "Stable", 1),
        ("idle-reader", "audit", 0, "STALL", WEEK - 7250, "time", False, "Unknown", None),
        ("reporting", "clicks", 0, "STOP", WEEK - 4000, "time", False, "Empty", 0),
    ])  # fmt: skip


def test_group_topic_rollup(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "topic", "partitions", "offset_lag", "lag_seconds", "append_lag_seconds",
               "commit_lag_seconds", "time_since_last_commit_seconds", "consume_rate", "produce_rate",
               "time_to_catch_up_seconds", "time_until_data_loss_seconds", "data_loss_occurred",
               "max_offset_lag", "max_lag_seconds", "status", "group_state", "members"]  # fmt: skip
    expect(spark, derived["group_topic"], columns, [
        ("billing", "orders", 2, 900, 450.0, 450.0, 451.0, 10.0, 1000 / 600, 2.0, None, WEEK - 450, False, 900, 450.0, "WARN", "Stable", 2),
        ("stopped", "orders", 1, 1200, 600.0, 590.0, 91.0, 510.0, 100 / 600, 2.0, None, WEEK - 600, False, 1200, 600.0, "STOP", "Unknown", None),
        ("auditor", "audit", 2, 2, 7200.0, 7188.0, 6800.0, 410.0, 9 / 600, 1 / 600, None, WEEK - 7200, False, 1, 7200.0, "OK", "Stable", 1),
        ("idle-reader", "audit", 1, 5, 7250.0, 60.0, 3660.0, 3600.0, 0.0, 0.0, None, WEEK - 7250, False, 5, 7250.0, "STALL", "Unknown", None),
        ("reporting", "clicks", 1, 2200, 4000.0, 3990.0, 401.0, 3600.0, 0.0, 2.0, None, WEEK - 4000, False, 2200, 4000.0, "STOP", "Empty", 0),
    ])  # fmt: skip


def test_group_rollup(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "topics", "partitions", "offset_lag", "max_lag_seconds", "status", "lag_growing",
               "group_state", "members"]  # fmt: skip
    expect(spark, derived["group"], columns, [
        ("billing", 1, 2, 900, 450.0, "WARN", True, "Stable", 2),
        ("stopped", 1, 1, 1200, 600.0, "ERR", True, "Unknown", None),
        ("auditor", 1, 2, 2, 7200.0, "OK", False, "Stable", 1),
        ("idle-reader", 1, 1, 5, 7250.0, "ERR", False, "Unknown", None),
        ("reporting", 1, 1, 2200, 4000.0, "ERR", True, "Empty", 0),
    ])  # fmt: skip


def test_no_nan_or_infinity(derived: dict[str, DataFrame]) -> None:
    assert_finite(derived)


def _reporting_append_lag(spark: SparkSession, times: tuple[int, ...], at: datetime) -> tuple[float, float]:
    row = derive(reporting_world(times).inputs(spark, at))["group_partition"].collect()[0]
    return row["append_lag_seconds"], row["lag_seconds"]


def test_append_lag_grows_while_every_consumer_is_dead(spark: SparkSession) -> None:
    # Evaluated 300 s earlier (samples up to AT-310 s), then at AT: nobody consumes, the producers
    # write, so the append lag (and the lag in seconds) grows by the 300 s that passed.
    earlier = _reporting_append_lag(spark, (610, 310), ago(300))
    later = _reporting_append_lag(spark, (610, 310, 10), AT)
    assert earlier == (3690.0, 3700.0)
    assert later == (3990.0, 4000.0)
