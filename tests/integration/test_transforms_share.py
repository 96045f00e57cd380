"""Share groups (KIP-932) on a hand-made world, evaluated at AT: the share_group_topic and
share_group entities, and the default pack's share rules on them.

Samples at AT-610 s, AT-310 s and AT-10 s (a 600 s window); the newest share-groups run started
at AT-12 s. Producers append 2 records/s to `jobs` p0 (600 per 300 s) unless the row says
otherwise. Each case is one share group reading `jobs`: (start offsets, end offsets, lags) at the
three samples, its state and members, and what the entities and the rules must say.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from monitor.evaluate.engine import evaluate_rules
from monitor.evaluate.rules import load_rules
from monitor.evaluate.transforms import derive
from tests.fixtures.transform_inputs import AT, CLUSTER, World, ago, assert_finite

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
TIMES = (610, 310, 10)
ARRIVING = (1000, 1600, 2200)
"""End offsets of `jobs` p0 at the three samples: 2 records/s."""


@dataclass(frozen=True)
class Case:
    group: str
    starts: tuple[int | None, ...]
    ends: tuple[int, ...] = ARRIVING
    members: int = 2
    state: str = "Stable"
    times: tuple[int, ...] = TIMES
    broker_lag: bool = False
    # expected share_group_topic values
    lag: int | None = 0
    lag_growing: bool = False
    stalled_seconds: float = 0.0
    backlog_seconds: float | None = 0.0
    sampled: bool = True
    findings: frozenset[tuple[str, str]] = frozenset()


CASES = [
    # 1 keeps up: the start offset follows the end
    Case("keeps", starts=(995, 1598, 2200)),
    # 2 lags: finishes 1 record/s while 2 arrive; 600 records = 300 s of production
    Case("lags", starts=(1000, 1300, 1600), lag=600, lag_growing=True, backlog_seconds=300.0,
         findings=frozenset({("ShareGroupLag", "warning")})),
    # 3 stalled: members, the start offset stands still while records arrive (since AT-610 s)
    Case("stalled", starts=(1000, 1000, 1000), lag=1200, lag_growing=True, stalled_seconds=610.0,
         backlog_seconds=600.0,
         findings=frozenset({("ShareGroupLag", "warning"), ("ShareGroupStalled", "warning")})),
    # 4 stopped: no member while records arrive
    Case("stopped", starts=(1000, 1000, 1000), members=0, state="Empty", lag=1200, lag_growing=True,
         stalled_seconds=610.0, backlog_seconds=600.0,
         findings=frozenset({("ShareGroupLag", "warning"), ("ShareGroupNoMembers", "warning")})),
    # 5 no records arriving: a backlog nobody reads, but nothing new: quiet
    Case("idle", starts=(500, 500, 500), ends=(800, 800, 800), members=0, state="Empty", lag=300,
         backlog_seconds=None),
    # 6 the start offset moved in the newest sample: not stalled
    Case("moved", starts=(1000, 1000, 2100), lag=100, lag_growing=True, backlog_seconds=50.0),
    # 7 the broker's lag (KIP-1226): records acknowledged out of order beyond the SPSO
    Case("broker-lag", starts=(990, 1598, 2190), broker_lag=True, lag=3, backlog_seconds=1.5),
    # 8 missed by the newest run: not sampled, so no rule says anything
    Case("missed", starts=(1000, 1000), times=(610, 310), ends=(1000, 1600), members=0, state="Empty",
         lag=600, lag_growing=True, stalled_seconds=610.0, backlog_seconds=300.0, sampled=False),
    # 9 no start offset yet (the group has not initialised the partition)
    Case("new", starts=(None, None, None), lag=None, backlog_seconds=None),
    # 10 initialised after the window's first sample, then left behind: growth and rates count
    #    from its first known start offset
    Case("joined", starts=(None, 1000, 1000), members=0, state="Empty", lag=1200, lag_growing=True,
         stalled_seconds=310.0, backlog_seconds=600.0,
         findings=frozenset({("ShareGroupLag", "warning"), ("ShareGroupNoMembers", "warning")})),
]  # fmt: skip


def _world() -> World:
    world = World()
    world.add("collection_runs", job="share_groups", started_at=ago(12), finished_at=ago(11), status="ok")
    for case in CASES:
        for t, start, end in zip(case.times, case.starts, case.ends, strict=True):
            lag = None if start is None else end - start
            method = "none" if start is None else "end_minus_start"
            if case.broker_lag and lag is not None:
                lag, method = max(lag - 7, 0), "broker"
            world.add(
                "share_group_offsets", sampled_at=ago(t), group_id=case.group, topic="jobs", partition=0,
                start_offset=start, end_offset=end, lag=lag, lag_method=method,
            )  # fmt: skip
            world.add(
                "share_group_states", group_id=case.group, sampled_at=ago(t), state=case.state,
                members=case.members,
            )  # fmt: skip
    # a group with members and no share partition yet
    world.add("share_group_states", group_id="fresh", sampled_at=ago(10), state="Stable", members=1)
    return world


@pytest.fixture(scope="module")
def frames(spark: SparkSession) -> dict[str, DataFrame]:
    return derive(_world().inputs(spark))


def _by_group(frame: DataFrame) -> dict[str, dict[str, Any]]:
    return {row["group_id"]: row.asDict() for row in frame.collect()}


@pytest.mark.parametrize("case", CASES, ids=[c.group for c in CASES])
def test_share_group_topic(frames: dict[str, DataFrame], case: Case) -> None:
    row = _by_group(frames["share_group_topic"])[case.group]
    assert row["cluster"] == CLUSTER and row["topic"] == "jobs" and row["partitions"] == 1
    assert row["lag"] == case.lag
    assert row["lag_growing"] is case.lag_growing
    assert row["stalled_seconds"] == pytest.approx(case.stalled_seconds)
    assert row["stalled_partitions"] == (1 if case.stalled_seconds else 0)
    assert row["backlog_seconds"] == pytest.approx(case.backlog_seconds)
    assert row["sampled"] is case.sampled
    assert row["members"] == case.members and row["group_state"] == case.state
    rate = (case.ends[-1] - case.ends[0]) / (case.times[0] - case.times[-1])
    assert row["produce_rate"] == pytest.approx(rate)
    method = "none" if case.lag is None else "broker" if case.broker_lag else "end_minus_start"
    assert row["lag_method"] == method


def test_share_group_rolls_up_and_keeps_groups_without_partitions(frames: dict[str, DataFrame]) -> None:
    groups = _by_group(frames["share_group"])
    assert set(groups) == {c.group for c in CASES} | {"fresh"}
    for case in CASES:
        row = groups[case.group]
        assert (row["topics"], row["partitions"], row["lag"]) == (1, 1, case.lag), case.group
        assert (row["members"], row["lag_growing"], row["sampled"]) == (
            case.members,
            case.lag_growing,
            case.sampled,
        ), case.group
    fresh = groups["fresh"]
    assert (fresh["topics"], fresh["partitions"], fresh["lag"], fresh["lag_method"]) == (0, 0, None, "none")
    assert (fresh["members"], fresh["stalled_seconds"], fresh["sampled"]) == (1, 0.0, True)
    assert_finite({k: frames[k] for k in ("share_group_topic", "share_group")})


def test_the_default_pack_on_share_groups(spark: SparkSession, frames: dict[str, DataFrame]) -> None:
    ruleset = load_rules([ROOT / "alert_rules" / "share.yaml"])
    assert ruleset.ok, ruleset.errors
    matches = evaluate_rules(frames, ruleset.rules, AT).collect()
    got: dict[str, set[tuple[str, str]]] = {}
    for m in matches:
        got.setdefault(m["labels"]["group_id"], set()).add((m["rule"], m["severity"]))
    expected = {c.group: set(c.findings) for c in CASES if c.findings}
    assert got == expected


def test_a_caller_reading_each_entity_once_keeps_only_the_frames_derive_reads_again(
    spark: SparkSession,
) -> None:
    """A plan for one action (plan.gather) reads each entity once: the entities no other frame
    reads (topic, share group, cluster) are not kept then, and every entity has the same rows."""
    inputs = _world().inputs(spark)
    kept: dict[bool, list[list[str]]] = {False: [], True: []}

    def keeping(read_once: bool) -> dict[str, DataFrame]:
        def keep(frame: DataFrame) -> DataFrame:
            kept[read_once].append(frame.columns)
            return frame

        return derive(inputs, keep=keep, read_once=read_once)

    every, once = keeping(False), keeping(True)
    assert len(kept[False]) - len(kept[True]) == 3
    assert all(columns in kept[False] for columns in kept[True])
    for entity, frame in every.items():
        assert sorted(map(str, once[entity].collect())) == sorted(map(str, frame.collect())), entity
    assert once["share_group"].count() > 0
