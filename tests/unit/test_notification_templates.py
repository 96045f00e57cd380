"""Notification templates: golden files for every template and wire payload, and the rendering
rules (strict undefined, HTML escaping only in .html, Slack escaping, the shared filters).

Golden files live in tests/golden/notifications/<case>/<file>, one directory per sample
notification (tests/fixtures/receivers.py `sample_notification`). After an intended change to a
template or payload, rewrite them and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_notification_templates.py
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import jinja2
import pytest

from monitor.alert.model import Notification
from monitor.alert.receivers.pagerduty import pagerduty_event
from monitor.alert.receivers.slack import slack_blocks
from monitor.alert.receivers.webhook import webhook_body
from monitor.alert.render import (
    FILTERS,
    TEMPLATE_NAMES,
    Templates,
    default_template_dir,
    one_line,
    render,
    title,
)
from monitor.core.errors import ConfigError
from tests.fixtures.receivers import CASES, EXTERNAL_URL, PAYLOADS, ROUTING_KEY, sample_notification

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "notifications"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def templates() -> Templates:
    return Templates(EXTERNAL_URL)


def check_golden(case: str, name: str, text: str) -> None:
    path = GOLDEN / case / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run with UPDATE_GOLDEN=1 to write it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path} differs; if the change is intended, run with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
@pytest.mark.parametrize("case", CASES)
def test_template_matches_golden_file(templates: Templates, case: str, name: str) -> None:
    check_golden(case, name, templates.render(name, sample_notification(case)))


@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("case", CASES)
def test_payload_matches_golden_file(templates: Templates, case: str, name: str) -> None:
    check_golden(case, name, PAYLOADS[name](templates, sample_notification(case)))


def test_a_group_of_50_lists_the_first_ones_and_counts_the_rest(templates: Templates) -> None:
    notification = sample_notification("partitions_50")
    slack = templates.render("slack.txt", notification)
    assert slack.count("• *UnderReplicatedPartition*") == 10
    assert "…and 40 more" in slack
    text = templates.render("email.txt", notification)
    assert text.count("- UnderReplicatedPartition") == 20
    assert "...and 30 more" in text
    assert "50 firing" in templates.render("email.subject.txt", notification)


@pytest.mark.parametrize("name", ["slack.txt", "email.txt", "email.html"])
def test_messages_carry_what_an_engineer_needs(templates: Templates, name: str) -> None:
    notification = sample_notification("single_critical")
    text = templates.render(name, notification)
    for needed in (
        "critical",
        "prod",
        "orders-3 has 1 in-sync replica",
        "https://runbooks.example.com/kafka/UnderMinIsr",
        f"{EXTERNAL_URL}/ack/3f2a9c",
        "value 1" if name != "email.html" else ">1<",
    ):
        assert needed in text, needed


@pytest.mark.parametrize("name", ["slack.txt", "email.txt", "email.html", "email.subject.txt"])
def test_resolved_notices_say_resolved_and_offer_no_acknowledge(templates: Templates, name: str) -> None:
    notification = replace(sample_notification("resolved"), ack_url=f"{EXTERNAL_URL}/ack/x")
    text = templates.render(name, notification)
    assert "RESOLVED" in text.upper()
    assert "/ack/x" not in text


def test_titles_name_the_kind_count_rules_and_group() -> None:
    assert title(sample_notification("single_critical")) == "[CRITICAL] 1 firing: UnderMinIsr (cluster=prod)"
    assert title(sample_notification("resolved")).startswith("[RESOLVED] 2 resolved: ConsumerLagHigh")
    assert title(sample_notification("escalation")).startswith("[ESCALATED WARNING] 1 firing")
    assert title(sample_notification("acknowledged")).startswith("[ACKNOWLEDGED] 1 firing")


def test_html_is_escaped_and_text_is_not(templates: Templates) -> None:
    notification = sample_notification("escalation")  # its summary holds "<fast>"
    assert "&lt;fast&gt;" in templates.render("email.html", notification)
    assert "<fast>" in templates.render("email.txt", notification)
    assert "<fast>" in templates.render("pagerduty.summary.txt", notification)


def test_slack_text_escapes_mrkdwn_controls(templates: Templates) -> None:
    notification = sample_notification("escalation")
    hostile = replace(notification.alerts[0], summary="group <!channel> & co")
    text = templates.render("slack.txt", replace(notification, alerts=(hostile,)))
    assert "<!channel>" not in text
    assert "&lt;!channel&gt; &amp; co" in text


def test_an_unknown_variable_fails_instead_of_rendering_empty(tmp_path: Path) -> None:
    directory = _copy_templates(tmp_path)
    (directory / "slack.txt").write_text("{{ notification.no_such_field }}")
    templates = Templates(EXTERNAL_URL, directory)
    with pytest.raises(jinja2.UndefinedError):
        templates.render("slack.txt", sample_notification("single_critical"))
    (directory / "slack.txt").write_text("{{ severity }}")
    with pytest.raises(jinja2.UndefinedError):
        Templates(EXTERNAL_URL, directory).render("slack.txt", sample_notification("single_critical"))


def test_a_template_that_does_not_parse_or_is_missing_stops_the_start(tmp_path: Path) -> None:
    directory = _copy_templates(tmp_path)
    (directory / "email.txt").write_text("{% for x in alerts %}")
    (directory / "email.html").unlink()
    with pytest.raises(ConfigError) as raised:
        Templates(EXTERNAL_URL, directory)
    problems = "\n".join(raised.value.problems)
    assert "email.txt line 1" in problems
    assert "email.html: template is missing" in problems


def _copy_templates(tmp_path: Path) -> Path:
    directory = tmp_path / "notifications"
    directory.mkdir()
    for source in default_template_dir().iterdir():
        (directory / source.name).write_text(source.read_text())
    return directory


def test_render_function_uses_the_default_templates() -> None:
    notification = sample_notification("single_critical")
    text = render("email.txt", notification, EXTERNAL_URL + "/")
    assert text == Templates(EXTERNAL_URL).render("email.txt", notification)
    assert f"kafka-health: {EXTERNAL_URL}\n" in text


def test_timestamp_filter_shows_utc() -> None:
    moment = datetime(2026, 11, 21, 15, 3, 9, tzinfo=timezone(timedelta(hours=1)))
    assert FILTERS["timestamp"](moment) == "2026-11-21 14:03:09 UTC"
    assert FILTERS["timestamp"](datetime(2026, 11, 21, 14, 3, 9)) == "2026-11-21 14:03:09 UTC"
    assert FILTERS["timestamp"](None) == "unknown"
    assert FILTERS["timestamp"](datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01 00:00:00 UTC"


def test_one_line_collapses_whitespace() -> None:
    assert one_line("  a\n b\t\tc \n") == "a b c"


@pytest.mark.parametrize("name", ["slack.txt", "email.txt", "email.html", "pagerduty.summary.txt"])
def test_a_group_notice_says_which_partitions_which_status_since_when(
    templates: Templates, name: str
) -> None:
    text = templates.render(name, sample_notification("group_stopped"))
    needed = [
        "invoices/3 STOP since 2026-11-21 13:52:09 UTC",
        "lag 1,200 messages (11 min)",
        "data loss in 40 min",
    ]
    if name != "pagerduty.summary.txt":  # one line: the worst partition only
        needed += [
            "refunds/1 STALL since 2026-11-21 13:55:09 UTC",
            "and 2 more partitions",
            "Owner:",
            "payments",
        ]
    for fact in needed:
        assert fact in text, fact


@pytest.mark.parametrize("name", ["slack.txt", "email.txt", "email.html"])
def test_alerts_resolved_inside_a_firing_group_are_named(templates: Templates, name: str) -> None:
    text = templates.render(name, sample_notification("group_stopped"))
    assert "prod/ledger" in text and "resolved 2026-11-21 14:02:09 UTC" in text
    # the resolved group's partitions are not listed as if it were still in trouble
    assert text.count("Group ledger") == 1


@pytest.mark.parametrize("name", ["slack.txt", "email.txt", "email.html", "pagerduty.summary.txt"])
def test_an_inhibiting_alert_tells_the_impact_it_covers(templates: Templates, name: str) -> None:
    text = templates.render(name, sample_notification("broker_impact"))
    assert (
        "covers 18 alerts: 3 PartitionUnderMinIsr, 2 PartitionReplicasLost, 13 PartitionReplicaLost" in text
    )
    if name != "pagerduty.summary.txt":
        assert "acks=all producers fail" in text
        assert text.index("PartitionUnderMinIsr prod/orders/3") < text.index(
            "PartitionReplicaLost prod/clicks/7"
        )


def _crowded() -> Notification:
    """Twenty consumer group alerts with long names, five partitions each, and an impact: the
    largest notice the cycle builds (it lists at most MAX_PARTITIONS partitions per alert)."""
    from monitor.alert.details import MAX_PARTITIONS
    from monitor.alert.model import PartitionDetail

    base = sample_notification("group_stopped")
    stopped, _ = base.alerts
    broker = sample_notification("broker_impact").alerts[0]
    long = "t" * 200
    alerts = tuple(
        replace(
            stopped,
            fingerprint=f"fp-{n}",
            entity_key=f"prod/{'g' * 200}-{n}",
            summary=stopped.summary + " " + "x" * 300,
            partitions=tuple(
                PartitionDetail(long, p, "STOP", stopped.starts_at, 10**9, 86400.0 * 3, 60.0)
                for p in range(MAX_PARTITIONS)
            ),
            partitions_total=500,
            impact=broker.impact,
        )
        for n in range(20)
    )
    return replace(base, alerts=alerts)


def test_rich_notices_stay_within_each_receivers_limits(templates: Templates) -> None:
    notification = _crowded()
    blocks = slack_blocks(templates.render("slack.txt", notification), notification)
    assert len(blocks) <= 50, "Slack takes at most 50 blocks"
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert all(len(text) <= 3000 for text in sections), "Slack's section limit"
    assert "…and 10 more" in "".join(sections), "the alerts past the limit are counted, not cut off"
    summary = one_line(templates.render("pagerduty.summary.txt", notification))
    event = pagerduty_event(
        notification,
        routing_key=ROUTING_KEY,
        summary=summary,
        source="kafka-health",
        external_url=EXTERNAL_URL,
    )
    assert len(event["payload"]["summary"]) <= 1024
    assert len(json.dumps(event).encode()) < 512 * 1024, "PagerDuty's event size limit"
    assert len(event["payload"]["custom_details"]["partitions"]) == 20
    body = json.dumps(webhook_body(notification, "oncall", EXTERNAL_URL))
    assert body.count('"status": "STOP"') == 20 * 5


def test_payloads_stored_before_partitions_and_impact_still_load() -> None:
    notification = sample_notification("single_critical")
    data = json.loads(notification.to_json())
    for alert in data["alerts"]:
        for key in ("owner", "partitions", "partitions_total", "impact"):
            del alert[key]
    loaded = Notification.from_json(json.dumps(data))
    assert loaded.alerts[0].partitions == () and loaded.alerts[0].impact is None
    rich = sample_notification("group_stopped")
    assert Notification.from_json(rich.to_json()) == rich
    impact = sample_notification("broker_impact")
    assert Notification.from_json(impact.to_json()) == impact
