"""How the alerts page reads the alert tables: the open alerts sorted into what needs someone now,
what may soon, what someone is on, and what is muted, with the incidents they are part of.

The page shows a page of each section, so PostgreSQL sorts the alerts into sections, counts each
one (an aggregate), and returns only the rows shown (per section, worst first); the incidents of
those rows and the first open incidents are read the same way. At 10,000 topics and thousands of
open alerts a page reads a few hundred rows, not every open alert.

Read-only. What people do on the page (acknowledge, silence) goes through `monitor.alert.actions`,
the functions the CLI and the JSON API use.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def _group_of(labels: str, names: str) -> str:
    """SQL: the group labels the alert labels `labels` would have in a group by `names` (label
    names; the alert has them all)."""
    return f"coalesce((SELECT jsonb_object_agg(k, {labels} -> k) FROM unnest({names}) k), '{{}}'::jsonb)"


_NAMES = "ARRAY(SELECT jsonb_object_keys(group_labels) ORDER BY 1)"
"""An incident's group label names, sorted: the route's `group_by`."""

_OPEN = f"""
    WITH acked AS MATERIALIZED (
        SELECT group_labels, {_NAMES} AS names FROM alert_groups
        WHERE closed_at IS NULL AND acknowledged_at IS NOT NULL
    ), acked_alerts AS MATERIALIZED (
        SELECT DISTINCT a.id FROM alerts a
        JOIN (SELECT DISTINCT names FROM acked) n ON a.labels ?& n.names
        JOIN acked g ON g.group_labels = {_group_of("a.labels", "n.names")}
        WHERE a.state = 'firing'
    ), open AS MATERIALIZED (
        SELECT a.*, CASE
            WHEN a.silenced_by IS NOT NULL OR a.inhibited_by IS NOT NULL THEN 'silenced'
            WHEN a.state = 'pending' THEN 'pending'
            WHEN a.id IN (SELECT id FROM acked_alerts) THEN 'acknowledged'
            ELSE 'firing' END AS section
        FROM alerts a WHERE a.state <> 'resolved' SEARCH__
    )
