"""The demo workload's plan: what it produces and consumes, how the timeline is compressed, when
brokers stop, and when the rewinding group's partitions take their turns."""

from __future__ import annotations

import itertools

import pytest

from monitor.devtools.workload.plan import (
    Behaviour,
    Pacer,
    Step,
    demo_plan,
    due,
    members_of,
    rewind_at,
    scaled,
)

URL = "http://127.0.0.1:8080"


def test_every_behaviour_has_a_group_on_a_topic_of_the_plan() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3)
    assert {g.behaviour for g in plan.groups} == set(Behaviour)
    topics = {t.name for t in plan.topics}
    assert all(g.topic in topics for g in plan.groups)
    assert "payments.orders" in topics  # the retention button's topic gets traffic
    assert len({g.group_id for g in plan.groups}) == len(plan.groups)


def test_the_rewinding_group_has_a_backlog_and_gains_on_the_producers() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3)
    group = plan.group("clicks-replayer")
    topic = plan.topic(group.topic)
    assert group.behaviour is Behaviour.REWINDING and group.from_beginning and topic.history_seconds > 0
    assert group.rate is not None and group.rate > topic.rate and topic.acks == "1"


def test_the_slow_groups_consume_less_than_their_topics_receive() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3)
    slow = [g for g in plan.groups if g.behaviour is Behaviour.SLOW]
    assert slow
    for group in slow:
        assert group.rate is not None and group.rate < plan.topic(group.topic).rate
        assert group.from_beginning


def test_lag_alert_topics_start_with_history_older_than_the_rules_thresholds() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3)
    lagging = plan.group("clicks-analytics")
    # ConsumerLagSeconds warns from 15 minutes, ConsumerAppendLag pages from 30.
    assert 900 < plan.topic(lagging.topic).history_seconds < 1800
    stopped = plan.group("audit-archiver")
    read_seconds = (stopped.rate or 0) * stopped.act_after_seconds / plan.topic(stopped.topic).rate
    assert plan.topic(stopped.topic).history_seconds - read_seconds >= 300  # append lag >= 5 min


def test_replica_loss_topics_have_min_insync_two_on_three_nodes_only() -> None:
    three = demo_plan(web_url=URL, cluster="local", nodes=3)
    assert three.topic("payments.orders").configs["min.insync.replicas"] == "2"
    assert three.topic("payments.orders").acks == "all"
    one = demo_plan(web_url=URL, cluster="local", nodes=1)
    assert "min.insync.replicas" not in one.topic("payments.orders").configs
    assert one.steps == ()  # nothing to stop on a one-node cluster


def test_brokers_stop_after_two_minutes_then_two_more() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3, stop_brokers=(3, 2))
    assert [(s.at_seconds, s.broker_id) for s in plan.steps] == [(120.0, 3), (240.0, 2)]
    assert "PartitionReplicaLost" in plan.steps[0].expect
    assert "PartitionUnderMinIsr" in plan.steps[1].expect
    only_one = demo_plan(web_url=URL, cluster="local", nodes=3, stop_brokers=(3,))
    assert [s.broker_id for s in only_one.steps] == [3]


def test_speed_compresses_the_story_but_not_the_rates() -> None:
    normal = demo_plan(web_url=URL, cluster="local", nodes=3)
    fast = demo_plan(web_url=URL, cluster="local", nodes=3, speed=4)
    assert [s.at_seconds for s in fast.steps] == [30.0, 60.0]
    assert fast.summary_at_seconds == 75.0
    assert fast.group("clicks-replayer").rewind_every_seconds == 30.0
    assert (
        fast.group("audit-archiver").act_after_seconds == normal.group("audit-archiver").act_after_seconds / 4
    )
    assert fast.topic("inventory.events").configs["retention.ms"] == "60000"
    assert fast.topic("inventory.events").configs["segment.ms"] == "3750"
    assert [t.rate for t in fast.topics] == [t.rate for t in normal.topics]
    with pytest.raises(ValueError, match="speed must be positive"):
        demo_plan(web_url=URL, cluster="local", nodes=3, speed=0)


def test_prefix_names_every_topic_and_group() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3, prefix="t1-")
    assert all(t.name.startswith("t1-") for t in plan.topics)
    assert all(g.group_id.startswith("t1-") and g.topic.startswith("t1-") for g in plan.groups)


def test_urls_point_at_the_pages_to_look_at() -> None:
    plan = demo_plan(web_url=URL + "/", cluster="local dc", nodes=3)
    assert plan.alerts_url == f"{URL}/alerts"
    assert plan.inbox_url == f"{URL}/inbox"
    assert plan.group_url("clicks-analytics") == f"{URL}/clusters/local%20dc/groups/clicks-analytics"
    assert plan.topic_url("payments.orders") == f"{URL}/clusters/local%20dc/topics/payments.orders"


def test_due_returns_each_step_once_in_order() -> None:
    steps = (Step(240, 2, "second"), Step(120, 3, "first"))
    assert due(steps, 119.9, 0) == []
    assert [s.expect for s in due(steps, 120, 0)] == ["first"]
    assert due(steps, 100, 1) == []
    assert [s.expect for s in due(steps, 500, 0)] == ["first", "second"]
    assert [s.expect for s in due(steps, 500, 1)] == ["second"]
    assert due(steps, 500, 2) == []


def test_rewinding_partitions_take_turns_so_one_has_always_rewound_recently() -> None:
    group = demo_plan(web_url=URL, cluster="local", nodes=3).group("clicks-replayer")
    partitions = 3
    times = sorted(rewind_at(group, p, partitions, k) for p in range(partitions) for k in range(5))
    assert times[0] == group.first_rewind_seconds
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # A partition stays below its highest offset for about `rewind_seconds` after its rewind:
    # turns closer together than that keep the group in REWIND without a break.
    assert max(gaps) == pytest.approx(group.rewind_every_seconds / partitions)
    assert max(gaps) < group.rewind_seconds
    assert (
        rewind_at(group, 0, partitions, 1) - rewind_at(group, 0, partitions, 0) == group.rewind_every_seconds
    )


def test_scaled_multiplies_every_rate() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3)
    half = scaled(plan, 0.5)
    assert [t.rate for t in half.topics] == [t.rate / 2 for t in plan.topics]
    assert half.group("payments-ledger").rate is None
    assert half.group("clicks-analytics").rate == (plan.group("clicks-analytics").rate or 0) / 2


def test_pacer_allows_the_rate_on_average() -> None:
    pacer = Pacer(10, start=100.0)
    assert pacer.wait_for(100.0, 1) == pytest.approx(0.1)
    assert pacer.wait_for(100.1, 1) == 0.0
    pacer.record(5)
    assert pacer.wait_for(100.2, 5) == pytest.approx(0.8)
    assert pacer.wait_for(101.0, 5) == 0.0
    assert Pacer(None, start=0).wait_for(0, 1000) == 0.0


def test_paced_groups_have_one_member_per_partition() -> None:
    plan = demo_plan(web_url=URL, cluster="local", nodes=3)
    assert members_of(plan.group("clicks-analytics"), 3) == 3
    assert members_of(plan.group("payments-ledger"), 3) == 1  # reads as fast as it can
