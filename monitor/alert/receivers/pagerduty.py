"""PagerDuty: events to a service's Events API v2 integration, through httpx.

The event (https://developer.pagerduty.com/docs/events-api-v2/trigger-events/)::

    {"routing_key": "...", "event_action": "trigger" | "acknowledge" | "resolve",
     "dedup_key": notification.dedup_key,
     "payload": {"summary": "<= 1024 characters", "source": "kafka-health",
                 "severity": "critical" | "error" | "warning" | "info",
                 "timestamp": ..., "component": cluster, "class": rule,
                 "custom_details": {kind, severity, group, firing, resolved, alerts (one line
                                    each), partitions (a group alert's worst ones, by entity),
                                    annotations (each alert's, by entity), impact (what an
                                    inhibiting alert covers), owner, ...}},
     "links": [{"href": ack_url, "text": ...}, {"href": annotation URL, "text": ...}],
     "client": "kafka-health", "client_url": external_url}

Kinds map to actions: firing, repeat and escalation trigger (a repeated trigger with the same
dedup_key is idempotent: PagerDuty adds it to the open incident); acknowledge acknowledges and
resolved resolves, carrying only the routing and dedup keys, as the API asks.

Severity is the notification's, except that an escalation is at least `error`: it exists to page
someone, and PagerDuty's dynamic urgency treats `warning` as low urgency (no page). PagerDuty
answers 202 when it accepted the event; the shared HTTP policy judges everything else.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

import httpx
import jinja2
from pydantic import Field, SecretStr, model_validator

from monitor.alert.model import AlertView, DeliveryResult, Notification
from monitor.alert.receivers.base import post_json, template_failure
from monitor.alert.receivers.config import (
    EnvName,
    HttpUrlText,
    ReceiverConfigBase,
    Seconds,
    StrictSettings,
    exactly_one_source,
    settings_secret,
)
from monitor.alert.render import Templates, one_line
from monitor.core.formatting import printable

log = logging.getLogger(__name__)

TEMPLATE: Final = "pagerduty.summary.txt"
SUMMARY_CHARS: Final = 1024
ACTIONS: Final = {
    "firing": "trigger",
    "repeat": "trigger",
    "escalation": "trigger",
    "acknowledge": "acknowledge",
    "resolved": "resolve",
}
SEVERITIES: Final = {"critical": "critical", "error": "error", "warning": "warning", "info": "info"}
_DETAIL_ALERTS: Final = 20
_MAX_LINKS: Final = 5


class PagerDutySettings(StrictSettings):
    """A PagerDuty service's Events API v2 integration."""

    routing_key_env: EnvName | None = None
    routing_key_file: Path | None = None
    url: HttpUrlText = "https://events.pagerduty.com/v2/enqueue"
    source: str = Field(default="kafka-health", min_length=1, max_length=255)
    timeout: Seconds = 10.0

    @model_validator(mode="after")
    def _key_source(self) -> PagerDutySettings:
        exactly_one_source(self, "routing_key", "the integration's routing key")
        return self


class PagerDutyReceiverConfig(ReceiverConfigBase):
    kind: ClassVar[Literal["pagerduty"]] = "pagerduty"
    pagerduty: PagerDutySettings


class PagerDutyReceiver:
    """Sends events to one integration. See the module docstring for the event."""

    kind: Final = "pagerduty"

    def __init__(
        self,
        name: str,
        settings: PagerDutySettings,
        routing_key: SecretStr,
        templates: Templates,
    ) -> None:
        self.name = name
        self.settings = settings
        self._routing_key = routing_key
        self._templates = templates
        self._client = httpx.Client(timeout=settings.timeout, follow_redirects=False)

    @classmethod
    def from_config(cls, config: PagerDutyReceiverConfig, templates: Templates) -> PagerDutyReceiver:
        settings = config.pagerduty
        key = settings_secret(
            config.name, "pagerduty", settings, "routing_key", "the integration's routing key"
        )
        return cls(config.name, settings, key, templates)

    def send(self, notification: Notification) -> DeliveryResult:
        try:
            event = self.event(notification)
        except jinja2.TemplateError as exc:
            return template_failure(TEMPLATE, exc)
        result = post_json(
            self._client,
            self.settings.url,
            event,
            timeout=self.settings.timeout,
            secrets=(self._routing_key,),
        )
        if result.ok:
            log.debug("sent %s event for %s to PagerDuty", event["event_action"], notification.dedup_key)
        return result

    def event(self, notification: Notification) -> dict[str, Any]:
        """The Events API v2 body for `notification` (raises jinja2.TemplateError)."""
        action = ACTIONS[notification.kind]
        summary = ""
        if action == "trigger":
            summary = one_line(self._templates.render(TEMPLATE, notification))
        return pagerduty_event(
            notification,
            routing_key=self._routing_key.get_secret_value(),
            summary=summary,
            source=self.settings.source,
            external_url=self._templates.external_url,
        )

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"PagerDutyReceiver(name={self.name!r}, url={self.settings.url!r})"


