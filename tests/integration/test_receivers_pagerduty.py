"""The PagerDuty receiver against a local server that checks events like the Events API v2:
kinds map to trigger/acknowledge/resolve on one dedup_key, severities map, 202 is delivered,
an invalid event gives up with PagerDuty's reason, 429/5xx retry, the routing key never shows."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from monitor.alert.model import DeliveryResult, FailureReason, Notification, NotificationKind
from monitor.alert.receivers import Receiver, build_receiver, parse_receiver
from monitor.alert.render import Templates
from tests.fixtures.receivers import EXTERNAL_URL, ROUTING_KEY, FakePagerDuty, sample_notification


def pagerduty(monkeypatch: pytest.MonkeyPatch, url: str, key: str = ROUTING_KEY) -> Receiver:
    monkeypatch.setenv("PD_ROUTING_KEY", key)
    config = parse_receiver(
        {"name": "pager", "pagerduty": {"routing_key_env": "PD_ROUTING_KEY", "url": url, "timeout": 2}}
    )
    return build_receiver(config, Templates(EXTERNAL_URL))


@pytest.mark.parametrize(
    ("kind", "severity", "action", "pd_severity"),
    [
        ("firing", "critical", "trigger", "critical"),
        ("firing", "warning", "trigger", "warning"),
        ("firing", "info", "trigger", "info"),
        ("firing", "page-me", "trigger", "error"),
        ("repeat", "warning", "trigger", "warning"),
        ("escalation", "warning", "trigger", "error"),
        ("escalation", "critical", "trigger", "critical"),
        ("acknowledge", "critical", "acknowledge", None),
        ("resolved", "critical", "resolve", None),
    ],
)
def test_kinds_and_severities_map_to_events(
    monkeypatch: pytest.MonkeyPatch,
    fake_pagerduty: FakePagerDuty,
    kind: NotificationKind,
    severity: str,
    action: str,
    pd_severity: str | None,
) -> None:
    receiver = pagerduty(monkeypatch, fake_pagerduty.url)
    notification = replace(sample_notification("single_critical"), kind=kind, severity=severity)
    assert receiver.send(notification) == DeliveryResult.delivered(202)
    (event,) = fake_pagerduty.events
    assert event["routing_key"] == ROUTING_KEY
    assert event["event_action"] == action
    assert event["dedup_key"] == notification.dedup_key
    if pd_severity is None:
        assert set(event) == {"routing_key", "event_action", "dedup_key"}
    else:
        assert event["payload"]["severity"] == pd_severity
        assert event["payload"]["source"] == "kafka-health"
        assert event["payload"]["summary"].startswith(f"[{'ESCALATED ' if kind == 'escalation' else ''}")
        assert "orders-3 has 1 in-sync replica" in event["payload"]["summary"]


def test_trigger_carries_links_and_details(
    monkeypatch: pytest.MonkeyPatch, fake_pagerduty: FakePagerDuty
) -> None:
    receiver = pagerduty(monkeypatch, fake_pagerduty.url)
    assert receiver.send(sample_notification("partitions_50")).ok
    (event,) = fake_pagerduty.events
    assert event["links"] == [
        {"href": f"{EXTERNAL_URL}/ack/77b1e0", "text": "Acknowledge in kafka-health"},
        {
            "href": "https://runbooks.example.com/kafka/UnderReplicatedPartition",
            "text": "Runbook: UnderReplicatedPartition",
        },
    ]
    details = event["payload"]["custom_details"]
    assert (details["firing"], len(details["alerts"]), details["more_alerts"]) == (50, 20, 30)
    assert event["payload"]["component"] == "prod"
    assert event["client_url"] == EXTERNAL_URL


def test_a_long_summary_is_cut_to_1024(
    monkeypatch: pytest.MonkeyPatch, fake_pagerduty: FakePagerDuty
) -> None:
    receiver = pagerduty(monkeypatch, fake_pagerduty.url)
    notification = sample_notification("single_critical")
    long = replace(notification.alerts[0], summary="x" * 3000)
    assert receiver.send(replace(notification, alerts=(long,))).ok
    summary = fake_pagerduty.events[0]["payload"]["summary"]
    assert len(summary) == 1024 and summary.endswith("…")


def test_an_invalid_event_gives_up_with_pagerduty_reason(
    monkeypatch: pytest.MonkeyPatch, fake_pagerduty: FakePagerDuty
) -> None:
    receiver = pagerduty(monkeypatch, fake_pagerduty.url, key="too-short")
    result = receiver.send(sample_notification("single_critical"))
    assert result == DeliveryResult.failed(
        FailureReason.CLIENT_ERROR,
        "HTTP 400: Event object is invalid; Length of 'routing_key' is incorrect (should be 32 characters)",
        400,
    )


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_retry(
    monkeypatch: pytest.MonkeyPatch, fake_pagerduty: FakePagerDuty, status: int
) -> None:
    receiver = pagerduty(monkeypatch, fake_pagerduty.url)
    fake_pagerduty.fail_next(
        1,
        status,
        '{"status": "throttle event", "message": "Requests for this service are arriving too quickly"}',
    )
    result = receiver.send(sample_notification("single_critical"))
    assert result.retryable and result.status == status
    assert "arriving too quickly" in result.reason
    assert receiver.send(sample_notification("single_critical")) == DeliveryResult.delivered(202)


def test_a_retried_trigger_uses_the_same_dedup_key(
    monkeypatch: pytest.MonkeyPatch, fake_pagerduty: FakePagerDuty
) -> None:
    receiver = pagerduty(monkeypatch, fake_pagerduty.url)
    notification: Notification = sample_notification("single_critical")
    fake_pagerduty.fail_next(1, 503)
    assert receiver.send(notification).retryable
    assert receiver.send(notification).ok
    assert [e["dedup_key"] for e in fake_pagerduty.events] == [notification.dedup_key] * 2


def test_connection_refused_is_retryable(monkeypatch: pytest.MonkeyPatch, closed_url: str) -> None:
    result = pagerduty(monkeypatch, closed_url).send(sample_notification("single_critical"))
    assert result.retryable and result.reason.startswith("connection failed")


def test_the_routing_key_never_shows(
    monkeypatch: pytest.MonkeyPatch, fake_pagerduty: FakePagerDuty, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = pagerduty(monkeypatch, fake_pagerduty.url)
    assert receiver.send(sample_notification("single_critical")).ok
    fake_pagerduty.fail_next(1, 400, f'{{"message": "unknown routing key {ROUTING_KEY}"}}')
    failed = receiver.send(sample_notification("single_critical"))
    assert failed.reason == "HTTP 400: unknown routing key **********"
    assert ROUTING_KEY not in repr(receiver)
    assert ROUTING_KEY not in caplog.text
