"""Typed delivery failures: how each receiver's answer becomes a `FailureReason`, the retry
decision that follows from the type alone, and the metric label; and the one registry of
receiver kinds."""

from __future__ import annotations

import random
import socket
from datetime import UTC, datetime, timedelta

import httpx
import jinja2
import pytest

from monitor.alert.model import DeliveryResult, FailureReason
from monitor.alert.notify.retry import RetryPolicy, decide, failure_label
from monitor.alert.receivers import KINDS, REGISTRY, build_receiver, parse_receiver
from monitor.alert.receivers.base import http_outcome, status_failure, template_failure, transport_outcome
from monitor.alert.receivers.config import ReceiverConfigBase
from monitor.alert.receivers.email import smtp_outcome
from monitor.alert.receivers.slack import slack_outcome
from monitor.alert.render import Templates

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
Reason = FailureReason

# ---------------------------------------------------------------------------------------------
# The type decides the retry


RETRYABLE = {
    Reason.CLIENT_ERROR: False,
    Reason.RATE_LIMITED: True,
    Reason.SERVER_ERROR: True,
    Reason.TIMEOUT: True,
    Reason.CONNECTION: True,
    Reason.MISCONFIGURED: False,
    Reason.TEMPLATE: False,
    Reason.UNREADABLE: False,
    Reason.WRITE_FAILED: True,
    Reason.RECEIVER_BUG: True,
}


def test_every_reason_states_whether_it_is_retried() -> None:
    assert set(RETRYABLE) == set(FailureReason)
    for reason, retryable in RETRYABLE.items():
        assert reason.retryable is retryable, reason
        assert DeliveryResult.failed(reason, "x").retryable is retryable
    assert not DeliveryResult.delivered().retryable


# ---------------------------------------------------------------------------------------------
# Each answer's type


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, None),
        (204, None),
        (301, Reason.CLIENT_ERROR),  # a redirecting URL is a configuration to fix, never followed
        (400, Reason.CLIENT_ERROR),
        (401, Reason.CLIENT_ERROR),
        (404, Reason.CLIENT_ERROR),
        (429, Reason.RATE_LIMITED),
        (500, Reason.SERVER_ERROR),
        (503, Reason.SERVER_ERROR),
    ],
)
def test_http_status(status: int, expected: FailureReason | None) -> None:
    result = http_outcome(status, b"body")
    assert (result.ok, result.failure, result.status) == (expected is None, expected, status)
    if expected is not None:
        assert status_failure(status) is expected


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (200, None, None),
        (429, "ratelimited", Reason.RATE_LIMITED),
        (200, "ratelimited", Reason.RATE_LIMITED),
        (200, "internal_error", Reason.SERVER_ERROR),
        (503, "channel_not_found", Reason.SERVER_ERROR),  # Slack itself failing comes first
        (200, "channel_not_found", Reason.MISCONFIGURED),
        (200, "invalid_auth", Reason.MISCONFIGURED),
        (200, "not_in_channel", Reason.MISCONFIGURED),
        (200, "msg_too_long", Reason.CLIENT_ERROR),
        (400, None, Reason.CLIENT_ERROR),
    ],
)
def test_slack_answers(status: int, error: str | None, expected: FailureReason | None) -> None:
    result = slack_outcome(status, error)
    assert (result.ok, result.failure) == (expected is None, expected)
    if error and expected is not None:
        assert error in result.reason, "the text keeps Slack's error code"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (421, Reason.SERVER_ERROR),  # service not available: transient
        (451, Reason.SERVER_ERROR),
        (535, Reason.MISCONFIGURED),  # authentication failed: fix the password
        (530, Reason.MISCONFIGURED),
        (550, Reason.CLIENT_ERROR),  # mailbox unavailable: permanent
        (554, Reason.CLIENT_ERROR),
    ],
)
def test_smtp_replies(code: int, expected: FailureReason) -> None:
    result = smtp_outcome(code, b"5.7.8 nope")
    assert (result.failure, result.status) == (expected, code)
    assert result.reason == f"SMTP {code}: 5.7.8 nope"


def test_transport_failures_are_timeouts_or_connections() -> None:
    timeout = transport_outcome(httpx.ReadTimeout("read timed out"), 10)
    assert (timeout.failure, timeout.reason) == (Reason.TIMEOUT, "timed out after 10 s (ReadTimeout)")
    assert transport_outcome(TimeoutError(), 2.5).failure is Reason.TIMEOUT
    refused = transport_outcome(ConnectionRefusedError(111, "Connection refused"), 10)
    assert refused.failure is Reason.CONNECTION
    assert refused.reason.startswith("connection failed (ConnectionRefusedError)")
    dns = transport_outcome(socket.gaierror(-2, "Name or service not known"), 10)
    assert dns.failure is Reason.CONNECTION


