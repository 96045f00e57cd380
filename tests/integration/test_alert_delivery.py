"""Findings to the wire: the alert cycle, the outbox and the real receivers against local Slack,
SMTP and PagerDuty servers on 127.0.0.1. The tiers as the receivers see them, a receiver that is
down for minutes and comes back, and a sender killed between claim and send."""

from __future__ import annotations

import json
from collections import Counter

from sqlalchemy import Engine, text

from monitor.alert.cycle import run_cycle
from monitor.alert.notify.outbox import claim
from tests.fixtures.delivery import URL, Pipeline
from tests.fixtures.receivers import (
    FakePagerDuty,
    FakeSlack,
    SmtpServer,
)


def test_one_replica_lost_reaches_slack_and_email_and_not_the_pager(
    pipeline: Pipeline, fake_slack: FakeSlack, smtp_server: SmtpServer, fake_pagerduty: FakePagerDuty
) -> None:
    pipeline.finding("PartitionReplicaLost", "warning")
    assert pipeline.tick() == {"sent": 2}
    assert len(fake_slack.messages) == 1 and "PartitionReplicaLost" in json.dumps(fake_slack.messages[0])
    assert len(smtp_server.messages) == 1
    assert fake_pagerduty.events == []


def test_two_replicas_lost_pages_once_and_resolves_the_same_incident(
    pipeline: Pipeline, fake_slack: FakeSlack, fake_pagerduty: FakePagerDuty
) -> None:
    pipeline.finding("PartitionReplicasLost", "critical")
    assert pipeline.tick() == {"sent": 2}
    pipeline.resolve("PartitionReplicasLost")
    assert pipeline.tick(after=30) == {"sent": 2}
    actions = [(e["event_action"], e["dedup_key"]) for e in fake_pagerduty.events]
    assert [a for a, _ in actions] == ["trigger", "resolve"]
    assert actions[0][1] == actions[1][1]
    assert fake_pagerduty.events[0]["payload"]["severity"] == "critical"
    assert len(fake_slack.messages) == 2


def test_fifty_partitions_make_one_slack_message(pipeline: Pipeline, fake_slack: FakeSlack) -> None:
    for partition in range(50):
        pipeline.finding("PartitionReplicaLost", "warning", partition=partition)
    pipeline.tick()
    assert len(fake_slack.messages) == 1
    assert "50" in json.dumps(fake_slack.messages[0])


def test_a_receiver_down_for_minutes_gets_every_notification_once(
    pipeline: Pipeline, fake_pagerduty: FakePagerDuty
) -> None:
    fake_pagerduty.fail_next(12, status=503)
    pipeline.finding("PartitionReplicasLost", "critical", partition=1)
    pipeline.finding("PartitionOffline", "critical", partition=2)
    pipeline.tick()
    for _ in range(40):  # ten minutes, a tick every 15 s
        pipeline.tick(after=15)
    events = fake_pagerduty.events
    assert len(events) == 12 + 2, "12 refused during the outage, then each trigger accepted once"
    with pipeline.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT state, attempts FROM notification_outbox WHERE receiver = 'oncall-pager' ORDER BY id"
            )
        ).all()
        log = Counter(
            conn.execute(
                text("SELECT outcome FROM notification_log WHERE receiver = 'oncall-pager'")
            ).scalars()
        )
    assert [r.state for r in rows] == ["sent", "sent"]
    assert log["sent"] == 2 and log["retry"] == 12
    assert {e["event_action"] for e in events} == {"trigger"}
    assert len({e["dedup_key"] for e in events[-2:]}) == 2, "each incident's trigger delivered once"


def test_a_sender_killed_between_claim_and_send_pages_once_after_restart(
    pipeline: Pipeline, engine: Engine, fake_pagerduty: FakePagerDuty
) -> None:
    pipeline.finding("PartitionOffline", "critical")
    with engine.begin() as conn:
        run_cycle(conn, pipeline.routing, pipeline.clock.now(), URL)
    with engine.begin() as conn:
        claimed = claim(conn, "killed-instance", pipeline.clock.now(), 100, claim_seconds=30)
    assert {c.receiver for c in claimed} == {"oncall-pager", "ops-slack"}
    assert pipeline.sender.drain() == {}, "the dead instance's claim still holds"
    pipeline.clock.advance(31)
    assert pipeline.sender.drain() == {"sent": 2}
    pipeline.clock.advance(60)
    assert pipeline.sender.drain() == {}
    assert [e["event_action"] for e in fake_pagerduty.events] == ["trigger"]
