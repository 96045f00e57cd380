"""The console receiver, the demo's inbox: one JSON line per notification in a file (the webhook
body plus nothing else), or one log line without a file."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from monitor.alert.model import DeliveryResult
from monitor.alert.receivers import build_receiver, parse_receiver
from monitor.alert.receivers.webhook import webhook_body
from monitor.alert.render import Templates
from tests.fixtures.receivers import EXTERNAL_URL, sample_notification


def test_appends_one_json_line_per_notification(tmp_path: Path) -> None:
    inbox = tmp_path / "var" / "notifications.jsonl"
    receiver = build_receiver(
        parse_receiver({"name": "inbox", "console": {"path": str(inbox)}}), Templates(EXTERNAL_URL)
    )
    first, second = sample_notification("single_critical", "inbox"), sample_notification("resolved", "inbox")
    assert receiver.send(first) == DeliveryResult.delivered()
    assert receiver.send(second) == DeliveryResult.delivered()
    lines = inbox.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        webhook_body(first, "inbox", EXTERNAL_URL),
        webhook_body(second, "inbox", EXTERNAL_URL),
    ]


def test_a_write_that_fails_retries(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    receiver = build_receiver(
        parse_receiver({"name": "inbox", "console": {"path": str(blocker / "inbox.jsonl")}}),
        Templates(EXTERNAL_URL),
    )
    result = receiver.send(sample_notification("single_critical"))
    assert result.retryable and "cannot append to" in result.reason


def test_without_a_path_it_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="monitor.alert.receivers.console")
    receiver = build_receiver(parse_receiver({"name": "inbox", "console": {}}), Templates(EXTERNAL_URL))
    assert receiver.send(sample_notification("partitions_50")).ok
    (record,) = caplog.records
    assert record.getMessage() == (
        "notification for inbox: [WARNING] 50 firing: UnderReplicatedPartition (cluster=prod) "
        "(50 alerts, dedup_key kh-underreplicatedpartition-prod)"
    )
