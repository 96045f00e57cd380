"""Alertmanager: POST the alerts of each notification to `/api/v2/alerts`, so that teams who
already route, silence and inhibit with Alertmanager get ours there too.

Each alert becomes one of Alertmanager's postable alerts:
- `labels`: `alertname` (the rule), `severity`, `cluster`, the alert's own labels, and the
  receiver's `extra_labels`. Alertmanager identifies an alert by its labels, so they are the stable
  ones of the finding (no value or time), and a re-send updates the same alert;
- `annotations`: `summary`, `description`, `owner`, `entity` and `value`, then every annotation of the
  rule by its name (a runbook also as `runbook_url`);
- `startsAt`: when it started firing; `endsAt`: for a resolved alert, when it resolved (Alertmanager
  resolves it at once); for a firing one, now plus `ends_after`. Alertmanager resolves an alert
  whose `endsAt` passes without a re-send, so a monitor that stops sending does not leave alerts
  open for ever: keep the route's `repeat_interval` below `ends_after` (the routing check refuses
  a route that does not) so each repeat extends it;
- `generatorURL`: the alert's row on our alerts page (`alert.external_url`).

Outcomes: the shared HTTP policy (2xx delivered; 429/5xx, timeouts and connection errors retried;
another 4xx, e.g. a label Alertmanager refuses, given up with its message).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from typing import Any, ClassVar, Final, Literal

import httpx
from pydantic import Field, field_validator

from monitor.alert.model import AlertView, DeliveryResult, Notification
from monitor.alert.receivers.base import http_outcome, transport_outcome
from monitor.alert.receivers.config import HttpUrlText, ReceiverConfigBase, Seconds, StrictSettings
from monitor.alert.render import Templates
from monitor.core.annotations import RUNBOOK
from monitor.core.formatting import printable
from monitor.core.vocabulary import format_duration, parse_duration

log = logging.getLogger(__name__)

API_PATH: Final = "/api/v2/alerts"
_LABEL_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"


class AlertmanagerSettings(StrictSettings):
    """One Alertmanager (or one of a cluster: they gossip what they receive)."""

    url: HttpUrlText = Field(description="Alertmanager's base URL, e.g. http://alertmanager:9093")
    timeout: Seconds = 10.0
    ends_after: int = Field(
        default=4 * 3600 + 30 * 60,
        description="A firing alert's endsAt is this long after it is sent (a duration: 4h30m).",
    )
    extra_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels added to every alert (e.g. source: kafka-health)."
    )

    @field_validator("ends_after", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        seconds = parse_duration(value, allow_zero=False)
        if seconds < 60:
            raise ValueError(
                "ends_after must be at least 1m: Alertmanager would resolve alerts between sends"
            )
        return seconds

    @field_validator("extra_labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.fullmatch(_LABEL_NAME, name) or name.startswith("__"):
                raise ValueError(
                    f"label name {name!r} is not one Alertmanager takes: letters, digits and _, not "
                    "starting with a digit or __"
                )
        return value


class AlertmanagerReceiverConfig(ReceiverConfigBase):
    kind: ClassVar[Literal["alertmanager"]] = "alertmanager"
    alertmanager: AlertmanagerSettings

    def route_problem(self, repeat_interval: int) -> str | None:
        """A route notifying an Alertmanager must repeat before the alerts it sent there end:
        each repeat extends them, and an alert whose endsAt passes is resolved by Alertmanager."""
        ends_after = self.alertmanager.ends_after
        if repeat_interval < ends_after:
            return None
        return (
            f"repeat_interval {format_duration(repeat_interval)} is not shorter than the ends_after "
            f"({format_duration(ends_after)}) of Alertmanager receiver {self.name!r}: Alertmanager "
            "would resolve firing alerts between repeats; set repeat_interval below it (e.g. 1h)"
        )


class AlertmanagerReceiver:
    """POSTs each notification's alerts to one Alertmanager's v2 API."""

    kind: Final = "alertmanager"

    def __init__(self, name: str, settings: AlertmanagerSettings, templates: Templates) -> None:
        self.name = name
        self.settings = settings
        self._external_url = templates.external_url.rstrip("/")
        self._client = httpx.Client(timeout=settings.timeout, follow_redirects=False)

    @classmethod
    def from_config(cls, config: AlertmanagerReceiverConfig, templates: Templates) -> AlertmanagerReceiver:
        return cls(config.name, config.alertmanager, templates)

    def send(self, notification: Notification) -> DeliveryResult:
        now = notification.created_at
        body = [self.postable(alert, now) for alert in notification.alerts]
        url = self.settings.url.rstrip("/") + API_PATH
        try:
            response = self._client.post(url, json=body)
        except httpx.TransportError as exc:
            return transport_outcome(exc, self.settings.timeout)
        result = http_outcome(response.status_code, response.content)
        if result.ok:
            log.debug("posted %d alerts to alertmanager %s", len(body), self.name)
        return result

    def postable(self, alert: AlertView, now: datetime) -> dict[str, Any]:
        """One alert as Alertmanager's `postableAlert`."""
        labels = {**self.settings.extra_labels, **alert.labels}
        labels.update(alertname=alert.rule, severity=alert.severity, cluster=alert.cluster)
        annotations = {  # text for people: names in it shown visibly (labels stay the data)
            "summary": printable(alert.summary),
            "description": printable(alert.description),
            "entity": alert.entity,
        }
        for name, text in alert.annotations.items():  # the rule's, where the engine's names are not
            annotations.setdefault(name, printable(text))
        if RUNBOOK in alert.annotations:  # the name Alertmanager's ecosystem links by
            annotations["runbook_url"] = printable(alert.annotations[RUNBOOK])
        if alert.owner:
            annotations["owner"] = alert.owner
        if alert.value is not None:
            annotations["value"] = f"{alert.value:g}"
        if alert.state == "resolved":
            ends = alert.ends_at or now
        else:
            ends = now + timedelta(seconds=self.settings.ends_after)
        return {
            "labels": {name: value for name, value in labels.items() if value != ""},
            "annotations": {name: value for name, value in annotations.items() if value},
            "startsAt": alert.starts_at.isoformat(),
            "endsAt": ends.isoformat(),
            "generatorURL": f"{self._external_url}/alerts#alert-{alert.fingerprint}",
        }

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"AlertmanagerReceiver(name={self.name!r}, url={self.settings.url!r})"
