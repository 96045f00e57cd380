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
    owners         the owning teams of the alerts (their `owner`), in order, without repeats
    title          one line: "[CRITICAL] 3 firing: UnderMinIsr (cluster=prod)"
    external_url   the monitor's web address (for links), without a trailing slash

Each AlertView also carries what the cycle knew when it decided the notification:

    alert.owner       the owning team (the `team` label: the rule's, else owners.yaml's), or None
    alert.partitions  for a consumer group's alert, its worst partitions (PartitionDetail: topic,
                      partition, status OK/WARN/ERR/STOP/STALL/REWIND, since, offset_lag,
                      lag_seconds, time_until_data_loss_seconds), worst first, at most
                      `monitor.alert.details.MAX_PARTITIONS`; empty for other alerts
    alert.partitions_total  how many partitions of the group the evaluation flagged (not OK)
    alert.impact      for an alert that inhibits others, what it mutes (Impact: counts by rule,
                      `total`, and the `worst` muted alerts as ImpactItem: rule, severity,
                      entity_key, summary); None when it mutes nothing
    alert.resolved_reason  `gone` for a resolved alert whose entity the cluster no longer has
                      (a group or topic deleted, a broker unregistered); None otherwise

Filters besides jinja2's own: `duration` (seconds -> "1h 5m"), `percent`, `bytes`, `number`,
`timestamp` (datetime -> "2026-11-21 14:03:09 UTC").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from monitor.core.annotations import RUNBOOK, annotations_of, is_link

AlertState = Literal["firing", "resolved"]


def _fields(record: Any) -> dict[str, Any]:
    """A flat dataclass's fields as a dict, values as they are: what `dataclasses.asdict` gives for
    fields of plain values, without its deep copy (which made writing a notice of thousands of
    alerts take seconds)."""
    return {name: getattr(record, name) for name in record.__dataclass_fields__}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@dataclass(frozen=True, slots=True)
