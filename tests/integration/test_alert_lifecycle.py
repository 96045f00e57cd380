"""The alert cycle on the real PostgreSQL with the shipped routing (alert_rules/routing.yaml):
findings in, notifications in the outbox out, on Alertmanager's schedule plus acknowledgement and
escalation. A fake clock drives the timing; findings are written as the evaluate stage writes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from monitor.alert import actions
from monitor.alert.config import Routing, default_routing_paths, load_routing
from monitor.alert.cycle import CycleResult, run_cycle
from monitor.alert.model import DeliveryResult, Notification
from monitor.alert.notify.sender import Sender
from monitor.core.clock import FakeClock
from monitor.core.identity import Identity
from tests.fixtures.delivery import resolve_findings

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
URL = "http://monitor.test"


@pytest.fixture(scope="module")
def routing() -> Routing:
    return load_routing(*default_routing_paths())


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE findings, alerts, alert_groups, acks, silences, notification_outbox, notification_log"
            )
        )
    yield engine


class World:
    """Findings as the evaluate stage leaves them, and one alert cycle at a time."""

    def __init__(self, engine: Engine, routing: Routing) -> None:
        self.engine = engine
        self.routing = routing
        self.clock = FakeClock(T0)

    def finding(
        self,
        rule: str,
        severity: str,
        *,
        cluster: str = "prod",
        topic: str = "orders",
        partition: int | None = 0,
        broker_id: int | None = None,
        state: str = "firing",
        **labels: str,
    ) -> None:
        keys: dict[str, str] = {"cluster": cluster}
        if broker_id is not None:
            entity, keys["broker_id"] = "broker", str(broker_id)
        else:
            entity, keys["topic"] = "partition", topic
            if partition is not None:
                keys["partition"] = str(partition)
        entity_key = "/".join(keys.values())
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                    " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                    " VALUES (:rule, :entity, :key, :cluster, CAST(:labels AS jsonb), :severity, 1, :summary, '',"
                    " 0, :state, :now, :now, :now)"
                    " ON CONFLICT (rule, entity_key) WHERE state <> 'resolved'"
                    " DO UPDATE SET severity = excluded.severity, state = excluded.state, last_seen = excluded.last_seen"
                ),
                {
                    "rule": rule,
                    "entity": entity,
                    "key": entity_key,
                    "cluster": cluster,
                    "labels": json.dumps({**keys, **labels}),
                    "severity": severity,
                    "summary": f"{rule} on {entity_key}",
                    "state": state,
                    "now": self.clock.now(),
                },
            )

    def resolve(self, rule: str) -> None:
        resolve_findings(self.engine, rule, self.clock.now())

    def cycle(self, after: float = 0) -> list[Notification]:
        self.clock.advance(after)
        with self.engine.begin() as conn:
            result: CycleResult = run_cycle(conn, self.routing, self.clock.now(), URL)
        return result.notifications


def sent(notifications: list[Notification]) -> list[tuple[str, str]]:
    return sorted((n.receiver, n.kind) for n in notifications)


@pytest.fixture
def world(db: Engine, routing: Routing) -> World:
    return World(db, routing)


def test_one_replica_lost_goes_to_slack_and_email_not_the_pager(world: World) -> None:
    world.finding("PartitionReplicaLost", "warning")
    assert world.cycle() == [], "group_wait: nobody is told at once"
    notified = world.cycle(after=30)
    assert sent(notified) == [("ops-email", "firing"), ("ops-slack", "firing")]


def test_two_replicas_lost_pages_and_posts_to_slack(world: World) -> None:
    world.finding("PartitionReplicasLost", "critical")
    assert world.cycle() == []
    assert sent(world.cycle(after=10)) == [("oncall-pager", "firing")], "the pager's group_wait is 10s"
    assert sent(world.cycle(after=20)) == [("ops-slack", "firing")]


def test_fifty_partition_alerts_make_one_message_per_receiver(world: World) -> None:
    for partition in range(50):
        world.finding("PartitionReplicaLost", "warning", partition=partition)
    world.cycle()
    notified = world.cycle(after=30)
    assert sent(notified) == [("ops-email", "firing"), ("ops-slack", "firing")]
    assert all(len(n.alerts) == 50 for n in notified)
    assert notified[0].group_labels == {"cluster": "prod", "rule": "PartitionReplicaLost"}
    with world.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notification_outbox")).scalar() == 2


def test_news_waits_for_group_interval_and_repeats_follow_repeat_interval(world: World) -> None:
    world.finding("PartitionReplicaLost", "warning", partition=0)
    world.cycle()
    world.cycle(after=30)
    world.finding("PartitionReplicaLost", "warning", partition=1)
    assert world.cycle(after=60) == [], "a new alert in the group waits for group_interval (2m)"
    update = world.cycle(after=60)
    assert sent(update) == [("ops-email", "firing"), ("ops-slack", "firing")]
    assert all(len(n.alerts) == 2 for n in update)
    assert world.cycle(after=600) == [], "no news, no notice"
    # Slack repeats 4h after its last notice (email 12h after its own); by then, unacknowledged
    # for over 2h, the warning has been escalated to the pager.
    repeats = world.cycle(after=4 * 3600 - 600)
    assert sent(repeats) == [("oncall-pager", "escalation"), ("ops-slack", "repeat")]


def test_resolved_notice_when_the_finding_resolves(world: World) -> None:
    world.finding("PartitionReplicasLost", "critical")
    world.cycle()
    world.cycle(after=30)
    world.resolve("PartitionReplicasLost")
    notified = world.cycle(after=10)
    assert sent(notified) == [("oncall-pager", "resolved"), ("ops-slack", "resolved")]
    assert all(a.state == "resolved" for n in notified for a in n.alerts)
    pager = next(n for n in notified if n.receiver == "oncall-pager")
    with world.engine.connect() as conn:
        first = conn.execute(
            text(
                "SELECT dedup_key FROM notification_outbox WHERE receiver = 'oncall-pager' ORDER BY id LIMIT 1"
            )
        ).scalar()
    assert pager.dedup_key == first, "the resolve closes the same PagerDuty incident"
    assert world.cycle(after=3600) == []


def test_an_unacknowledged_warning_is_escalated_to_the_pager_once(world: World) -> None:
    world.finding("PartitionReplicaLost", "warning")
    world.cycle()
    world.cycle(after=30)
    assert world.cycle(after=3600) == []
    escalated = world.cycle(after=3600)
    assert ("oncall-pager", "escalation") in sent(escalated)
    assert not any(n.kind == "escalation" for n in world.cycle(after=3600))
    world.resolve("PartitionReplicaLost")
    closing = sent(world.cycle(after=60))
    assert ("oncall-pager", "resolved") in closing, "the escalated page is resolved too"


def test_an_acknowledged_warning_is_neither_escalated_nor_repeated(world: World) -> None:
    world.finding("PartitionReplicaLost", "warning")
    world.cycle()
    first = world.cycle(after=30)
    slack = next(n for n in first if n.receiver == "ops-slack")
    assert slack.ack_url is not None and slack.ack_url.startswith(f"{URL}/ack/")
    token = slack.ack_url.rsplit("/", 1)[1]
    with world.engine.begin() as conn:
        # the alert names no team: its incident is the platform role's to acknowledge
        alice = Identity("alice", frozenset({"kafka-platform"}), "proxy")
        actions.acknowledge(
            conn, alice, token=token, now=world.clock.now(), platform_teams=("kafka-platform",)
        )
    told = world.cycle(after=60)
    assert sent(told) == [("ops-slack", "acknowledge")]
    assert told[0].extra == {"acknowledged_by": "alice"}
    later = world.cycle(after=5 * 3600)
    assert not any(n.receiver == "ops-slack" for n in later), "no repeat for an acknowledged incident"
    assert not any(n.kind == "escalation" for n in later)


def test_a_severity_change_reroutes_the_same_alert(world: World) -> None:
    world.finding("PartitionReplicaLost", "warning")
    world.cycle()
    world.cycle(after=30)
    world.finding("PartitionReplicaLost", "critical")
    assert world.cycle() == [], "the pager's new group waits its group_wait"
    notified = world.cycle(after=10)
    assert ("oncall-pager", "firing") in sent(notified)
    with world.engine.connect() as conn:
        alerts = conn.execute(text("SELECT severity FROM alerts WHERE state <> 'resolved'")).scalars().all()
    assert alerts == ["critical"], "one alert, re-rated"


def test_a_silence_mutes_until_it_expires(world: World) -> None:
    with world.engine.begin() as conn:
        silence = actions.create_silence(
            conn,
            Identity("bob", frozenset({"kafka-platform"}), "cli"),
            matchers=["cluster=prod", "rule=~PartitionReplica.*"],
            platform_teams={"kafka-platform"},
            comment="broker replacement",
            now=world.clock.now(),
            duration=timedelta(hours=1),
            max_duration=timedelta(days=7),
        )
    world.finding("PartitionReplicasLost", "critical")
    world.finding("PartitionReplicasLost", "critical", cluster="staging")
    world.cycle()
    notified = world.cycle(after=30)
    assert {n.group_labels["cluster"] for n in notified} == {"staging"}
    with world.engine.connect() as conn:
        muted = conn.execute(text("SELECT silenced_by FROM alerts WHERE cluster = 'prod'")).scalar()
        listed = actions.silences(conn, world.clock.now())
    assert muted == silence
    assert listed[0]["created_by"] == "bob" and listed[0]["comment"] == "broker replacement"
    world.cycle(after=3600)  # the silence has ended
    after = world.cycle(after=10)
    assert ("oncall-pager", "firing") in sent(after)
    assert {n.group_labels["cluster"] for n in after} == {"prod"}


def test_a_broker_down_inhibits_the_under_replication_it_causes(world: World) -> None:
    world.finding("BrokerDown", "critical", broker_id=3, partition=None)
    for partition in range(5):
        world.finding("PartitionReplicaLost", "warning", partition=partition)
    world.finding("PartitionReplicaLost", "warning", cluster="other")
    world.cycle()
    notified = world.cycle(after=30)
    rules = {(n.receiver, n.group_labels.get("rule"), n.group_labels.get("cluster")) for n in notified}
    assert ("oncall-pager", "BrokerDown", "prod") in rules
    assert not any(rule == "PartitionReplicaLost" and cluster == "prod" for _, rule, cluster in rules)
    assert ("ops-slack", "PartitionReplicaLost", "other") in rules, "another cluster is not inhibited"
    with world.engine.connect() as conn:
        inhibited = conn.execute(
            text("SELECT count(*) FROM alerts WHERE inhibited_by IS NOT NULL AND cluster = 'prod'")
        ).scalar()
    assert inhibited == 5


def test_a_broker_down_mutes_only_the_lag_that_started_after_it(world: World) -> None:
    world.finding("ConsumerAppendLag", "warning", topic="before", partition=None, group_id="early")
    world.cycle()
    world.clock.advance(60)
    world.finding("BrokerDown", "critical", broker_id=3, partition=None)
    world.finding("ConsumerAppendLag", "warning", topic="after", partition=None, group_id="late")
    world.cycle()
    world.cycle(after=30)
    with world.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT entity_key, inhibited_by IS NOT NULL AS muted FROM alerts WHERE rule = 'ConsumerAppendLag'"
            )
        ).all()
    assert dict((r.entity_key, r.muted) for r in rows) == {"prod/before": False, "prod/after": True}


def test_two_cycles_at_once_never_decide_the_same_notification_twice(world: World) -> None:
    import threading

    world.finding("PartitionOffline", "critical")
    world.cycle()
    world.clock.advance(30)
    results: list[Any] = []

    def one() -> None:
        with world.engine.begin() as conn:
            results.append(run_cycle(conn, world.routing, world.clock.now(), URL).notifications)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    with world.engine.connect() as conn:
        rows = conn.execute(text("SELECT receiver, kind FROM notification_outbox ORDER BY receiver")).all()
    assert [tuple(r) for r in rows] == [("oncall-pager", "firing"), ("ops-slack", "firing")]


# ---------------------------------------------------------------------------------------------
# Notices that say what is wrong, on time, and that say when it ended


def group_finding(
    world: World, rule: str, severity: str, group_id: str, state: str = "firing", entity: str = "group"
) -> None:
    """A finding on a consumer group (entity `group`, or a share group's `share_group`), as the
    evaluate stage writes it."""
    with world.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES (:rule, :entity, :key, 'prod', CAST(:labels AS jsonb), :severity, 1, :summary, '',"
                " 0, :state, :now, :now, :now)"
                " ON CONFLICT (rule, entity_key) WHERE state <> 'resolved'"
                " DO UPDATE SET severity = excluded.severity, state = excluded.state, last_seen = excluded.last_seen"
            ),
            {
                "rule": rule,
                "entity": entity,
                "key": f"prod/{group_id}",
                "labels": json.dumps({"cluster": "prod", "group_id": group_id}),
                "severity": severity,
                "summary": f"Group {group_id} is in status ERR",
                "state": state,
                "now": world.clock.now(),
            },
        )


def resolve_entity(world: World, entity_key: str) -> None:
    with world.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE findings SET state = 'resolved', resolved_at = :now"
                " WHERE entity_key = :key AND state <> 'resolved'"
            ),
            {"key": entity_key, "now": world.clock.now()},
        )


def evaluated(
    world: World, group_id: str, at: datetime, partitions: dict[tuple[str, int], tuple[str, int]]
) -> None:
    """derived_group_partition rows of one evaluation: (topic, partition) -> (status, offset lag)."""
    from monitor.store.partitions import create_day_partitions

    with world.engine.begin() as conn:
        create_day_partitions(conn, "derived_group_partition", [at.date()])
        for (topic, partition), (status, lag) in partitions.items():
            conn.execute(
                text(
                    "INSERT INTO derived_group_partition (cluster, group_id, topic, partition, status,"
                    " offset_lag, lag_seconds, time_until_data_loss_seconds, evaluated_at)"
                    " VALUES ('prod', :g, :t, :p, :status, :lag, :lag_seconds, :loss, :at)"
                ),
                {
                    "g": group_id,
                    "t": topic,
                    "p": partition,
                    "status": status,
                    "lag": lag,
                    "lag_seconds": float(lag),
                    "loss": 900.0 if status == "STOP" else None,
                    "at": at,
                },
            )


@pytest.fixture
def clean_derived(db: Engine) -> Iterator[None]:
    with db.begin() as conn:
        conn.execute(text("DELETE FROM derived_group_partition WHERE cluster = 'prod'"))
    yield


def test_a_group_notice_says_which_partitions_which_status_since_when(
    world: World, clean_derived: None
) -> None:
    # Partition 3 was WARN, then STOP from T0+60; partition 1 STALL all along; 0 is fine.
    evaluated(
        world,
        "billing",
        T0,
        {("invoices", 3): ("WARN", 10), ("invoices", 1): ("STALL", 40), ("invoices", 0): ("OK", 0)},
    )
    evaluated(
        world,
        "billing",
        T0 + timedelta(seconds=60),
        {("invoices", 3): ("STOP", 50), ("invoices", 1): ("STALL", 40), ("invoices", 0): ("OK", 0)},
    )
    evaluated(
        world,
        "billing",
        T0 + timedelta(seconds=120),
        {("invoices", 3): ("STOP", 90), ("invoices", 1): ("STALL", 40), ("invoices", 0): ("OK", 0)},
    )
    world.clock.advance(120)
    group_finding(world, "ConsumerGroupStatus", "warning", "billing")
    world.cycle()
    notified = world.cycle(after=30)
    slack = next(n for n in notified if n.receiver == "ops-slack")
    alert = slack.alerts[0]
    assert [(p.topic, p.partition, p.status, p.offset_lag) for p in alert.partitions] == [
        ("invoices", 1, "STALL", 40),
        ("invoices", 3, "STOP", 90),
    ], "worst first (Burrow's order ranks STALL above STOP); a partition that is fine is not listed"
    assert alert.partitions[1].since == T0 + timedelta(seconds=60), (
        "since it entered STOP, not since it lagged"
    )
    assert alert.partitions[0].since == T0
    assert alert.partitions[1].time_until_data_loss_seconds == 900.0
    assert alert.partitions_total == 2
    # the outbox holds what was decided, facts included
    with world.engine.connect() as conn:
        payload = conn.execute(
            text("SELECT payload FROM notification_outbox WHERE receiver = 'ops-slack'")
        ).scalar_one()
    assert Notification.from_json(payload).alerts[0].partitions == alert.partitions


def share_sampled(world: World, group_id: str, at: datetime, partitions: dict[int, tuple[int, int]]) -> None:
    """share_group_offsets rows of one sample of `group_id` on topic `jobs`: partition -> (start
    offset, end offset)."""
    from monitor.store.partitions import create_day_partitions

    with world.engine.begin() as conn:
        create_day_partitions(conn, "share_group_offsets", [at.date()])
        for partition, (start, end) in partitions.items():
            conn.execute(
                text(
                    "INSERT INTO share_group_offsets (cluster, sampled_at, group_id, topic, partition,"
                    " start_offset, end_offset, lag, lag_method)"
                    " VALUES ('prod', :at, :g, 'jobs', :p, :start, :end, :lag, 'end_minus_start')"
                ),
                {"at": at, "g": group_id, "p": partition, "start": start, "end": end, "lag": end - start},
            )


def test_a_share_group_notice_lists_its_stalled_share_partitions_since_when(
    world: World, clean_derived: None
) -> None:
    with world.engine.begin() as conn:
        conn.execute(text("DELETE FROM share_group_offsets WHERE cluster = 'prod'"))
    # Partition 2's start offset stands at 40 from T0+30 while records arrive; partition 1 keeps
    # finishing them (a lag, moving); partition 0 is done.
    for seconds, (p0, p1, p2) in enumerate([(5, 10, 20), (6, 30, 40), (7, 50, 40), (8, 70, 40)]):
        at = T0 + timedelta(seconds=30 * seconds)
        share_sampled(world, "workers", at, {0: (p0, p0), 1: (p1, p1 + 15), 2: (p2, 100 + 10 * seconds)})
    world.clock.advance(90)
    group_finding(world, "ShareGroupStalled", "warning", "workers", entity="share_group")
    world.cycle()
    alert = next(n for n in world.cycle(after=30) if n.receiver == "ops-slack").alerts[0]
    assert [(p.topic, p.partition, p.status, p.offset_lag, p.since) for p in alert.partitions] == [
        ("jobs", 2, "STALL", 90, T0 + timedelta(seconds=30)),
        ("jobs", 1, "OK", 15, None),
    ], "the stalled share partition first, since its start offset stood still; the one done unlisted"
    assert alert.partitions_total == 2


def test_a_new_group_in_trouble_is_told_after_group_wait_not_another_groups_interval(world: World) -> None:
    group_finding(world, "ConsumerGroupNoMembers", "warning", "billing")
    world.cycle()
    assert ("ops-slack", "firing") in sent(world.cycle(after=30))
    group_finding(world, "ConsumerGroupNoMembers", "warning", "ledger")
    world.cycle(after=10)
    told = world.cycle(after=30)
    assert ("ops-slack", "firing") in sent(told), "told 40 s after it appeared, not after group_interval"
    assert {n.group_labels.get("group_id") for n in told} == {"ledger"}


def test_an_alert_that_resolves_inside_a_firing_group_is_announced(world: World) -> None:
    world.finding("PartitionReplicaLost", "warning", partition=0)
    world.finding("PartitionReplicaLost", "warning", partition=1)
    world.cycle()
    world.cycle(after=30)
    resolve_entity(world, "prod/orders/1")
    assert world.cycle(after=30) == [], "news waits for group_interval"
    told = world.cycle(after=90)
    assert sent(told) == [("ops-email", "firing"), ("ops-slack", "firing")]
    for notification in told:
        assert [a.entity_key for a in notification.firing] == ["prod/orders/0"]
        assert [a.entity_key for a in notification.resolved] == ["prod/orders/1"]
    assert world.cycle(after=600) == [], "announced once"


def test_the_pager_is_not_told_of_each_alert_that_resolves_in_its_incident(world: World) -> None:
    world.finding("PartitionReplicasLost", "critical", partition=0)
    world.finding("PartitionReplicasLost", "critical", partition=1)
    world.cycle()
    world.cycle(after=30)
    resolve_entity(world, "prod/orders/1")
    world.cycle(after=10)
    told = world.cycle(after=300)
    assert sent(told) == [("ops-slack", "firing")], "Slack hears the news; the pager's incident goes on"


def test_two_brokers_down_page_with_their_impact_and_writes_failing_are_told(world: World) -> None:
    world.finding("BrokerDown", "critical", broker_id=2, partition=None)
    world.finding("BrokerDown", "critical", broker_id=3, partition=None)
    for partition in range(4):
        world.finding("PartitionReplicaLost", "warning", partition=partition)
    world.finding("PartitionReplicasLost", "critical", topic="payments", partition=0)
    world.finding("PartitionUnderMinIsr", "critical", topic="orders", partition=9)
    world.cycle()
    notified = world.cycle(after=10)
    pages = {n.group_labels["rule"]: n for n in notified if n.receiver == "oncall-pager"}
    assert set(pages) == {"BrokerDown", "PartitionReplicasLost", "PartitionUnderMinIsr"}, (
        "what is worse than a broker down is told, not muted"
    )
    broker = pages["BrokerDown"]
    impact = broker.alerts[0].impact
    assert impact is not None and impact.counts == {
        "PartitionUnderMinIsr": 1,
        "PartitionReplicasLost": 1,
        "PartitionReplicaLost": 4,
    }
    assert impact.worst[0].entity_key == "prod/orders/9", "writes failing first"
    with world.engine.connect() as conn:
        muted = conn.execute(text("SELECT rule FROM alerts WHERE inhibited_by IS NOT NULL")).scalars().all()
    assert sorted(set(muted)) == ["PartitionReplicaLost"]


def test_a_new_kind_of_impact_is_news_of_the_source(world: World) -> None:
    world.finding("BrokerDown", "critical", broker_id=3, partition=None)
    world.finding("PartitionReplicaLost", "warning", partition=0)
    world.cycle()
    first = [n for n in world.cycle(after=10) if n.receiver == "oncall-pager"]
    assert first and first[0].alerts[0].impact is not None
    assert first[0].alerts[0].impact.counts == {"PartitionReplicaLost": 1}
    world.finding("PartitionReplicaLost", "warning", partition=1)
    assert not [n for n in world.cycle(after=150) if n.receiver == "oncall-pager"], (
        "more of the same is no news"
    )
    world.finding("PartitionUnderMinIsr", "critical", partition=2)
    later = [
        n
        for n in world.cycle(after=10)
        if n.receiver == "oncall-pager" and n.group_labels["rule"] == "BrokerDown"
    ]
    assert later and later[0].alerts[0].impact is not None
    assert later[0].alerts[0].impact.counts == {"PartitionUnderMinIsr": 1, "PartitionReplicaLost": 2}


class Recorder:
    def __init__(self) -> None:
        self.received: list[Notification] = []

    def send(self, notification: Notification) -> DeliveryResult:
        self.received.append(notification)
        return DeliveryResult.delivered(200)


def drain(world: World, receivers: dict[str, Recorder]) -> dict[str, int]:
    sender = Sender(lambda: world.engine, lambda: receivers, world.clock, "a", seed=1)
    try:
        return sender.drain()
    finally:
        sender.close()


def log_rows(world: World) -> list[tuple[str, str, str | None]]:
    with world.engine.connect() as conn:
        rows = conn.execute(text("SELECT kind, outcome, reason FROM notification_log ORDER BY id")).all()
    return [tuple(r) for r in rows]


def test_a_notice_whose_group_came_back_before_it_was_sent_is_dropped(world: World) -> None:
    receivers = {name: Recorder() for name in ("ops-slack", "ops-email", "oncall-pager", "console")}
    group_finding(world, "ConsumerGroupNoMembers", "warning", "billing")
    world.cycle()
    assert sent(world.cycle(after=30)) == [("ops-email", "firing"), ("ops-slack", "firing")]
    # The group comes back: the evaluation resolves the finding before the sender runs, and
    # before the next alert cycle has resolved the alert.
    world.clock.advance(5)
    resolve_entity(world, "prod/billing")
    assert drain(world, receivers) == {"dropped": 2}
    assert not any(r.received for r in receivers.values())
    assert log_rows(world) == [("firing", "dropped", "all_resolved")] * 2
    # The cycle closes the incident; its resolved notice would resolve what nobody was told.
    closing = world.cycle(after=5)
    assert sent(closing) == [("ops-email", "resolved"), ("ops-slack", "resolved")]
    assert drain(world, receivers) == {"dropped": 2}
    assert not any(r.received for r in receivers.values())
    assert log_rows(world)[2:] == [("resolved", "dropped", "never_announced")] * 2
    with world.engine.connect() as conn:
        states = conn.execute(text("SELECT DISTINCT state FROM notification_outbox")).scalars().all()
    assert states == ["dropped"]


def test_a_notice_still_true_when_due_is_sent_and_its_resolve_follows(world: World) -> None:
    receivers = {name: Recorder() for name in ("ops-slack", "ops-email", "oncall-pager", "console")}
    world.finding("PartitionReplicaLost", "warning", partition=0)
    world.finding("PartitionReplicaLost", "warning", partition=1)
    world.cycle()
    world.cycle(after=30)
    resolve_entity(world, "prod/orders/1")  # one of the two is back: the other still fires
    assert drain(world, receivers) == {"sent": 2}
    resolve_entity(world, "prod/orders/0")
    world.cycle(after=60)
    assert drain(world, receivers) == {"sent": 2}, "the resolve of an incident that was told is sent"
    assert [n.kind for n in receivers["ops-slack"].received] == ["firing", "resolved"]


HOSTILE_TEXTS = [
    "tab\there", "new\nline", "back\\slash", "\\N", "\\.", "carriage\rreturn", "quote's \"both\"",
    "bidi \u202e evil", "zero\u200bwidth", "emoji 🔥", "comma, and; semicolon", "\x1b[31mred",
]  # fmt: skip


def test_alerts_opened_at_once_keep_every_character_of_their_labels_and_texts(
    db: Engine, routing: Routing
) -> None:
    """New alerts are written with COPY: a label or summary with COPY's own separators, escapes and
    markers, or with control characters, is read back exactly as the finding had it."""
    world = World(db, routing)
    for n, hostile in enumerate(HOSTILE_TEXTS):
        world.finding("ConsumerAppendLag", "warning", topic=f"t{n}", group_id=hostile, note=hostile)
    world.cycle()

    with db.connect() as conn:
        alerts = {
            r.labels["topic"]: r
            for r in conn.execute(text("SELECT labels, summary, entity_key, state FROM alerts"))
        }
        findings = {
            r.labels["topic"]: r
            for r in conn.execute(text("SELECT labels, summary, entity_key FROM findings"))
        }
    assert len(alerts) == len(HOSTILE_TEXTS)
    for topic, finding in findings.items():
        alert = alerts[topic]
        assert {k: alert.labels.get(k) for k in finding.labels} == finding.labels
        assert (alert.summary, alert.entity_key) == (finding.summary, finding.entity_key)
    assert {a.labels["group_id"] for a in alerts.values()} == set(HOSTILE_TEXTS)
