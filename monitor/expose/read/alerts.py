"""How the alerts page reads the alert tables: every open alert with the incidents it is part of,
sorted into what needs someone now, what may soon, what someone is on, and what is muted.

Read-only. What people do on the page (acknowledge, silence) goes through `monitor.alert.actions`,
the functions the CLI and the JSON API use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from monitor.alert.matchers import Matcher
from monitor.core.vocabulary import most_severe_first_sql
from monitor.expose.read.queries import like_pattern

SECTIONS = ("firing", "pending", "acknowledged", "silenced")
"""The page's sections, in the order an on-call engineer reads them."""

_NOT_ENTITY = frozenset({"rule", "cluster", "severity", "entity", "team", "page"})
"""Labels that describe the alert rather than name the thing it is about."""

_ALERTS = (
    "SELECT id, fingerprint, rule, cluster, entity, entity_key, labels, severity, state, summary,"
    " runbook, pending_since, starts_at, silenced_by, inhibited_by FROM alerts"
    " WHERE state <> 'resolved'{search}"
    f" ORDER BY {most_severe_first_sql('severity')}, coalesce(starts_at, pending_since), id"
)
_SEARCH = " AND (rule LIKE :search OR summary LIKE :search OR entity_key LIKE :search)"
"""What a search on the alerts page matches: the rule, the summary, or the entity's key (which
holds the cluster, group, topic and partition)."""
_INCIDENTS = text(
    "SELECT id, receiver, group_labels, severity, created_at, acknowledged_at, acknowledged_by,"
    " escalated_to FROM alert_groups WHERE closed_at IS NULL ORDER BY id"
)
_AS_OF = text(
    "SELECT greatest((SELECT max(finished_at) FROM collection_runs WHERE job = 'alert'),"
    " (SELECT max(updated_at) FROM alerts))"
)


@dataclass(frozen=True, slots=True)
class Incident:
    """One open notification group at one receiver (an `alert_groups` row)."""

    id: int
    receiver: str
    group_labels: dict[str, str]
    severity: str
    created_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    escalated_to: str | None


@dataclass(frozen=True, slots=True)
class AlertItem:
    id: int
    fingerprint: str
    rule: str
    cluster: str
    entity: str
    entity_key: str
    labels: dict[str, str]
    severity: str
    state: str
    summary: str
    runbook: str | None
    pending_since: datetime
    starts_at: datetime | None
    silenced_by: int | None
    inhibited_by: str | None
    incidents: tuple[Incident, ...] = field(default=())

    @property
    def since(self) -> datetime:
        """Firing since, or pending since for an alert whose rule's `for` has not held yet."""
        return self.starts_at or self.pending_since

    @property
    def muted(self) -> bool:
        return self.silenced_by is not None or self.inhibited_by is not None

    @property
    def acknowledged(self) -> bool:
        return any(i.acknowledged_at is not None for i in self.incidents)

    @property
    def unacknowledged_incidents(self) -> list[Incident]:
        return [i for i in self.incidents if i.acknowledged_at is None]

    @property
    def section(self) -> str:
        if self.muted:
            return "silenced"
        if self.state == "pending":
            return "pending"
        return "acknowledged" if self.acknowledged else "firing"

    @property
    def entity_labels(self) -> list[tuple[str, str]]:
        """The labels that name what the alert is about (group, topic, partition, broker)."""
        return [(k, v) for k, v in sorted(self.labels.items()) if k not in _NOT_ENTITY]

    @property
    def silence_matchers(self) -> str:
        """Matchers that silence exactly this alert, one per line. Severity is left out, so the
        silence still holds when the alert is re-rated."""
        return "\n".join(
            str(Matcher(k, "=", str(v))) for k, v in sorted(self.labels.items()) if k != "severity"
        )


def belongs_to(alert_labels: Mapping[str, str], incident: Incident) -> bool:
    """An incident is the group of every alert whose labels carry its group labels (the route's
    `group_by`), so the link holds before the group's first notification is sent."""
    return all(alert_labels.get(k) == v for k, v in incident.group_labels.items())


def link_incidents(alerts: Iterable[AlertItem], incidents: Sequence[Incident]) -> list[AlertItem]:
    """Each unmuted firing alert with its open incidents (`belongs_to`); muted and pending alerts
    notify nobody. Incidents are looked up by their group labels' values, one lookup per set of
    label names, so thousands of alerts and incidents cost thousands of steps, not millions."""
    by_names: dict[tuple[str, ...], dict[tuple[str, ...], list[Incident]]] = {}
    for incident in incidents:
        names = tuple(sorted(incident.group_labels))
        values = tuple(incident.group_labels[n] for n in names)
        by_names.setdefault(names, {}).setdefault(values, []).append(incident)
    linked = []
    for alert in alerts:
        mine: list[Incident] = []
        if not alert.muted and alert.state == "firing":
            for names, groups in by_names.items():
                if all(n in alert.labels for n in names):
                    mine += groups.get(tuple(alert.labels[n] for n in names), [])
        linked.append(_replace_incidents(alert, tuple(sorted(mine, key=lambda i: i.id))))
    return linked


def _replace_incidents(alert: AlertItem, incidents: tuple[Incident, ...]) -> AlertItem:
    values = {name: getattr(alert, name) for name in AlertItem.__dataclass_fields__}
    values["incidents"] = incidents
    return AlertItem(**values)


def by_section(alerts: Iterable[AlertItem]) -> dict[str, list[AlertItem]]:
    sections: dict[str, list[AlertItem]] = {name: [] for name in SECTIONS}
    for alert in alerts:
        sections[alert.section].append(alert)
    return sections


@dataclass(frozen=True, slots=True)
class AlertsState:
    sections: dict[str, list[AlertItem]]
    incidents: list[Incident]
    as_of: datetime | None


def read_alerts(conn: Connection, search: str | None = None) -> AlertsState:
    """Every open alert (with `search`, those whose rule, summary or entity key contain it, taken
    literally) and every open incident."""
    incidents = [_incident(dict(r._mapping)) for r in conn.execute(_INCIDENTS)]
    sql = text(_ALERTS.format(search=_SEARCH if search else ""))
    params = {"search": like_pattern(search)} if search else {}
    alerts = [_alert(dict(r._mapping)) for r in conn.execute(sql, params)]
    as_of = conn.execute(_AS_OF).scalar()
    return AlertsState(
        by_section(link_incidents(alerts, incidents)),
        incidents,
        as_of if isinstance(as_of, datetime) else None,
    )


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(value or {}).items()}


def _incident(row: Mapping[str, Any]) -> Incident:
    return Incident(
        id=int(row["id"]),
        receiver=row["receiver"],
        group_labels=_labels(row["group_labels"]),
        severity=row["severity"],
        created_at=row["created_at"],
        acknowledged_at=row["acknowledged_at"],
        acknowledged_by=row["acknowledged_by"],
        escalated_to=row["escalated_to"],
    )


def _alert(row: Mapping[str, Any]) -> AlertItem:
    values = {name: row[name] for name in AlertItem.__dataclass_fields__ if name != "incidents"}
    values["labels"] = _labels(row["labels"])
    return AlertItem(**values)
