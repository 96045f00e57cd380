"""Findings to the wire: the alert cycle, the outbox and the real receivers against local Slack,
SMTP and PagerDuty servers on 127.0.0.1. The tiers as the receivers see them, a receiver that is
down for minutes and comes back, and a sender killed between claim and send."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from monitor.alert.config import Routing, load_routing
from monitor.alert.cycle import run_cycle
from monitor.alert.notify.outbox import claim
from monitor.alert.notify.retry import RetryPolicy
from monitor.alert.notify.sender import Sender
from monitor.alert.render import Templates
from monitor.alert.stage import build_receivers
from monitor.core.clock import FakeClock
from tests.fixtures.receivers import (
    ROUTING_KEY,
    SLACK_TOKEN,
    SMTP_PASSWORD,
    SMTP_USER,
    FakePagerDuty,
    FakeSlack,
    SmtpServer,
)

T0 = datetime(2026, 4, 1, 3, 0, tzinfo=UTC)
URL = "http://monitor.test"


def routing_file(tmp_path: Path, slack: FakeSlack, smtp: SmtpServer, pagerduty: FakePagerDuty) -> Path:
    path = tmp_path / "routing.yaml"
    path.write_text(
        f"""
receivers:
  - name: console
    console: {{}}
  - name: ops-slack
    slack: {{channel: "#kafka-alerts", token_env: TEST_SLACK_TOKEN, base_url: "{slack.base_url}", timeout: 2}}
  - name: ops-email
    email:
      to: [kafka-ops@example.com]
      from: kafka-health@example.com
      smarthost: {smtp.smarthost}
      username: {SMTP_USER}
      password_env: TEST_SMTP_PASSWORD
      tls_ca_file: {smtp.ca_file}
      timeout: 2
  - name: oncall-pager
    pagerduty: {{routing_key_env: TEST_PD_KEY, url: "{pagerduty.url}", timeout: 2}}
route:
  receiver: console
  group_by: [cluster, rule]
  group_wait: 0s
  group_interval: 1m
  repeat_interval: 4h
  routes:
    - matchers: [severity=critical]
      receiver: oncall-pager
      continue: true
    - matchers: [severity=critical]
      receiver: ops-slack
    - matchers: [severity=warning]
      receiver: ops-slack
      continue: true
    - matchers: [severity=warning]
      receiver: ops-email
"""
    )
    return path


class Pipeline:
    def __init__(self, engine: Engine, routing: Routing, instance: str = "a") -> None:
        self.engine = engine
        self.routing = routing
        self.clock = FakeClock(T0)
        receivers = build_receivers(routing, Templates(URL))
        self.sender = Sender(
            lambda: engine,
            lambda: receivers,
            self.clock,
            instance,
            claim_seconds=30,
            policy=RetryPolicy(base_seconds=5, max_seconds=60, give_up_after_seconds=3600),
            seed=3,
        )

    def finding(self, rule: str, severity: str, partition: int = 0, state: str = "firing") -> None:
        key = f"prod/orders/{partition}"
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                    " description, annotations, for_seconds, state, first_seen, last_seen, evaluated_at)"
                    " VALUES (:rule, 'partition', :key, 'prod', CAST(:labels AS jsonb), :severity, 1, :summary,"
                    " 'details', '{\"runbook\": \"https://runbooks.example.com/replicas\"}', 0, :state, :now, :now, :now)"
                ),
                {
                    "rule": rule,
                    "key": key,
                    "labels": json.dumps({"cluster": "prod", "topic": "orders", "partition": str(partition)}),
                    "severity": severity,
                    "summary": f"orders[{partition}]: {rule}",
                    "state": state,
                    "now": self.clock.now(),
                },
            )

    def resolve(self, rule: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE findings SET state = 'resolved', resolved_at = :now WHERE rule = :r AND state <> 'resolved'"
                ),
                {"r": rule, "now": self.clock.now()},
            )

    def tick(self, after: float = 0) -> dict[str, int]:
        self.clock.advance(after)
        with self.engine.begin() as conn:
            run_cycle(conn, self.routing, self.clock.now(), URL)
        return self.sender.drain()


@pytest.fixture
def pipeline(
    engine: Engine,
    tmp_path: Path,
    fake_slack: FakeSlack,
    smtp_server: SmtpServer,
    fake_pagerduty: FakePagerDuty,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Pipeline]:
    monkeypatch.setenv("TEST_SLACK_TOKEN", SLACK_TOKEN)
    monkeypatch.setenv("TEST_SMTP_PASSWORD", SMTP_PASSWORD)
    monkeypatch.setenv("TEST_PD_KEY", ROUTING_KEY)
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE findings, alerts, alert_groups, acks, silences, notification_outbox, notification_log"
            )
        )
    made = Pipeline(engine, load_routing(routing_file(tmp_path, fake_slack, smtp_server, fake_pagerduty)))
    try:
        yield made
    finally:
        made.sender.close()


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
