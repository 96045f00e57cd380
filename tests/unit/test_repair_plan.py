"""The repair actions' plans and guardrails, on snapshots built by hand: numbered cases with every
partition's move and the leader counts before and after."""

from __future__ import annotations

import pytest

from monitor.act.repair_plan import Move, Plan, Snapshot, move_leadership, preferred_election, refusals
from monitor.act.repairs import carry_out
from monitor.core.records import PartitionInfo, TopicInfo
from monitor.kafka.fake import FakeCluster


def snapshot(live: set[int], *parts: tuple[int | None, tuple[int, ...], tuple[int, ...]]) -> Snapshot:
    """One topic `t`; partition i is parts[i] = (leader, replicas, isr)."""
    infos = tuple(PartitionInfo(i, leader, reps, isr) for i, (leader, reps, isr) in enumerate(parts))
    return Snapshot.of(live, [TopicInfo("t", False, infos)])


ALL = (1, 2, 3)
# After broker 1 came back: broker 2 leads partition 0 (prefers 1) and its own partition 1.
RESTARTED = snapshot({1, 2, 3}, (2, (1, 2, 3), ALL), (2, (2, 3, 1), ALL), (3, (3, 1, 2), ALL))


def moves(plan: Plan) -> list[tuple[int, int | None, int, tuple[int, ...]]]:
    return [(m.partition, m.leader, m.new_leader, m.new_replicas) for m in plan.moves]


def test_1_election_returns_the_partitions_a_broker_leads_for_another() -> None:
    plan = preferred_election(RESTARTED, 2)
    assert moves(plan) == [(0, 2, 1, (1, 2, 3))]
    assert plan.leaders_before == {1: 0, 2: 2, 3: 1}
    assert plan.leaders_after == {1: 1, 2: 1, 3: 1}


def test_2_election_for_a_broker_that_leads_only_its_own_plans_nothing() -> None:
    assert preferred_election(RESTARTED, 3).moves == ()


def test_3_election_skips_a_preferred_replica_that_is_out_of_sync() -> None:
    behind = snapshot({1, 2, 3}, (2, (1, 2, 3), (2, 3)))
    assert preferred_election(behind, 2).moves == ()


def test_4_the_plan_round_trips_through_its_json() -> None:
    plan = preferred_election(RESTARTED, None)
    assert Plan.from_dict(plan.as_dict()) == plan


def test_5_move_takes_an_overloaded_broker_down_to_its_fair_share() -> None:
    # Broker 1 leads all three partitions; fair share is 1 each.
    loaded = snapshot({1, 2, 3}, (1, ALL, ALL), (1, ALL, ALL), (1, ALL, ALL))
    plan = move_leadership(loaded, 1)
    assert moves(plan) == [(0, 1, 2, (2, 1, 3)), (1, 1, 3, (3, 1, 2))]
    assert plan.leaders_before == {1: 3, 2: 0, 3: 0}
    assert plan.leaders_after == {1: 1, 2: 1, 3: 1}
    assert all(sorted(m.new_replicas) == sorted(m.replicas) for m in plan.moves)  # same replicas


def test_6_move_never_picks_a_replica_out_of_sync_or_swaps_the_overload() -> None:
    loaded = snapshot({1, 2}, (1, (1, 2), (1,)), (1, (1, 2), (1, 2)))
    # Partition 0's other replica is behind; moving partition 1 would leave 1 and 1: allowed.
    assert moves(move_leadership(loaded, 1)) == [(1, 1, 2, (2, 1))]
    balanced = snapshot({1, 2}, (1, (1, 2), (1, 2)), (2, (2, 1), (2, 1)))
    assert move_leadership(balanced, 1).moves == ()


@pytest.mark.parametrize(
    ("case", "snap", "expected"),
    [
        ("healthy", RESTARTED, []),
        ("broker down", snapshot({2, 3}, (2, ALL, (2, 3))), ["broker_down", "under_replicated"]),
        ("follower behind", snapshot({1, 2, 3}, (1, ALL, (1, 2))), ["under_replicated"]),
    ],
)
def test_7_guardrails(case: str, snap: Snapshot, expected: list[str]) -> None:
    found = refusals(snap)
    assert [f.split(":")[0] for f in found] == expected, case
    if "broker_down" in expected:
        assert "broker 1 (holds 1 replica(s))" in found[0]


def test_8_a_move_is_carried_out_by_reordering_then_electing() -> None:
    fake = FakeCluster("repairs", brokers=3)
    fake.create_topic("t", 3, 3)
    for part in fake.topic("t").partitions:  # broker 1 leads everything
        part.leader = 1
    admin = fake.admin()
    admin.start()
    (info,) = admin.describe_topics(["t"])
    plan = move_leadership(Snapshot.of(fake.live, [info]), 1)
    assert [m.partition for m in plan.moves]  # something to move

    done = carry_out(admin, plan)

    assert not done["errors"]
    (after,) = admin.describe_topics(["t"])
    for move in plan.moves:
        part = after.partitions[move.partition]
        assert part.leader == move.new_leader and part.replicas == move.new_replicas
    assert Snapshot.of(fake.live, [after]).leaders() == plan.leaders_after == {1: 1, 2: 1, 3: 1}


def test_9_an_election_whose_preferred_replica_is_down_is_reported_per_partition() -> None:
    fake = FakeCluster("repairs", brokers=3)
    fake.create_topic("t", 1, 3)
    admin = fake.admin()
    admin.start()
    plan = Plan((Move("t", 0, 2, (1, 2, 3), 1, (1, 2, 3)),))
    fake.stop_broker(1)

    done = carry_out(admin, plan)

    assert done["elected"] == [] and "PREFERRED_LEADER_NOT_AVAILABLE" in done["errors"]["t:0"]


def test_10_plans_count_the_watched_topics_and_the_guardrails_every_topic() -> None:
    # Topic `t` (watched): broker 1 leads all three. Topic `other` (outside the topic filter):
    # broker 2 leads six, and one of them is behind.
    watched = TopicInfo("t", False, tuple(PartitionInfo(i, 1, ALL, ALL) for i in range(3)))
    led_by_2 = [PartitionInfo(i, 2, (2, 1, 3), ALL) for i in range(5)]
    other = TopicInfo("other", False, (*led_by_2, PartitionInfo(5, 2, (2, 1, 3), (2, 1))))
    snap = Snapshot.of({1, 2, 3}, [watched, other], lambda t: t.name == "t")

    plan = move_leadership(snap, 1)
    assert plan.leaders_before == {1: 3, 2: 0, 3: 0}, "the leaders the finding counted"
    assert {m.topic for m in plan.moves} == {"t"} and plan.leaders_after == {1: 1, 2: 1, 3: 1}
    assert [r.split(":")[0] for r in refusals(snap)] == ["under_replicated"]
    assert "other:5" in refusals(snap)[0]
