"""Missing data is not a condition turned false: which group entities an evaluation sampled (the
`sampled` column), and the rules neither matching nor judging the others (`unsampled_keys`).

Offsets runs started at AT-45 s and AT-15 s (the newest); evaluated at AT.
- `fresh` was sampled by the newest run (AT-10 s);
- `missed` was last sampled by the run before (AT-40 s): the newest could not (NotCoordinator);
- `blind` was sampled at AT-10 s, but the run could not list its partition's offsets: no lag;
- `mixed` has one partition of each kind: its roll-ups are not sampled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from monitor.evaluate.engine import evaluate_rules, unsampled_keys
from monitor.evaluate.rules import Rule
from monitor.evaluate.transforms import derive
from tests.fixtures.transform_inputs import AT, World, ago, committed, expect, offsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def gap_world(runs: bool = True) -> World:
    world = World()
    world.add("brokers", broker_id=1, rack=None)
    for p in (0, 1):
        world.add("partitions", topic="t", partition=p, leader=1, replicas=[1], isr=[1])
        world.partition_offsets("t", p, offsets(ago(40), 0, 900, ago(900), ago(41)),
                                offsets(ago(10), 0, 1000, ago(900), ago(11)))  # fmt: skip
    if runs:
        for started in (45, 15):
            world.add("collection_runs", id=started, job="offsets", started_at=ago(started),
                      finished_at=ago(started - 3), duration_ms=3000, status="ok" if started == 45 else "partial")  # fmt: skip
    world.group_offsets("fresh", "t", 0, committed(ago(40), 800, 900, committed_ts=ago(60)),
                        committed(ago(10), 900, 1000, committed_ts=ago(30)))  # fmt: skip
    world.group_offsets("missed", "t", 0, committed(ago(70), 700, 850, committed_ts=ago(90)),
                        committed(ago(40), 800, 900, committed_ts=ago(60)))  # fmt: skip
    blind = committed(ago(10), 900, 1000) | {"end_offset": None, "start_offset": None, "lag": None}
    world.group_offsets("blind", "t", 1, committed(ago(40), 800, 900, committed_ts=ago(60)), blind)
    world.group_offsets("mixed", "t", 0, committed(ago(40), 800, 900, committed_ts=ago(60)),
                        committed(ago(10), 900, 1000, committed_ts=ago(30)))  # fmt: skip
    world.group_offsets("mixed", "t", 1, committed(ago(70), 700, 850, committed_ts=ago(90)),
                        committed(ago(40), 800, 900, committed_ts=ago(60)))  # fmt: skip
    return world


def test_sampled_by_the_newest_run_with_a_known_lag(spark: SparkSession) -> None:
    frames = derive(gap_world().inputs(spark))
    expect(spark, frames["group_partition"], ["group_id", "partition", "sampled"], [
        ("fresh", 0, True), ("missed", 0, False), ("blind", 1, False), ("mixed", 0, True), ("mixed", 1, False),
    ])  # fmt: skip
    rows = [("fresh", True), ("missed", False), ("blind", False), ("mixed", False)]
    expect(spark, frames["group_topic"], ["group_id", "sampled"], rows)
    expect(spark, frames["group"], ["group_id", "sampled"], rows)


def test_without_runs_a_sample_is_fresh_for_five_minutes(spark: SparkSession) -> None:
    frames = derive(gap_world(runs=False).inputs(spark))
    expect(spark, frames["group_partition"], ["group_id", "partition", "sampled"], [
        ("fresh", 0, True), ("missed", 0, True), ("blind", 1, False), ("mixed", 0, True), ("mixed", 1, True),
    ])  # fmt: skip
    later = derive(gap_world(runs=False).inputs(spark, AT.replace(minute=5)))  # samples now 5 min 10 s old
    assert {row["sampled"] for row in later["group_partition"].collect()} == {False}


def test_rules_neither_match_nor_judge_an_unsampled_entity(spark: SparkSession) -> None:
    frames = derive(gap_world().inputs(spark))
    rules = [
        Rule.model_validate({"name": name, "description": "anything", "entity": entity, "condition": condition,
                             "value": "1", "severities": [{"severity": "warning"}], "summary": name})
        for name, entity, condition in (("GP", "group_partition", "offset_lag > 0"), ("G", "group", "offset_lag > 0"),
                                        ("P", "partition", "end_offset > 0"))
    ]  # fmt: skip
    matched = {(row["rule"], row["entity_key"]) for row in evaluate_rules(frames, rules, AT).collect()}
    assert matched == {
        ("GP", "c1/fresh/t/0"), ("GP", "c1/mixed/t/0"), ("G", "c1/fresh"),
        ("P", "c1/t/0"), ("P", "c1/t/1"),  # entities without a `sampled` column are always judged
    }  # fmt: skip
    keys = unsampled_keys(frames, rules)
    assert keys is not None
    assert {(row["entity"], row["entity_key"]) for row in keys.collect()} == {
        ("group_partition", "c1/missed/t/0"), ("group_partition", "c1/blind/t/1"), ("group_partition", "c1/mixed/t/1"),
        ("group", "c1/missed"), ("group", "c1/blind"), ("group", "c1/mixed"),
    }  # fmt: skip
    assert unsampled_keys(frames, rules[2:]) is None  # partitions have no `sampled` column
