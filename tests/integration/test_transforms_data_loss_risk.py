"""The data-loss risk (DOMAIN.md 2): the time until retention deletes the oldest unread message is
a risk only when the group will not read it first. Evaluated at AT, samples at AT-610 s and
AT-10 s (the stopped group's at AT-130 s and AT-10 s).

- capped (retention.bytes keeps a minute, 10 msg/s of ~1.6 kB): `capped-reader` keeps up, 3 s
  behind: its oldest unread message is deleted in under a minute, and it reads it long before.
  `fresh-reader` keeps up too, but was first seen 30 s ago and auto-commits in steps: its lag
  went from 1 s to 5 s of messages, so its measured rate is 87% of the produce rate.
- short (retention.ms 4 minutes, 20 msg/s): `short-reader` keeps up, 3 s behind; `short-stopped`
  stopped 2.5 minutes behind: it reads nothing, so its margin is the time until the deletion.
- orders (retention.ms 3 hours, 10 msg/s): `orders-slow` reads half of what is produced, 15
  minutes behind: it needs 30 minutes to read its backlog, whose oldest message is deleted in
  2 h 45 min: a finite margin of 2 h 15 min (a warning, not a page).
- idle (nothing produced): `idle-reader` caught up; on `idlecap` (retention.bytes only)
  `idle-paused` lags and reads nothing, but nothing is written to push its messages out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from monitor.evaluate.engine import evaluate_rules
from monitor.evaluate.rules import default_rule_paths, load_rules
from tests.fixtures.spark import derived_once
from tests.fixtures.transform_inputs import AT, World, ago, assert_finite, committed, expect, offsets, sizes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


def risk_world() -> World:
    world = World()
    world.add("brokers", broker_id=1, rack=None)
    for topic in ("capped", "short", "orders", "idle", "idlecap"):
        world.add("partitions", topic=topic, partition=0, leader=1, replicas=[1], isr=[1])
    world.config("capped", retention_ms="3600000", retention_bytes="960000", cleanup_policy="delete")
    world.config("short", retention_ms="240000", cleanup_policy="delete")
    world.config("orders", retention_ms="10800000", cleanup_policy="delete")
    world.config("idle", retention_ms="3600000", retention_bytes="1000000", cleanup_policy="delete")
    world.config("idlecap", retention_ms="-1", retention_bytes="1000000", cleanup_policy="delete")

    # capped: a minute of messages on disk (600 of them), at the cap, so its size does not grow.
    world.partition_offsets("capped", 0, offsets(ago(610), 3900, 4500, ago(670), ago(611)),
                            offsets(ago(10), 9900, 10500, ago(70), ago(11)))  # fmt: skip
    sizes(world, "capped", 0, 1, (610, 950_000), (10, 950_000))
    world.group_offsets("capped-reader", "capped", 0,
                        committed(ago(610), 4480, 4500, start=3900, committed_ts=ago(612)),
                        committed(ago(10), 10470, 10500, start=9900, committed_ts=ago(13)))  # fmt: skip
    world.group_offsets("fresh-reader", "capped", 0,
                        committed(ago(40), 10190, 10200, start=9600, committed_ts=ago(41)),
                        committed(ago(10), 10450, 10500, start=9900, committed_ts=ago(15)))  # fmt: skip

    # short: end = 22000 - 20 * (seconds ago - 10); four minutes on disk.
    world.partition_offsets("short", 0, offsets(ago(610), 5200, 10000, ago(850), ago(611)),
                            offsets(ago(10), 17200, 22000, ago(250), ago(11)))  # fmt: skip
    world.group_offsets("short-reader", "short", 0,
                        committed(ago(610), 9950, 10000, start=5200, committed_ts=ago(613)),
                        committed(ago(10), 21940, 22000, start=17200, committed_ts=ago(13)))  # fmt: skip
    world.group_offsets("short-stopped", "short", 0,
                        committed(ago(130), 19000, 19600, start=14800, committed_ts=ago(160)),
                        committed(ago(10), 19000, 22000, start=17200, committed_ts=ago(160)))  # fmt: skip

    # orders: end = 56000 - 10 * (seconds ago - 10); offset 47000 was appended 910 s ago.
    world.partition_offsets("orders", 0, offsets(ago(610), 0, 50000, ago(6000), ago(611)),
                            offsets(ago(10), 0, 56000, ago(6000), ago(11)))  # fmt: skip
    world.group_offsets("orders-slow", "orders", 0,
                        committed(ago(610), 44000, 50000, committed_ts=ago(1210)),
                        committed(ago(10), 47000, 56000, committed_ts=ago(910)))  # fmt: skip

    world.partition_offsets("idle", 0, offsets(ago(610), 0, 500, ago(5000), ago(5000)),
                            offsets(ago(10), 0, 500, ago(5000), ago(5000)))  # fmt: skip
    sizes(world, "idle", 0, 1, (610, 800_000), (10, 800_000))
    world.group_offsets("idle-reader", "idle", 0, committed(ago(610), 500, 500), committed(ago(10), 500, 500))
    world.partition_offsets("idlecap", 0, offsets(ago(610), 0, 500, ago(5000), ago(5000)),
                            offsets(ago(10), 0, 500, ago(5000), ago(5000)))  # fmt: skip
    sizes(world, "idlecap", 0, 1, (610, 800_000), (10, 800_000))
    world.group_offsets("idle-paused", "idlecap", 0,
                        committed(ago(610), 400, 500, committed_ts=ago(5000)),
                        committed(ago(10), 400, 500, committed_ts=ago(5000)))  # fmt: skip
    return world


@pytest.fixture(scope="module")
def derived(spark: SparkSession) -> dict[str, DataFrame]:
    return derived_once(risk_world().inputs(spark))


def test_margin_per_group_partition(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    columns = ["group_id", "offset_lag", "consume_rate", "time_until_data_loss_seconds", "data_loss_limit",
               "time_to_read_seconds", "data_loss_margin_seconds"]  # fmt: skip
    expect(spark, derived["group_partition"], columns, [
        # Size limit: (960000 - 950000 * 30/600) bytes / (10 msg/s * 950000/600 bytes) = 57.6 s; the
        # group reads its 30 messages in 3 s and keeps up: no margin, whatever the deletion time.
        ("capped-reader", 30, 5990 / 600, 912_500 / (10 * 950_000 / 600), "size", 30 / (5990 / 600), None),
        # Its lag grew by 40 messages (4 s of production): one commit step, not a group falling behind.
        ("fresh-reader", 50, 260 / 30, (960_000 - 950_000 * 50 / 600) / (10 * 950_000 / 600), "size",
         50 / (260 / 30), None),
        # 240 - 13 s; it reads its 60 messages in 3 s and keeps up.
        ("short-reader", 60, 11990 / 600, 227.0, "time", 60 / (11990 / 600), None),
        # No progress: it never reads the message, deleted in 240 - 160 s.
        ("short-stopped", 3000, 0.0, 80.0, "time", None, 80.0),
        # 10800 - 910 s until the deletion, 9000 / 5 s to read: 8090 s of margin.
        ("orders-slow", 9000, 5.0, 9890.0, "time", 1800.0, 8090.0),
        ("idle-reader", 0, 0.0, None, None, 0.0, None),
        # retention.bytes alone, and nothing written: nothing pushes its messages out.
        ("idle-paused", 100, 0.0, None, None, None, None),
    ])  # fmt: skip


def test_roll_ups_take_the_smallest_margin(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    expect(spark, derived["group"], ["group_id", "data_loss_margin_seconds"], [
        ("capped-reader", None), ("fresh-reader", None), ("short-reader", None), ("short-stopped", 80.0),
        ("orders-slow", 8090.0),
        ("idle-reader", None), ("idle-paused", None),
    ])  # fmt: skip
    columns = ["topic", "min_time_until_data_loss_seconds", "min_data_loss_margin_seconds"]
    expect(spark, derived["topic"], columns, [
        # fresh-reader's oldest unread message is the one deleted first
        ("capped", (960_000 - 950_000 * 50 / 600) / (10 * 950_000 / 600), None), ("short", 80.0, 80.0),
        ("orders", 9890.0, 8090.0),
        ("idle", None, None), ("idlecap", None, None),
    ])  # fmt: skip


def test_default_rule_fires_on_the_risk_only(derived: dict[str, DataFrame]) -> None:
    rules = [r for r in load_rules(default_rule_paths()).rules if r.name == "TimeUntilDataLoss"]
    assert len(rules) == 1
    found = {
        row["entity_key"]: (row["severity"], row["value"])
        for row in evaluate_rules(derived, rules, AT).collect()
    }
    assert found == {
        "c1/short-stopped/short/0": ("critical", 80.0),  # minutes left: a page
        "c1/orders-slow/orders/0": ("warning", 8090.0),  # hours left: Slack
    }


def test_no_nan_or_infinity(derived: dict[str, DataFrame]) -> None:
    assert_finite(derived)


def test_texts_say_the_margin_and_the_reading_time(derived: dict[str, DataFrame]) -> None:
    from monitor.evaluate.engine import render

    rule = next(r for r in load_rules(default_rule_paths()).rules if r.name == "TimeUntilDataLoss")
    texts = {
        row["entity_key"]: render(row.asDict(), rule) for row in evaluate_rules(derived, [rule], AT).collect()
    }
    summary, description = texts["c1/orders-slow/orders/0"]
    assert "will lose unread messages to retention in about 2 h 15 min" in summary
    assert (
        "in about 2 h 45 min" in description
        and "5.0 messages/s" in description
        and "takes 30 min" in description
    )
    summary, description = texts["c1/short-stopped/short/0"]
    assert "in about 1 min" in summary
    assert "made no progress over the window: 3,000 messages are unread" in description
