"""A name with a control, C1, bidirectional or zero-width character reaches no notification raw:
every template (Slack, email subject, text and HTML, the PagerDuty summary) prints it through
`printable` (their `finalize`), and the payloads' text for people (the webhook's and console's
title, PagerDuty's component and detail lines, Alertmanager's annotations) is shown the same way.
The machine-readable labels keep the real name: a receiver can still match on it."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from monitor.alert.model import Notification
from monitor.alert.receivers.alertmanager import AlertmanagerReceiver, AlertmanagerReceiverConfig
from monitor.alert.receivers.slack import slack_blocks
from monitor.alert.receivers.webhook import webhook_body
from monitor.alert.render import TEMPLATE_NAMES, Templates, title
from monitor.core.formatting import printable
from tests.fixtures.receivers import EXTERNAL_URL, PAYLOADS, sample_notification

pytestmark = pytest.mark.unit

HOSTILE = [
    "pay\u202estnemyap",  # right-to-left override
    "payments\u200b",  # zero-width space: would read as "payments"
    "pay\u2066ments\u2069",  # an isolate
    "pay\u200fments",  # a right-to-left mark
    "grp\x1b[31mred\x1b[0m",  # an ANSI escape
    "grp\x9b31mc1",  # a C1 control (CSI)
    "grp\x1b]8;;http://evil.example\x07link",  # an OSC-8 hyperlink and a bell
    "grp\nSubject: forged",  # a newline: a forged line, or an email header
    "grp\r\nBcc: x@evil.example",
]
UNSEEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)
"""Never in a message (its own line breaks aside)."""
KINDS = ["group_stopped", "resolved", "escalation", "acknowledged", "broker_impact"]


def _named(case: str, name: str) -> Notification:
    """The sample notification of `case` about consumer group and cluster `name`."""
    notification = sample_notification(case)
    alerts = tuple(
        replace(
            alert,
            cluster=name,
            entity_key=f"{name}/{alert.entity_key}",
            labels={**alert.labels, "group_id": name, "cluster": name},
            summary=f"{name} is behind",
            description=f"Group {name} stopped.",
            owner=name,
            partitions=tuple(replace(p, topic=name) for p in alert.partitions),
        )
        for alert in notification.alerts
    )
    labels = {**notification.group_labels, "group_id": name, "cluster": name}
    return replace(notification, alerts=alerts, group_labels=labels)


def _clean(text: str, name: str) -> None:
    assert name not in text, "the raw name"
    assert UNSEEN.search(text.replace("\n", "").replace("\t", "")) is None, repr(text[:300])


@pytest.fixture(scope="module")
def templates() -> Templates:
    return Templates(EXTERNAL_URL)


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
@pytest.mark.parametrize("case", KINDS)
@pytest.mark.parametrize("name", HOSTILE, ids=[printable(n) for n in HOSTILE])
def test_every_template_shows_a_hostile_name_visibly(
    templates: Templates, name: str, case: str, template: str
) -> None:
    text = templates.render(template, _named(case, name))
    _clean(text, name)
    visible = printable(name)
    if template == "email.html":
        visible = visible.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert visible in text


@pytest.mark.parametrize("case", KINDS)
@pytest.mark.parametrize("name", HOSTILE, ids=[printable(n) for n in HOSTILE])
def test_payload_text_for_people_shows_a_hostile_name_visibly(
    templates: Templates, name: str, case: str
) -> None:
    notification = _named(case, name)
    assert printable(name) in title(notification)
    _clean(title(notification), name)

    blocks = slack_blocks(templates.render("slack.txt", notification), notification)
    _clean(str([b.get("text", {}).get("text", "") for b in blocks]), name)

    webhook = webhook_body(notification, "hooks", EXTERNAL_URL)
    _clean(webhook["title"], name)
    assert webhook["group_labels"]["group_id"] == name, "data keeps the real name"

    event = json.loads(PAYLOADS["pagerduty.event.json"](templates, notification))
    if "payload" in event:  # a trigger; acknowledge and resolve carry no text
        payload = event["payload"]
        _clean(payload["summary"], name)
        _clean(payload.get("component", ""), name)
        _clean(" ".join(payload["custom_details"]["alerts"]), name)

    config = AlertmanagerReceiverConfig.model_validate(
        {"name": "am", "alertmanager": {"url": "http://am.test"}}
    )
    receiver = AlertmanagerReceiver.from_config(config, templates)
    posted = receiver.postable(notification.alerts[0], notification.created_at)
    try:
        _clean(posted["annotations"]["summary"] + posted["annotations"]["description"], name)
        assert posted["labels"]["group_id"] == name, "labels keep the real name"
    finally:
        receiver.close()
