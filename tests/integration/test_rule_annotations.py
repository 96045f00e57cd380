"""An annotation added to a rule file only reaches every place a finding's text is shown: the real
collection and Spark evaluation of a rule file with a `dashboard` annotation (a template of the
topic), the alert cycle, the outbox sent to local Slack and SMTP servers, the alerts page and the
alerts API. No Python, migration or template names `dashboard`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from monitor.core.clock import SystemClock
from monitor.expose.web.app import create_app
from tests.fixtures.delivery import Pipeline
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.people import IDENTITY, PROXY
from tests.fixtures.receivers import FakePagerDuty, FakeSlack, SmtpServer
from tests.fixtures.sql import rows

pytestmark = pytest.mark.spark

RULES = """\
rules:
  - name: TopicWatched
    description: every topic of the test cluster, to carry the annotations
    entity: topic
    condition: partitions > 0
    value: partitions
    severities:
      - severity: warning
    summary: "{{ topic }} has {{ value | number }} partitions"
    annotations:
      runbook: https://wiki.example.com/kafka/watched
      dashboard: "https://grafana.example/d/topics?var-topic={{ topic }}&from=now-1h"
      first_check: "look at <{{ topic }}> & its producers"
"""


@pytest.fixture
def watched(
    kafka: KafkaTestHelper, scenario: Any, pipeline: Pipeline, tmp_path: Path
) -> Iterator[tuple[str, str]]:
    """A topic of its own cluster name, collected and evaluated with RULES only, over the emptied
    alert state of `pipeline` (whose routing sends a warning to Slack and email): (cluster, topic)."""
    topic = kafka.create_topic(f"annotated-{uuid.uuid4().hex[:8]}")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "watched.yaml").write_text(RULES)
    cluster = f"annot-{uuid.uuid4().hex[:6]}"
    s = scenario(cluster, [topic], rules)
    s.collect()
    s.evaluate()
    yield cluster, topic


def test_a_rule_file_annotation_reaches_notifications_page_and_api(
    watched: tuple[str, str],
    pipeline: Pipeline,
    engine: Engine,
    fake_slack: FakeSlack,
    smtp_server: SmtpServer,
    fake_pagerduty: FakePagerDuty,
) -> None:
    cluster, topic = watched
    dashboard = f"https://grafana.example/d/topics?var-topic={topic}&from=now-1h"
    expected = {
        "runbook": "https://wiki.example.com/kafka/watched",
        "dashboard": dashboard,
        "first_check": f"look at <{topic}> & its producers",
    }
    [finding] = rows(engine, "SELECT annotations FROM findings WHERE cluster = :c", c=cluster)
    assert finding["annotations"] == expected
    assert pipeline.tick() == {"sent": 2}
    assert fake_pagerduty.events == []

    # Slack: a button and a link for each URL, the other annotation as text, escaped
    [message] = fake_slack.messages
    slack = json.dumps(message)
    assert json.dumps(f"<{dashboard.replace('&', '&amp;')}|Dashboard: TopicWatched>")[1:-1] in slack
    assert {"type": "plain_text", "text": "Dashboard: TopicWatched"} in [
        button["text"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for button in block["elements"]
    ]
    assert (
        json.dumps(f"First check (TopicWatched): look at &lt;{topic}&gt; &amp; its producers")[1:-1] in slack
    )
    # email: the text part as it is, the HTML part as a link and escaped text
    [mail] = smtp_server.messages
    plain = str(mail.message.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    html = str(mail.message.get_body(("html",)).get_content())  # type: ignore[union-attr]
    assert f"Dashboard (TopicWatched): {dashboard}" in plain
    assert f"First check (TopicWatched): look at <{topic}> & its producers" in plain
    assert f'<a href="{dashboard.replace("&", "&amp;")}">Dashboard: TopicWatched</a>' in html
    assert f"look at &lt;{topic}&gt; &amp; its producers" in html

    # the alerts API and page
    app = create_app(engine, stale_after=timedelta(minutes=5), clock=SystemClock(), silence_max_seconds=86400,
                     identity=IDENTITY)  # fmt: skip
    client = TestClient(app, client=PROXY)
    [alert] = [a for a in client.get("/api/v1/alerts").json() if a["cluster"] == cluster]
    assert alert["annotations"] == expected
    page = client.get("/alerts")
    assert page.status_code == 200
    assert f'<a href="{dashboard.replace("&", "&amp;")}" rel="noopener noreferrer">dashboard</a>' in page.text
    assert f"first_check: look at &lt;{topic}&gt; &amp; its producers" in page.text
