"""The consumer advice (monitor.evaluate.transforms.advice) on a hand-made world, evaluated at AT.

Samples at AT-610 s, AT-310 s and AT-10 s (a 600 s window). Each group reads one topic; a row of
GROUPS gives its partitions' produce and consume rates, the committed offsets' append times and
the group's members, and the advice expected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.fixtures.spark import derived_once
from tests.fixtures.transform_inputs import World, ago, assert_finite, committed, expect, offsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

WEEK_MS = "604800000"
TIMES = (610, 310, 10)


def _partition(
    world: World, group: str, topic: str, partition: int, produce: int, consume: int, end: int
) -> None:
    """One group-partition: the end grows by `produce` and the committed offset by `consume` per
    300 s; at the last sample the lag is `end` - the committed offset, its oldest message 800 s old."""
    ends = [end - produce * (2 - k) for k in range(3)]
    commits = [end - 800 - consume * (2 - k) if produce or consume else end for k in range(3)]
    world.partition_offsets(
        topic,
        partition,
        *[offsets(ago(t), 0, e, ago(86400), ago(t + 1)) for t, e in zip(TIMES, ends, strict=True)],
    )
    world.group_offsets(
        group, topic, partition,
        *[committed(ago(t), c, e, committed_ts=ago(800 + t - 10), consumed_ts=ago(801 + t - 10))
          for t, c, e in zip(TIMES, commits, ends, strict=True)],
    )  # fmt: skip


# group, topic, retention.ms, [(produce, consume) per 300 s, per partition], members, state
GROUPS: list[tuple[str, str, str, list[tuple[int, int]], int, str]] = [
    ("three", "twelve", WEEK_MS, [(300, 150)] * 12, 1, "Stable"),  # 12/s arrive, one reads 6/s
    ("capped", "pair", WEEK_MS, [(300, 75)] * 2, 1, "Stable"),  # 2/s arrive, one reads 0.5/s
    ("hot", "skewed", WEEK_MS, [(600, 300), (0, 0), (0, 0), (0, 0)], 1, "Stable"),  # p0 gets 2/s, one reads 1/s
    ("unbounded", "forever", "-1", [(0, 150)] * 4, 2, "Stable"),  # nothing arrives, no deletion ahead
    ("caught-up", "quiet", WEEK_MS, [(0, 0)], 1, "Stable"),
    ("stopped", "left", WEEK_MS, [(300, 75)], 0, "Empty"),
    ("stalled", "stuck", WEEK_MS, [(300, 0)], 1, "Stable"),
]  # fmt: skip


def advice_world() -> World:
    world = World()
    for group, topic, retention_ms, partitions, members, state in GROUPS:
        world.config(topic, retention_ms=retention_ms, retention_bytes="-1", cleanup_policy="delete")
        for partition, (produce, consume) in enumerate(partitions):
            _partition(world, group, topic, partition, produce, consume, 5000)
        world.add("group_states", group_id=group, sampled_at=ago(10), state=state, members=members)
    return world


@pytest.fixture(scope="module")
def derived(spark: SparkSession) -> dict[str, DataFrame]:
    return derived_once(advice_world().inputs(spark))


ADVICE = [
    "group_id",
    "partitions",
    "members",
    "consumers_needed",
    "advice_limited_by",
    "hot_topic",
    "hot_partition",
]
EXPECTED: list[tuple[Any, ...]] = [
    ("three", 12, 1, 3, None, None, None),
    ("capped", 2, 1, 2, "partitions", None, None),
    ("hot", 4, 1, 3, "hot_partition", "skewed", 0),
    ("unbounded", 4, 2, 2, None, None, None),
    ("caught-up", 1, 1, None, None, None, None),
    ("stopped", 1, 0, None, None, None, None),
    ("stalled", 1, 1, None, None, None, None),
]


def test_the_groups_advice(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    expect(spark, derived["group"], ADVICE, EXPECTED)


def test_each_group_topic_carries_its_groups_advice(
    spark: SparkSession, derived: dict[str, DataFrame]
) -> None:
    expect(spark, derived["group_topic"], ADVICE, EXPECTED)


def test_the_worlds_rates_are_what_the_cases_say(spark: SparkSession, derived: dict[str, DataFrame]) -> None:
    # The advice's inputs, so a wrong case fails here rather than as a puzzling count above.
    columns = ["group_id", "offset_lag", "consume_rate", "produce_rate"]
    expect(spark, derived["group"], columns, [
        ("three", 12 * 800, 6.0, 12.0),
        ("capped", 2 * 800, 0.5, 2.0),
        ("hot", 800, 1.0, 2.0),
        ("unbounded", 4 * 800, 2.0, 0.0),
        ("caught-up", 0, 0.0, 0.0),
        ("stopped", 800, 0.25, 1.0),
        ("stalled", 800, 0.0, 1.0),
    ])  # fmt: skip


def test_no_nan_or_infinity(derived: dict[str, DataFrame]) -> None:
    assert_finite(derived)
