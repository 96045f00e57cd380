"""The records the alert stage passes between its parts: an alert as templates and receivers see
it, one notification to one receiver, and the outcome of a delivery attempt.

`Notification` is also what the outbox stores (as JSON, `to_json`/`from_json`), so a notification
decided in one transaction is sent, possibly by another instance after a restart, exactly as
decided.

The template context (documented once, used by every template in `templates/notifications/`):

    notification   the Notification: receiver, kind, severity, group_key, group_labels,
                   dedup_key, ack_url, created_at, alerts (a list of AlertView)
    alerts         notification.alerts
    firing         the alerts whose state is "firing"
    resolved       the alerts whose state is "resolved"
    common_labels  the labels every alert of the notification shares
    title          one line: "[CRITICAL] 3 firing: UnderMinIsr (cluster=prod)"
    external_url   the monitor's web address (for links), without a trailing slash

Filters besides jinja2's own: `duration` (seconds -> "1h 5m"), `percent`, `bytes`, `number`,
`timestamp` (datetime -> "2026-11-21 14:03:09 UTC").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

AlertState = Literal["firing", "resolved"]
NotificationKind = Literal["firing", "repeat", "escalation", "acknowledge", "resolved"]
"""firing: first notice of a group (or new alerts in it); repeat: the group still fires after
repeat_interval; escalation: an unacknowledged warning outlasted escalate_after and goes to the
paging receiver; acknowledge: someone acknowledged (the pager stops escalating); resolved: every
alert of the group resolved (only where the route asks for resolved notices)."""


@dataclass(frozen=True, slots=True)
class AlertView:
    """One alert as templates and receivers see it."""

    fingerprint: str
    rule: str
    severity: str
    state: AlertState
    cluster: str
    entity: str
    entity_key: str
    labels: dict[str, str]
    summary: str
    description: str
    value: float | None
    runbook: str | None
    starts_at: datetime
    ends_at: datetime | None = None
    acknowledged_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["starts_at"] = self.starts_at.isoformat()
        data["ends_at"] = self.ends_at.isoformat() if self.ends_at else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlertView:
        values = dict(data)
        values["starts_at"] = datetime.fromisoformat(values["starts_at"])
        values["ends_at"] = datetime.fromisoformat(values["ends_at"]) if values.get("ends_at") else None
        values["labels"] = {str(k): str(v) for k, v in values["labels"].items()}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Notification:
    """One message to one receiver about one group of alerts."""

    receiver: str
    kind: NotificationKind
    severity: str
    group_key: str
    group_labels: dict[str, str]
    dedup_key: str
    """Stable per (receiver, group): PagerDuty's dedup_key, so a retried trigger is idempotent and
    acknowledge/resolve reach the same incident."""
    alerts: tuple[AlertView, ...]
    created_at: datetime
    ack_url: str | None = None
    id: int | None = None
    """The outbox row id, once stored."""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def firing(self) -> list[AlertView]:
        return [a for a in self.alerts if a.state == "firing"]

    @property
    def resolved(self) -> list[AlertView]:
        return [a for a in self.alerts if a.state == "resolved"]

    @property
    def common_labels(self) -> dict[str, str]:
        if not self.alerts:
            return {}
        common = dict(self.alerts[0].labels)
        for alert in self.alerts[1:]:
            common = {k: v for k, v in common.items() if alert.labels.get(k) == v}
        return common

    def to_json(self) -> str:
        data = asdict(self)
        data["alerts"] = [a.to_dict() for a in self.alerts]
        data["created_at"] = self.created_at.isoformat()
        data.pop("id")
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, id: int | None = None) -> Notification:
        data = json.loads(text)
        data["alerts"] = tuple(AlertView.from_dict(a) for a in data["alerts"])
        data["created_at"] = datetime.fromisoformat(data["created_at"])
        return cls(**data, id=id)


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """What a receiver reports for one attempt.

    `retryable` follows one policy for every HTTP receiver: 2xx ok; 429, 5xx, timeouts and
    connection errors retry; any other 4xx gives up with the reason recorded.
    """

    ok: bool
    retryable: bool = False
    reason: str = ""
    status: int | None = None
    """The HTTP status or SMTP reply code, when there was one."""

    @classmethod
    def delivered(cls, status: int | None = None) -> DeliveryResult:
        return cls(ok=True, status=status)

    @classmethod
    def retry(cls, reason: str, status: int | None = None) -> DeliveryResult:
        return cls(ok=False, retryable=True, reason=reason, status=status)

    @classmethod
    def give_up(cls, reason: str, status: int | None = None) -> DeliveryResult:
        return cls(ok=False, retryable=False, reason=reason, status=status)
