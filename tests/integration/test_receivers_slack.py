"""The Slack receiver through slack-sdk's WebClient against a local server answering like Slack's
`chat.postMessage`: delivered, rate limited, Slack's error codes, and a token that never shows."""

from __future__ import annotations

import logging
import time

import pytest

from monitor.alert.model import DeliveryResult, FailureReason
from monitor.alert.receivers import Receiver, build_receiver, parse_receiver
from monitor.alert.receivers.slack import slack_outcome
from monitor.alert.render import Templates
from tests.fixtures.receivers import EXTERNAL_URL, SLACK_TOKEN, FakeSlack, sample_notification


def slack(
    monkeypatch: pytest.MonkeyPatch, base_url: str, channel: str = "#kafka-alerts", timeout: float = 2
) -> Receiver:
    monkeypatch.setenv("SLACK_BOT_TOKEN", SLACK_TOKEN)
    config = parse_receiver(
        {
            "name": "team-slack",
            "slack": {
                "channel": channel,
                "token_env": "SLACK_BOT_TOKEN",
                "base_url": base_url,
                "timeout": timeout,
            },
        }
    )
    return build_receiver(config, Templates(EXTERNAL_URL))


def test_posts_text_and_blocks_to_the_channel(monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url)
    result = receiver.send(sample_notification("single_critical"))
    assert result == DeliveryResult.delivered(200)
    (message,) = fake_slack.messages
    assert message["channel"] == "#kafka-alerts"
    assert message["text"].startswith(":red_circle: *[CRITICAL] 1 firing: UnderMinIsr (cluster=prod)*")
    assert "orders-3 has 1 in-sync replica" in message["text"]
    assert message["blocks"][0] == {"type": "section", "text": {"type": "mrkdwn", "text": message["text"]}}
    buttons = message["blocks"][-1]["elements"]
    assert [b["url"] for b in buttons] == [
        f"{EXTERNAL_URL}/ack/3f2a9c",
        "https://runbooks.example.com/kafka/UnderMinIsr",
    ]
    assert message["unfurl_links"] is False


def test_a_big_group_fits_in_slack_limits(monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url)
    assert receiver.send(sample_notification("partitions_50")).ok
    (message,) = fake_slack.messages
    assert "…and 40 more" in message["text"]
    assert all(len(b["text"]["text"]) <= 3000 for b in message["blocks"] if b["type"] == "section")


def test_rate_limited_is_retryable_and_not_retried_by_the_client(
    monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack
) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url)
    fake_slack.rate_limit_next(1, retry_after=1)
    result = receiver.send(sample_notification("single_critical"))
    assert result == DeliveryResult.failed(FailureReason.RATE_LIMITED, "Slack ratelimited (HTTP 429)", 429)
    assert len(fake_slack.requests) == 1
    assert receiver.send(sample_notification("single_critical")).ok


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_retryable(
    monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack, status: int
) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url)
    fake_slack.fail_next(1, status, "<html>upstream down</html>")
    result = receiver.send(sample_notification("single_critical"))
    assert result.retryable and result.status == status
    assert len(fake_slack.requests) == 1


def test_unknown_channel_gives_up(monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url, channel="#nowhere")
    result = receiver.send(sample_notification("single_critical"))
    assert result == DeliveryResult.failed(
        FailureReason.MISCONFIGURED, "Slack channel_not_found (HTTP 200)", 200
    )


def test_a_wrong_token_gives_up(monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url)
    fake_slack.token = "xoxb-another-token"
    result = receiver.send(sample_notification("single_critical"))
    assert result == DeliveryResult.failed(FailureReason.MISCONFIGURED, "Slack invalid_auth (HTTP 200)", 200)


def test_connection_refused_is_retryable(monkeypatch: pytest.MonkeyPatch, closed_url: str) -> None:
    receiver = slack(monkeypatch, closed_url + "/api/")
    result = receiver.send(sample_notification("single_critical"))
    assert result.retryable and not result.ok
    assert result.reason == "connection failed (URLError): [Errno 111] Connection refused"


def test_a_timeout_is_retryable(monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack) -> None:
    receiver = slack(monkeypatch, fake_slack.base_url, timeout=0.5)  # the client counts whole seconds
    fake_slack.delay_next(1)
    started = time.monotonic()
    result = receiver.send(sample_notification("single_critical"))
    assert time.monotonic() - started < 1.8
    assert result.retryable and result.reason.startswith("timed out after 1 s")


@pytest.mark.parametrize(
    ("status", "error", "ok", "retryable"),
    [
        (200, None, True, False),
        (200, "ratelimited", False, True),
        (200, "internal_error", False, True),
        (200, "not_in_channel", False, False),
        (200, "invalid_blocks", False, False),
        (429, "ratelimited", False, True),
        (502, "Received an unexpected response", False, True),
        (404, "unknown_method", False, False),
    ],
)
def test_slack_outcomes(status: int, error: str | None, ok: bool, retryable: bool) -> None:
    result = slack_outcome(status, error)
    assert (result.ok, result.retryable) == (ok, retryable)


def test_the_token_never_shows(
    monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = slack(monkeypatch, fake_slack.base_url)
    assert receiver.send(sample_notification("single_critical")).ok
    fake_slack.fail_next(1, 400, f'{{"ok": false, "error": "invalid_auth {SLACK_TOKEN}"}}')
    failed = receiver.send(sample_notification("single_critical"))
    assert fake_slack.requests[0].headers["Authorization"] == f"Bearer {SLACK_TOKEN}"
    assert SLACK_TOKEN not in failed.reason
    assert SLACK_TOKEN not in repr(receiver) and SLACK_TOKEN not in str(receiver)
    assert SLACK_TOKEN not in caplog.text
    assert "chat.postMessage" in caplog.text  # the client did log its requests