def test_a_template_failure_gives_up() -> None:
    result = template_failure("slack.txt", jinja2.UndefinedError("'x' is undefined"))
    assert (result.failure, result.reason) == (Reason.TEMPLATE, "template slack.txt failed: 'x' is undefined")
    assert not result.retryable


# ---------------------------------------------------------------------------------------------
# The decision from the type, and the metric label


def test_decide() -> None:
    policy = RetryPolicy(base_seconds=2, max_seconds=300, give_up_after_seconds=3600)
    rng = random.Random(1)
    young, old = T0 - timedelta(seconds=10), T0 - timedelta(seconds=3600)

    sent = decide(DeliveryResult.delivered(200), 1, young, T0, policy, rng)
    assert (sent.outcome, sent.next_attempt_at) == ("sent", T0)

    busy = DeliveryResult.failed(Reason.SERVER_ERROR, "HTTP 503", 503)
    retry = decide(busy, 3, young, T0, policy, rng)
    assert retry.outcome == "retry" and retry.reason == "HTTP 503"
    assert T0 + timedelta(seconds=4) <= retry.next_attempt_at <= T0 + timedelta(seconds=8), (
        "2 s * 2**2, jittered"
    )

    expired = decide(busy, 9, old, T0, policy, rng)
    assert (expired.outcome, expired.reason) == ("failed", "gave up after 9 attempts: HTTP 503")

    refused = DeliveryResult.failed(Reason.CLIENT_ERROR, "HTTP 400: bad key", 400)
    failed = decide(refused, 1, young, T0, policy, rng)
    assert (failed.outcome, failed.reason) == ("failed", "HTTP 400: bad key"), "no retry for a client error"

    # The same text with a retryable type is retried: the type decides, not the words.
    assert (
        decide(DeliveryResult.failed(Reason.TIMEOUT, "HTTP 400"), 1, young, T0, policy, rng).outcome
        == "retry"
    )
    assert (
        decide(DeliveryResult.failed(Reason.TEMPLATE, "timed out"), 1, young, T0, policy, rng).outcome
        == "failed"
    )


@pytest.mark.parametrize(
    ("result", "label"),
    [
        (DeliveryResult.failed(Reason.CLIENT_ERROR, "HTTP 400", 400), "http_400"),
        (DeliveryResult.failed(Reason.SERVER_ERROR, "SMTP 451", 451), "http_451"),
        (DeliveryResult.failed(Reason.TIMEOUT, "timed out after 10 s"), "timeout"),
        (DeliveryResult.failed(Reason.CONNECTION, "connection failed"), "connection"),
        (DeliveryResult.failed(Reason.MISCONFIGURED, "receiver 'x' is not configured"), "misconfigured"),
        (DeliveryResult.failed(Reason.RECEIVER_BUG, "KeyError: 'x'"), "receiver_bug"),
    ],
)
def test_failure_label(result: DeliveryResult, label: str) -> None:
    assert failure_label(result) == label


# ---------------------------------------------------------------------------------------------
# One registry of receiver kinds


def test_the_registry_is_the_only_list_of_kinds() -> None:
    assert KINDS == tuple(REGISTRY) == ("slack", "email", "pagerduty", "webhook", "console", "alertmanager")
    for kind, entry in REGISTRY.items():
        assert entry.name == entry.config.kind == kind
        assert issubclass(entry.config, ReceiverConfigBase)
    assert [kind for kind, entry in REGISTRY.items() if entry.incidents] == ["pagerduty"]


def test_parsing_and_building_go_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEY", "k" * 32)
    config = parse_receiver({"name": "pager", "pagerduty": {"routing_key_env": "KEY"}})
    assert type(config) is REGISTRY["pagerduty"].config
    receiver = build_receiver(config, Templates("http://kh.test"))
    assert (receiver.name, receiver.kind) == ("pager", "pagerduty")
    receiver.close()

    class Stray(ReceiverConfigBase):
        kind = "pagerduty"

    with pytest.raises(TypeError, match="not a registered receiver configuration: Stray"):
        build_receiver(Stray(name="x"), Templates("http://kh.test"))