class PartitionDetail:
    """One partition of a consumer group as a notification shows it: which status, since when,
    how far behind, how long until retention deletes what the group has not read."""

    topic: str
    partition: int
    status: str
    since: datetime | None
    """When the partition entered `status` (the first evaluation of the current run of it)."""
    offset_lag: int | None
    lag_seconds: float | None
    time_until_data_loss_seconds: float | None

    def to_dict(self) -> dict[str, Any]:
        return {**_fields(self), "since": _iso(self.since)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartitionDetail:
        return cls(**{**data, "since": _moment(data.get("since"))})


@dataclass(frozen=True, slots=True)
class ImpactItem:
    """One alert muted by an inhibition, as the source's notification names it."""

    rule: str
    severity: str
    entity_key: str
    summary: str


@dataclass(frozen=True, slots=True)
class Impact:
    """What an inhibiting alert mutes: so its notice tells the consequences it stands for."""

    counts: dict[str, int]
    """rule -> how many of its alerts this one mutes, worst rule first."""
    worst: tuple[ImpactItem, ...]
    """The worst muted alerts (by severity, then the rule's rank), at most a handful."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "worst": [_fields(item) for item in self.worst]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Impact:
        return cls(
            counts={str(k): int(v) for k, v in data["counts"].items()},
            worst=tuple(ImpactItem(**item) for item in data["worst"]),
        )


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
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None = None
    acknowledged_by: str | None = None
    owner: str | None = None
    partitions: tuple[PartitionDetail, ...] = ()
    partitions_total: int = 0
    impact: Impact | None = None
    resolved_reason: str | None = None
    """Why a resolved alert resolved: `gone` when the cluster no longer has its entity
    (vocabulary.RESOLVE_REASONS); None when its condition stopped holding, or while it fires."""

    def link_buttons(self) -> list[tuple[str, str]]:
        """(label, URL) of each annotation whose value is an http(s) URL: `Runbook: UnderMinIsr`."""
        return [(f"{name.replace('_', ' ').capitalize()}: {self.rule}", text)
                for name, text in self.annotations.items() if is_link(text)]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data = _fields(self)
        data["labels"] = dict(self.labels)
        data["annotations"] = dict(self.annotations)
        data["starts_at"] = self.starts_at.isoformat()
        data["ends_at"] = _iso(self.ends_at)
        data["partitions"] = [p.to_dict() for p in self.partitions]
        data["impact"] = self.impact.to_dict() if self.impact else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlertView:
        """Also reads payloads stored before `owner`, `partitions`, `impact`, `resolved_reason`
        and `annotations` existed (a `runbook` of those is the annotation)."""
        values = dict(data)
        runbook = values.pop(RUNBOOK, None)
        values["annotations"] = annotations_of(
            values.get("annotations") or ({RUNBOOK: runbook} if runbook else {})
        )
        values["starts_at"] = datetime.fromisoformat(values["starts_at"])
        values["ends_at"] = _moment(values.get("ends_at"))
        values["labels"] = {str(k): str(v) for k, v in values["labels"].items()}
        values["partitions"] = tuple(PartitionDetail.from_dict(p) for p in values.get("partitions") or ())
        values["impact"] = Impact.from_dict(values["impact"]) if values.get("impact") else None
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

    @property
    def owners(self) -> list[str]:
        return list(dict.fromkeys(a.owner for a in self.alerts if a.owner))

    def to_json(self) -> str:
        data = _fields(self)
        data["group_labels"] = dict(self.group_labels)
        data["extra"] = dict(self.extra)
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


class FailureReason(StrEnum):
    """Why a delivery attempt failed, as a type (Alertmanager's `notify.Reason`): the outbox
    decides from it whether to try again, and it labels the failure metric; the reason text
    beside it is what the outbox stores and shows."""

    CLIENT_ERROR = "client_error"
    """The destination refused this request (HTTP 4xx, SMTP 5xx): the same request fails again."""
    RATE_LIMITED = "rate_limited"
    """The destination asks to slow down (HTTP 429, Slack `ratelimited`)."""
    SERVER_ERROR = "server_error"
    """The destination failed or is busy (HTTP 5xx, SMTP 4xx, Slack `internal_error`)."""
    TIMEOUT = "timeout"
    """No answer within the receiver's timeout."""
    CONNECTION = "connection"
    """No connection (refused, reset, DNS, TLS handshake)."""
    MISCONFIGURED = "misconfigured"
    """The receiver's configuration cannot work (not defined, a secret not set, a credential or
    channel the destination rejects, an untrusted certificate): fix routing.yaml or the secret."""
    TEMPLATE = "template"
    """A notification template failed to render: it fails the same way every time."""
    UNREADABLE = "unreadable"
    """The outbox row's payload cannot be read back into a notification."""
    WRITE_FAILED = "write_failed"
    """A local file could not be written (the console inbox: disk full, directory gone)."""
    RECEIVER_BUG = "receiver_bug"
    """The receiver raised instead of reporting an outcome: retried, like an outage."""

    @property
    def retryable(self) -> bool:
        """Whether a later attempt of the same notification can succeed."""
        return self in _RETRYABLE


_RETRYABLE = frozenset(
    {
        FailureReason.RATE_LIMITED,
        FailureReason.SERVER_ERROR,
        FailureReason.TIMEOUT,
        FailureReason.CONNECTION,
        FailureReason.WRITE_FAILED,
        FailureReason.RECEIVER_BUG,
    }
)


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """What a receiver reports for one attempt: delivered, or failed with a typed `failure`.

    Whether to retry follows from the type (`FailureReason.retryable`); for every HTTP receiver:
    2xx ok; 429, 5xx, timeouts and connection errors retry; any other status gives up.
    """

    ok: bool
    failure: FailureReason | None = None
    reason: str = ""
    status: int | None = None
    """The HTTP status or SMTP reply code, when there was one."""

    @property
    def retryable(self) -> bool:
        return self.failure is not None and self.failure.retryable

    @classmethod
    def delivered(cls, status: int | None = None) -> DeliveryResult:
        return cls(ok=True, status=status)

    @classmethod
    def failed(cls, failure: FailureReason, reason: str, status: int | None = None) -> DeliveryResult:
        return cls(ok=False, failure=failure, reason=reason, status=status)
