"""The Alertmanager receiver's settings, the alerts it posts and the routing check that keeps
its alerts open between repeats (tests/integration/test_receivers_alertmanager.py posts them to
the real Alertmanager)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.alert.config import check_routing
from monitor.alert.receivers.alertmanager import AlertmanagerReceiver, AlertmanagerSettings
from monitor.alert.receivers.registry import REGISTRY, parse_receiver
from monitor.alert.render import Templates
from tests.fixtures.receivers import NOW, sample_notification


def _receiver(**settings: object) -> AlertmanagerReceiver:
    return AlertmanagerReceiver(
        "am", AlertmanagerSettings.model_validate({"url": "http://am:9093", **settings}),
        Templates("https://kafka-health.example.com/"),
    )  # fmt: skip


def test_the_kind_is_registered_and_parsed() -> None:
    assert "alertmanager" in REGISTRY
    config = parse_receiver({"name": "am", "alertmanager": {"url": "http://am:9093", "ends_after": "2h"}})
    assert config.kind == "alertmanager"
    assert config.alertmanager.ends_after == 7200  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"url": "am:9093"}, "url"),
        ({"url": "http://am:9093", "ends_after": "30s"}, "at least 1m"),
        ({"url": "http://am:9093", "ends_after": "soon"}, "bad duration"),
        ({"url": "http://am:9093", "extra_labels": {"bad-name": "x"}}, "not one Alertmanager takes"),
        ({"url": "http://am:9093", "silences": True}, "Extra inputs"),
    ],
)
def test_bad_settings_say_what_is_wrong(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AlertmanagerSettings.model_validate(settings)


def test_a_firing_alert_is_posted_with_labels_annotations_and_an_end_after_the_next_repeat() -> None:
    notification = sample_notification("single_critical")
    (alert,) = notification.alerts
    body = _receiver(extra_labels={"source": "kafka-health"}).postable(alert, NOW)
    assert body["labels"] == {
        "alertname": "UnderMinIsr", "severity": "critical", "cluster": "prod", "rule": "UnderMinIsr",
        "team": "payments", "source": "kafka-health",
    }  # fmt: skip
    assert body["annotations"]["summary"] == alert.summary
    assert body["annotations"]["runbook_url"] == "https://runbooks.example.com/kafka/UnderMinIsr"
    assert body["annotations"]["owner"] == "payments"
    assert body["startsAt"] == alert.starts_at.isoformat()
    assert body["endsAt"] == (NOW + timedelta(hours=4, minutes=30)).isoformat()
    assert body["generatorURL"] == f"https://kafka-health.example.com/alerts#alert-{alert.fingerprint}"


def test_a_resolved_alert_ends_when_it_resolved() -> None:
    (alert,) = sample_notification("single_critical").alerts
    ended = NOW - timedelta(minutes=1)
    body = _receiver().postable(replace(alert, state="resolved", ends_at=ended), NOW)
    assert body["endsAt"] == ended.isoformat()


ROUTING = """\
receivers:
  - name: console
    console: {}
  - name: am
    alertmanager: {url: "http://am:9093", ends_after: 2h}
route:
  receiver: console
  routes:
    - matchers: [severity="critical"]
      receiver: am
      repeat_interval: REPEAT
"""


def test_a_route_to_alertmanager_must_repeat_before_its_alerts_end(tmp_path: Path) -> None:
    path = tmp_path / "routing.yaml"
    path.write_text(ROUTING.replace("REPEAT", "3h"))
    _, errors = check_routing(path, None)
    (error,) = errors
    assert (
        "line 11: route.routes.0.repeat_interval: repeat_interval 3h is not shorter than the ends_after (2h)"
        in str(error)
    )
    path.write_text(ROUTING.replace("REPEAT", "1h"))
    routing, errors = check_routing(path, None)
    assert errors == [] and routing is not None


def test_every_annotation_of_the_rule_is_an_annotation_by_its_name() -> None:
    notification = sample_notification("group_stopped")
    firing = next(a for a in notification.alerts if a.state == "firing")
    annotations = _receiver().postable(firing, NOW)["annotations"]
    assert annotations["dashboard"] == "https://grafana.example/d/lag?var-group=billing&from=now-1h"
    assert annotations["first_check"] == "restart <the consumer> & watch *lag*"
    assert annotations["runbook"] == annotations["runbook_url"] == firing.annotations["runbook"]
    assert annotations["entity"] == "group"  # the engine's own names are not taken by a rule's