def pagerduty_severity(notification: Notification) -> str:
    """PagerDuty's severity: ours, `error` for unknown ones, at least `error` when escalating."""
    severity = SEVERITIES.get(notification.severity, "error")
    if notification.kind == "escalation" and severity in ("warning", "info"):
        return "error"
    return severity


def pagerduty_event(
    notification: Notification, *, routing_key: str, summary: str, source: str, external_url: str = ""
) -> dict[str, Any]:
    """The event body; `summary` is used for triggers only and cut to 1024 characters."""
    action = ACTIONS[notification.kind]
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": notification.dedup_key,
    }
    if action != "trigger":
        return event
    alerts = notification.firing or list(notification.alerts)
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    payload: dict[str, Any] = {
        "summary": summary,
        "source": source,
        "severity": pagerduty_severity(notification),
        "timestamp": min((a.starts_at for a in alerts), default=notification.created_at).isoformat(),
        "custom_details": _details(notification, alerts),
    }
    clusters = {a.cluster for a in alerts}
    rules = {a.rule for a in alerts}
    if len(clusters) == 1:
        payload["component"] = printable(clusters.pop())
    if len(rules) == 1:
        payload["class"] = rules.pop()
    event["payload"] = payload
    links = [{"href": url, "text": label} for label, url in _links(alerts)]
    if notification.ack_url:
        links.insert(0, {"href": notification.ack_url, "text": "Acknowledge in kafka-health"})
    if links:
        event["links"] = links[:_MAX_LINKS]
    event["client"] = "kafka-health"
    if external_url:
        event["client_url"] = external_url.rstrip("/")
    return event


def _detail_line(alert: AlertView) -> str:
    """One alert as a line for people; names in it shown visibly (`printable`)."""
    value = "unknown" if alert.value is None else f"{alert.value:g}"
    return printable(f"{alert.rule} {alert.entity_key}: {alert.summary} (value {value})")


def _details(notification: Notification, alerts: list[AlertView]) -> dict[str, Any]:
    details: dict[str, Any] = {
        "kind": notification.kind,
        "severity": notification.severity,
        "group": dict(notification.group_labels),
        "firing": len(notification.firing),
        "resolved": len(notification.resolved),
        "alerts": [_detail_line(a) for a in alerts[:_DETAIL_ALERTS]],
    }
    if len(alerts) > _DETAIL_ALERTS:
        details["more_alerts"] = len(alerts) - _DETAIL_ALERTS
    listed = alerts[:_DETAIL_ALERTS]
    partitions = {a.entity_key: [p.to_dict() for p in a.partitions] for a in listed if a.partitions}
    if partitions:
        details["partitions"] = partitions
    annotations = {
        a.entity_key: {name: printable(text) for name, text in a.annotations.items()}
        for a in listed
        if a.annotations
    }
    if annotations:
        details["annotations"] = annotations
    impact = {a.entity_key: a.impact.to_dict() for a in listed if a.impact}
    if impact:
        details["impact"] = impact
    if notification.owners:
        details["owner"] = ", ".join(notification.owners)
    if notification.ack_url:
        details["acknowledge"] = notification.ack_url
    return details


def _links(alerts: list[AlertView]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(link for a in alerts for link in a.link_buttons()))