"""
"""Every open alert (matching the search) with its section: muted by a silence or an inhibiting
alert; pending (its rule's `for` has not held yet); firing in an incident someone acknowledged; or
firing. An alert is in an incident when its labels carry the incident's group labels, so the link
holds before the group's first notification is sent. Each alert's labels, cut to each set of
group label names the incidents have (the routes' `group_by`), are looked up among the
incidents' group labels: a hash join, not a comparison of every alert with every incident."""

_SEARCH = "AND (a.rule LIKE :search OR a.summary LIKE :search OR a.entity_key LIKE :search)"
"""What a search on the alerts page matches: the rule, the summary, or the entity's key (which
holds the cluster, group, topic and partition)."""

_ALERT_COLUMNS = (
    "id, fingerprint, rule, cluster, entity, entity_key, labels, severity, state, summary, annotations,"
    " pending_since, starts_at, silenced_by, inhibited_by"
)
_PAGE = f"""
    , counts AS (SELECT section, count(*) AS count__ FROM open GROUP BY section),
    shown AS (
        SELECT * FROM (
            SELECT {_ALERT_COLUMNS}, section, row_number() OVER (
                PARTITION BY section
                ORDER BY {most_severe_first_sql("severity")}, coalesce(starts_at, pending_since), id
            ) AS rank__ FROM open
        ) ranked
        WHERE rank__ > CASE WHEN section = :section THEN :offset ELSE 0 END
          AND rank__ <= CASE WHEN section = :section THEN :offset ELSE 0 END + :rows
    )
    SELECT c.section, c.count__, {", ".join(f"s.{c.strip()}" for c in _ALERT_COLUMNS.split(","))}
    FROM counts c LEFT JOIN shown s ON s.section = c.section
    ORDER BY c.section, s.rank__
"""
"""Each section's count, with one page of its alerts (none past its end), most severe first,
then oldest first: `rows` alerts from `offset` in `section`, the first `rows` in the others."""

_INCIDENT_COLUMNS = (
    "g.id, g.receiver, g.group_labels, g.severity, g.created_at, g.acknowledged_at, g.acknowledged_by,"
    " g.escalated_to"
)
_LINKS = text(
    f"""
    WITH names AS MATERIALIZED (
        SELECT DISTINCT {_NAMES} AS names FROM alert_groups WHERE closed_at IS NULL
    ), wanted AS (
        SELECT a.id AS alert_id, {_group_of("a.labels", "n.names")} AS group_labels
        FROM alerts a, names n WHERE a.id = ANY(:ids) AND a.labels ?& n.names
    )
    SELECT w.alert_id, {_INCIDENT_COLUMNS}
    FROM wanted w JOIN alert_groups g ON g.closed_at IS NULL AND g.group_labels = w.group_labels
    ORDER BY w.alert_id, g.id
    """
)
"""The open incidents each of the alerts `ids` belongs to (the same rule as `_OPEN`'s)."""
_INCIDENTS = text(
    f"SELECT {_INCIDENT_COLUMNS} FROM alert_groups g WHERE g.closed_at IS NULL"
    " ORDER BY g.acknowledged_at IS NOT NULL, g.id LIMIT :rows"
)
"""The first open incidents: unacknowledged first, oldest first."""
_INCIDENT_COUNT = text("SELECT count(*) FROM alert_groups WHERE closed_at IS NULL")
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
    annotations: dict[str, str]
    pending_since: datetime
    starts_at: datetime | None
    silenced_by: int | None
    inhibited_by: str | None
    section: str
    """Which of `SECTIONS` the alert is in (see `_OPEN`)."""
    incidents: tuple[Incident, ...] = field(default=())
    """The open incidents of a firing alert that is not muted (muted and pending alerts notify
    nobody)."""

    @property
    def since(self) -> datetime:
        """Firing since, or pending since for an alert whose rule's `for` has not held yet."""
        return self.starts_at or self.pending_since

    @property
    def unacknowledged_incidents(self) -> list[Incident]:
        return [i for i in self.incidents if i.acknowledged_at is None]

    @property
    def entity_labels(self) -> list[tuple[str, str]]:
        """The labels that name what the alert is about (group, topic, partition, broker)."""
        return [(k, v) for k, v in sorted(self.labels.items()) if k not in _NOT_ENTITY]

    @property
    def silence_matchers(self) -> list[str]:
        """Matchers that silence exactly this alert (the silence form shows one per line). Severity
        is left out, so the silence still holds when the alert is re-rated."""
        return [str(Matcher(k, "=", str(v))) for k, v in sorted(self.labels.items()) if k != "severity"]


@dataclass(frozen=True, slots=True)
class AlertsState:
    sections: dict[str, list[AlertItem]]
    """The alerts shown of each section, in order."""
    counts: dict[str, int]
    """How many open alerts (matching the search) each section has."""
    incidents: list[Incident]
    """The first open incidents, unacknowledged first, oldest first."""
    incident_count: int
    as_of: datetime | None


def read_alerts(
    conn: Connection,
    search: str | None = None,
    *,
    rows: int,
    incident_rows: int,
    section: str | None = None,
    offset: int = 0,
) -> AlertsState:
    """`rows` open alerts of each section (with `search`, of those whose rule, summary or entity
    key contain it, taken literally), from `offset` in `section` (one of `SECTIONS`) and from
    the first in the others, with their incidents; each section's count; and the first
    `incident_rows` open incidents with their count."""
    if rows < 1 or incident_rows < 1 or offset < 0:
        raise ValueError(f"rows and incident_rows must be positive and offset not negative, not {rows}, "
                         f"{incident_rows} and {offset}")  # fmt: skip
    with_open = _OPEN.replace("SEARCH__", _SEARCH if search else "")
    params: dict[str, Any] = {"search": like_pattern(search)} if search else {}
    counts = dict.fromkeys(SECTIONS, 0)
    shown: list[AlertItem] = []
    page = {**params, "section": section, "offset": offset, "rows": rows}
    for row in conn.execute(text(with_open + _PAGE), page):
        values = dict(row._mapping)
        counts[str(values["section"])] = int(values.pop("count__"))
        if values["id"] is not None:
            shown.append(_alert(values))
    linked = _incidents_of(conn, [a.id for a in shown if a.section in ("firing", "acknowledged")])
    sections: dict[str, list[AlertItem]] = {name: [] for name in SECTIONS}
    for alert in shown:
        sections[alert.section].append(_with_incidents(alert, linked.get(alert.id, ())))
    incidents = [_incident(dict(r._mapping)) for r in conn.execute(_INCIDENTS, {"rows": incident_rows})]
    as_of = conn.execute(_AS_OF).scalar()
    return AlertsState(
        sections,
        counts,
        incidents,
        int(conn.execute(_INCIDENT_COUNT).scalar_one()),
        as_of if isinstance(as_of, datetime) else None,
    )


def _incidents_of(conn: Connection, alert_ids: list[int]) -> dict[int, tuple[Incident, ...]]:
    """alert id -> the open incidents it belongs to, oldest first."""
    if not alert_ids:
        return {}
    found: dict[int, list[Incident]] = {}
    for row in conn.execute(_LINKS, {"ids": alert_ids}):
        values = dict(row._mapping)
        found.setdefault(int(values.pop("alert_id")), []).append(_incident(values))
    return {alert_id: tuple(incidents) for alert_id, incidents in found.items()}


def _with_incidents(alert: AlertItem, incidents: tuple[Incident, ...]) -> AlertItem:
    values = {name: getattr(alert, name) for name in AlertItem.__dataclass_fields__}
    values["incidents"] = incidents
    return AlertItem(**values)


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
