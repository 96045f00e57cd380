"""The shared HTTP outcome policy, and the webhook receiver against a real local HTTP server:
2xx delivered; 429, 5xx, timeouts and refused connections retry; other 4xx give up with the
status and a short reason; secret headers are sent but never shown."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest
from pydantic import SecretStr

from monitor.alert.model import DeliveryResult, FailureReason
from monitor.alert.receivers import Receiver, build_receiver, http_outcome, parse_receiver
from monitor.alert.receivers.base import short_reason
from monitor.alert.render import Templates
from tests.fixtures.receivers import EXTERNAL_URL, FakeWebhook, sample_notification

HOOK_SECRET = "Bearer hook-SECRET-4711"


@pytest.mark.parametrize(
    ("status", "ok", "retryable"),
    [
        (200, True, False),
        (202, True, False),
        (204, True, False),
        (301, False, False),
        (400, False, False),
        (401, False, False),
        (403, False, False),
        (404, False, False),
        (413, False, False),
        (429, False, True),
        (500, False, True),
        (502, False, True),
        (503, False, True),
        (504, False, True),
    ],
)
def test_http_outcome_policy(status: int, ok: bool, retryable: bool) -> None:
    result = http_outcome(status, b'{"message": "why"}')
    assert (result.ok, result.retryable, result.status) == (ok, retryable, status)
    assert result.reason == ("" if ok else f"HTTP {status}: why")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", ""),
        (b'{"status": "invalid event", "message": "Event object is invalid", "errors": ["bad key"]}',
         "Event object is invalid; bad key"),
        (b'{"ok": false, "error": "channel_not_found"}', "channel_not_found"),
        (b"<html><body><h1>502 Bad Gateway</h1>\n<p>nginx</p></body></html>", "502 Bad Gateway nginx"),
        ("x" * 500, "x" * 199 + "…"),
    ],
)  # fmt: skip
def test_short_reason(body: bytes | str, reason: str) -> None:
    assert short_reason(body) == reason


def test_a_reason_never_carries_a_secret() -> None:
    secret = SecretStr("k-123-secret")
    result = http_outcome(400, b'{"message": "bad routing key k-123-secret"}', secrets=[secret])
    assert result.reason == "HTTP 400: bad routing key **********"


def webhook(monkeypatch: pytest.MonkeyPatch, url: str, timeout: float = 2.0) -> Receiver:
    monkeypatch.setenv("HOOK_AUTHORIZATION", HOOK_SECRET)
    config = parse_receiver(
        {
            "name": "chatops",
            "webhook": {
                "url": url,
                "headers": {"X-Team": "kafka"},
                "headers_env": {"Authorization": "HOOK_AUTHORIZATION"},
                "timeout": timeout,
            },
        }
    )
    return build_receiver(config, Templates(EXTERNAL_URL))


def test_webhook_posts_the_documented_body(
    monkeypatch: pytest.MonkeyPatch, fake_webhook: FakeWebhook
) -> None:
    receiver = webhook(monkeypatch, fake_webhook.url)
    notification = replace(sample_notification("partitions_50", receiver="chatops"), id=4711)
    assert receiver.send(notification) == DeliveryResult.delivered(200)
    (request,) = fake_webhook.requests
    assert request.headers["Authorization"] == HOOK_SECRET
    assert request.headers["X-Team"] == "kafka"
    assert request.headers["Content-Type"] == "application/json"
    body = request.json
    assert body["version"] == "1"
    assert (body["receiver"], body["kind"], body["severity"]) == ("chatops", "firing", "warning")
    assert body["group_key"] == notification.group_key
    assert body["group_labels"] == {"cluster": "prod", "rule": "UnderReplicatedPartition"}
    assert body["common_labels"] == notification.common_labels
    assert body["dedup_key"] == notification.dedup_key
    assert body["notification_id"] == 4711
    assert body["ack_url"] == f"{EXTERNAL_URL}/ack/77b1e0"
    assert body["title"] == "[WARNING] 50 firing: UnderReplicatedPartition (cluster=prod)"
    assert len(body["alerts"]) == 50
    # Each alert as `AlertView.to_dict()` (its annotations a map), with the runbook annotation
    # also at the top (version 1 readers read it there).
    alert = notification.alerts[7]
    assert alert.annotations["runbook"] == "https://runbooks.example.com/kafka/UnderReplicatedPartition"
    assert body["alerts"][7] == {**alert.to_dict(), "runbook": alert.annotations["runbook"]}
    receiver.close()


@pytest.mark.parametrize(
    ("status", "body", "failure", "reason"),
    [
        (429, "slow down", FailureReason.RATE_LIMITED, "HTTP 429: slow down"),
        (500, "", FailureReason.SERVER_ERROR, "HTTP 500"),
        (503, "<h1>Service Unavailable</h1>", FailureReason.SERVER_ERROR, "HTTP 503: Service Unavailable"),
        (
            400,
            '{"error": "missing field alerts"}',
            FailureReason.CLIENT_ERROR,
            "HTTP 400: missing field alerts",
        ),
        (404, "no such hook", FailureReason.CLIENT_ERROR, "HTTP 404: no such hook"),
    ],
)
def test_webhook_error_answers(
    monkeypatch: pytest.MonkeyPatch,
    fake_webhook: FakeWebhook,
    status: int,
    body: str,
    failure: FailureReason,
    reason: str,
) -> None:
    receiver = webhook(monkeypatch, fake_webhook.url)
    fake_webhook.fail_next(1, status, body)
    result = receiver.send(sample_notification("single_critical"))
    assert result == DeliveryResult(ok=False, failure=failure, reason=reason, status=status)
    assert result.retryable == (status == 429 or status >= 500)
    assert len(fake_webhook.requests) == 1, "a receiver makes one attempt; the outbox retries"
    assert receiver.send(sample_notification("single_critical")).ok
    receiver.close()


def test_webhook_timeout_is_retryable(monkeypatch: pytest.MonkeyPatch, fake_webhook: FakeWebhook) -> None:
    receiver = webhook(monkeypatch, fake_webhook.url, timeout=0.3)
    fake_webhook.delay_next(1)
    started = time.monotonic()
    result = receiver.send(sample_notification("single_critical"))
    assert time.monotonic() - started < 1.5
    assert result.retryable and not result.ok
    assert result.reason.startswith("timed out after 0.3 s")
    receiver.close()


def test_connection_refused_is_retryable(monkeypatch: pytest.MonkeyPatch, closed_url: str) -> None:
    receiver = webhook(monkeypatch, closed_url)
    result = receiver.send(sample_notification("single_critical"))
    assert result.retryable and not result.ok
    assert result.reason.startswith("connection failed (ConnectError)")
    receiver.close()


def test_a_stopped_server_is_retryable(monkeypatch: pytest.MonkeyPatch, fake_webhook: FakeWebhook) -> None:
    receiver = webhook(monkeypatch, fake_webhook.url)
    fake_webhook.stop()
    result = receiver.send(sample_notification("single_critical"))
    assert result.retryable and "connection failed" in result.reason
    receiver.close()


def test_secret_headers_stay_out_of_repr_and_logs(
    monkeypatch: pytest.MonkeyPatch, fake_webhook: FakeWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = webhook(monkeypatch, fake_webhook.url)
    receiver.send(sample_notification("single_critical"))
    fake_webhook.fail_next(1, 401, f"bad credentials {HOOK_SECRET}")
    result = receiver.send(sample_notification("single_critical"))
    assert result.reason == "HTTP 401: bad credentials **********"
    assert HOOK_SECRET not in repr(receiver)
    assert repr(receiver) == "WebhookReceiver(name='chatops', host='127.0.0.1')"
    assert HOOK_SECRET not in caplog.text
    receiver.close()
