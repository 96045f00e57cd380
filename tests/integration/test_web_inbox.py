"""The inbox page and endpoint: what the console receivers of the routing configuration wrote to
their files, newest first, with receiver, time, kind, severity and title; linked from the
navigation only when such a receiver exists; never the notification's acknowledgement link."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from monitor.alert.config import load_routing, routing_paths
from monitor.alert.receivers import build_receiver, parse_receiver
from monitor.alert.render import Templates
from monitor.core.clock import FakeClock
from monitor.core.settings import AlertConfig
from monitor.expose.web.app import create_app
from monitor.expose.web.inbox import inbox_paths, read_inbox
from tests.fixtures.receivers import EXTERNAL_URL, NOW, sample_notification

ROUTING = """
receivers:
  - name: pager-inbox
    console: {path: "@PAGER@"}
  - name: slack-inbox
    console: {path: "@SLACKFILE@"}
  - name: logged-only
    console: {}
  - name: team-slack
    slack: {channel: "#payments", token_env: SLACK_TOKEN}
route:
  receiver: slack-inbox
  routes:
    - matchers: [severity=critical]
      receiver: pager-inbox
"""


@pytest.fixture(scope="module")
def inboxes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("inbox")
    pager, slack = directory / "notifications" / "pager.jsonl", directory / "notifications" / "slack.jsonl"
    routing = directory / "routing.yaml"
    routing.write_text(ROUTING.replace("@PAGER@", str(pager)).replace("@SLACKFILE@", str(slack)))
    found = inbox_paths(load_routing(*routing_paths(AlertConfig(routing_file=routing, owners_file=None))))
    # Written by the real console receivers, as the daemon writes them.
    templates = Templates(EXTERNAL_URL)
    for name, path in found.items():
        receiver = build_receiver(parse_receiver({"name": name, "console": {"path": str(path)}}), templates)
        cases = ["single_critical", "resolved"] if name == "pager-inbox" else ["partitions_50"]
        for minutes, case in enumerate(cases):
            notification = sample_notification(case, name)
            assert receiver.send(replace(notification, created_at=NOW + timedelta(minutes=minutes))).ok
    with slack.open("a") as damaged:
        damaged.write("not json\n")
    return found


@pytest.fixture(scope="module")
def client(engine: Engine, inboxes: dict[str, Path]) -> Iterator[TestClient]:
    app = create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(NOW + timedelta(minutes=5)),
                     inboxes=inboxes)  # fmt: skip
    with TestClient(app) as test_client:
        yield test_client


def test_only_console_receivers_with_a_file_are_inboxes(inboxes: dict[str, Path]) -> None:
    assert sorted(inboxes) == ["pager-inbox", "slack-inbox"]


def test_the_page_lists_notifications_newest_first(client: TestClient) -> None:
    page = client.get("/inbox")
    assert page.status_code == 200
    html = unescape(page.text)
    rows = [line for line in html.splitlines() if "data-receiver=" in line]
    assert [
        (r.split('data-receiver="')[1].split('"')[0], r.split('data-kind="')[1].split('"')[0]) for r in rows
    ] == [
        ("pager-inbox", "resolved"),
        ("pager-inbox", "firing"),
        ("slack-inbox", "firing"),
    ]
    assert "[CRITICAL] 1 firing: UnderMinIsr" in html
    assert "[WARNING] 50 firing: UnderReplicatedPartition" in html
    assert 'data-severity="critical"' in html and 'data-severity="warning"' in html
    assert "<code>UnderMinIsr</code>" in html
    assert "1 line(s) of the files were not notifications" in html
    assert "2026-11-21 14:04:09" in html  # the resolved notice's time, UTC


def test_the_acknowledgement_link_and_its_token_never_show(client: TestClient) -> None:
    html = client.get("/inbox").text + client.get("/api/v1/inbox").text
    assert "/ack/" not in html and "3f2a9c" not in html and "77b1e0" not in html
    assert "SLACK_TOKEN" not in html


def test_the_api_answers_the_same_newest_first(client: TestClient) -> None:
    body = client.get("/api/v1/inbox", params={"limit": 2}).json()
    assert [(i["receiver"], i["kind"], i["severity"]) for i in body["items"]] == [
        ("pager-inbox", "resolved", "critical"),
        ("pager-inbox", "firing", "critical"),
    ]
    assert body["items"][1]["rules"] == ["UnderMinIsr"] and body["items"][1]["alerts"] == 1
    assert set(body["receivers"]) == {"pager-inbox", "slack-inbox"}
    assert body["unreadable_lines"] == 1
    assert client.get("/api/v1/inbox", params={"limit": 0}).status_code == 422


def test_the_navigation_links_the_inbox_only_when_there_is_one(client: TestClient, engine: Engine) -> None:
    assert '<a href="/inbox">Inbox</a>' in client.get("/alerts").text
    plain = create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(NOW))
    with TestClient(plain) as without:
        assert '<a href="/inbox">Inbox</a>' not in without.get("/alerts").text
        page = without.get("/inbox")
        assert page.status_code == 200 and 'id="no-inbox"' in page.text


def test_the_tail_of_a_long_file_is_read_without_its_cut_first_line(tmp_path: Path) -> None:
    path = tmp_path / "inbox.jsonl"
    lines = [
        json.dumps({"receiver": "r", "kind": "firing", "severity": "info", "title": f"n{i}",
                    "created_at": (NOW + timedelta(seconds=i)).isoformat(), "alerts": []})
        for i in range(100)
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    tail = read_inbox({"r": path}, limit=1000, tail_bytes=len(lines[-1]) * 10 + 5)
    assert tail.unreadable_lines == 0
    assert [i.title for i in tail.items][:2] == ["n99", "n98"] and 5 <= len(tail.items) <= 10
    assert read_inbox({"r": tmp_path / "missing.jsonl"}).items == []
