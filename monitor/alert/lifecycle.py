"""One alert cycle: findings -> alerts -> muted or not -> groups per receiver -> notifications.

1. **Alerts from findings.** Each open finding is an alert keyed by a stable fingerprint (rule +
   entity key, which includes the cluster). `pending` until the rule's `for` holds (the finding
   says so), then `firing`; a severity change updates the same alert (and re-routes it); an alert
   whose finding is gone is `resolved`. A finding is gone only when its entity was evaluated and
   the rule no longer matched (or it went unsampled past the staleness bound): the finding of an
   entity a partial collection run could not sample stays open (store.findings), so its alert
   keeps its state and `pending_since`.
2. **Muting.** A firing alert matched by an active silence is silenced; one matched as a target
   of an inhibition rule while a firing source alert (not itself) with the same `equal` labels
   exists is covered by that source (with `only_after_source`, only when it went pending after
   it) and inhibited, unless it matches the rule's `still_notify` (its consequence is worse than
   the source's notice says: it is told). Muted alerts are kept and shown, but notify nobody;
   the source carries what it covers as its `impact` (`monitor.alert.impact`), so its notice
   tells the consequences it stands for, and a new kind of consequence is news of its group.
3. **Groups.** Every unmuted firing alert is routed (`Routing.receivers_for`); per receiver it
   joins the group given by the route's `group_by` labels. An open `alert_groups` row is the
   incident of one group at one receiver.
4. **Notifications**, per group, Alertmanager's timing plus acknowledgement and escalation:
   first notice after `group_wait`; news after `group_interval`: new or re-rated alerts, a new
   kind of impact, and alerts of the group that resolved while others still fire (listed as
   resolved in the next notice, Alertmanager's send_resolved; not to a pager, whose incident is
   the group's and resolves with it); a repeat after
   `repeat_interval` unless acknowledged; an unacknowledged warning that outlasts `escalate_after`
   is sent to `escalate_to` (the pager) once; an acknowledgement is passed on once (the pager
   stops escalating); when nothing in the group fires any more the incident closes with a resolved
   notice where the route asks for one (always to a pager, so its incident closes).

A notice about consumer groups lists each alert's worst partitions (status, since, lag, time
until data loss: `monitor.alert.details`), read from the newest evaluation when it is decided.

Everything a cycle decides, the alerts, the groups and the outbox rows, is written in one
transaction under an advisory lock, so two daemons never decide the same notification twice and a
crash leaves either all of it or none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from monitor.alert.details import PartitionDetails
from monitor.alert.impact import impact_of, signature
from monitor.alert.matchers import MatcherError, matches_all, parse_matchers
from monitor.alert.model import AlertView, Impact, Notification, NotificationKind, PartitionDetail
from monitor.alert.outbox import enqueue
from monitor.alert.routing import RouteMatch, Routing
from monitor.core.vocabulary import SEVERITY_RANK

log = logging.getLogger(__name__)

LIFECYCLE_LOCK = 0x6B68_616C  # pg_advisory_xact_lock key of the alert cycle ("khal")
PAGER_KINDS = frozenset({"pagerduty"})


def fingerprint(rule: str, entity_key: str) -> str:
    """Stable id of an alert: the same rule on the same entity is the same alert."""
    return hashlib.sha256(f"{rule}\x1f{entity_key}".encode()).hexdigest()[:20]


def _group_key(match: RouteMatch, labels: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    if "..." in match.group_by:
        chosen = dict(sorted(labels.items()))
    else:
        # A label the alert does not have is left out, not grouped as "": a partition alert's
        # group is (cluster, rule) whether or not group_by also names group_id.
        chosen = {name: labels[name] for name in match.group_by if name in labels}
    return f"{match.route_path}:{json.dumps(chosen, sort_keys=True)}", chosen


def most_severe(severities: Iterable[str]) -> str:
    return max(severities, key=lambda s: SEVERITY_RANK.get(s, 0), default="info")


# ---------------------------------------------------------------------------------------------
# Rows as the cycle sees them


@dataclass(slots=True)
class AlertRow:
    id: int | None
    fingerprint: str
    rule: str
    cluster: str
    entity: str
    entity_key: str
    labels: dict[str, str]
    severity: str
    state: str
    summary: str
    description: str
    value: float | None
    runbook: str | None
    pending_since: datetime
    starts_at: datetime | None
    resolved_at: datetime | None = None
    silenced_by: int | None = None
    inhibited_by: str | None = None
    changed: bool = False
    impact: Impact | None = None
    """What this alert covers as an inhibition source, this cycle (not stored)."""

    def view(
        self,
        state: str | None = None,
        ends_at: datetime | None = None,
        partitions: tuple[PartitionDetail, ...] = (),
        partitions_total: int = 0,
    ) -> AlertView:
        return AlertView(
            fingerprint=self.fingerprint,
            rule=self.rule,
            severity=self.severity,
            state="resolved" if (state or self.state) == "resolved" else "firing",
            cluster=self.cluster,
            entity=self.entity,
            entity_key=self.entity_key,
            labels=dict(self.labels),
            summary=self.summary,
            description=self.description,
            value=self.value,
            runbook=self.runbook,
            starts_at=self.starts_at or self.pending_since,
            ends_at=ends_at or self.resolved_at,
            owner=self.labels.get("team") or None,
            partitions=partitions,
            partitions_total=partitions_total,
            impact=self.impact,
        )


@dataclass(slots=True)
class GroupRow:
    id: int | None
    receiver: str
    group_key: str
    group_labels: dict[str, str]
    route_path: str
    dedup_key: str
    ack_token: str
    severity: str
    created_at: datetime
    first_notified_at: datetime | None = None
    last_notified_at: datetime | None = None
    notified: dict[str, str] = field(default_factory=dict)
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    ack_notified_at: datetime | None = None
    escalated_at: datetime | None = None
    escalated_to: str | None = None
    closed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SilenceRow:
    id: int
    matchers: tuple[str, ...]


@dataclass(slots=True)
class CycleResult:
    alerts: dict[str, int] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)
    groups_opened: int = 0
    groups_closed: int = 0


# ---------------------------------------------------------------------------------------------
# 1. Alerts from findings (pure)


def merge_alerts(
    open_alerts: Mapping[str, AlertRow],
    findings: Sequence[Mapping[str, Any]],
    routing: Routing,
    now: datetime,
) -> tuple[dict[str, AlertRow], list[AlertRow]]:
    """The open alerts after this cycle's findings, and the alerts resolved now."""
    current: dict[str, AlertRow] = {}
    for finding in findings:
        fp = fingerprint(str(finding["rule"]), str(finding["entity_key"]))
        labels = {str(k): str(v) for k, v in dict(finding["labels"] or {}).items()}
        labels.update(
            rule=str(finding["rule"]),
            cluster=str(finding["cluster"]),
            entity=str(finding["entity"]),
            severity=str(finding["severity"]),
        )
        team = routing.team_for(labels)
        if team:
            labels["team"] = team
        state = "firing" if finding["state"] == "firing" else "pending"
        row = open_alerts.get(fp)
        if row is None:
            row = AlertRow(
                id=None,
                fingerprint=fp,
                rule=str(finding["rule"]),
                cluster=str(finding["cluster"]),
                entity=str(finding["entity"]),
                entity_key=str(finding["entity_key"]),
                labels=labels,
                severity=str(finding["severity"]),
                state=state,
                summary=str(finding["summary"]),
                description=str(finding["description"]),
                value=finding["value"],
                runbook=finding["runbook"],
                pending_since=now,
                starts_at=now if state == "firing" else None,
                changed=True,
            )
        else:
            new = (labels, str(finding["severity"]), state, str(finding["summary"]), finding["value"])
            old = (row.labels, row.severity, row.state, row.summary, row.value)
            row.changed = new != old or str(finding["description"]) != row.description
            row.labels, row.severity, row.summary, row.value = labels, new[1], new[3], finding["value"]
            row.description, row.runbook = str(finding["description"]), finding["runbook"]
            if state == "firing" and row.starts_at is None:
                row.starts_at = now
            row.state = state
        current[fp] = row
    resolved = []
    for fp, row in open_alerts.items():
        if fp not in current:
            row.state, row.resolved_at, row.changed = "resolved", now, True
            resolved.append(row)
    return current, resolved


# ---------------------------------------------------------------------------------------------
# 2. Muting (pure)


def apply_silences(alerts: Iterable[AlertRow], silences: Sequence[SilenceRow]) -> None:
    parsed = []
    for silence in silences:
        try:
            parsed.append((silence.id, parse_matchers(silence.matchers)))
        except MatcherError as exc:  # stored before a rule it breaks: it mutes nothing, the cycle goes on
            log.warning("silence %s is ignored: %s; expire it and create it again", silence.id, exc)
    for alert in alerts:
        before = alert.silenced_by
        alert.silenced_by = None
        if alert.state == "firing":
            for silence_id, matchers in parsed:
                if matches_all(matchers, alert.labels):
                    alert.silenced_by = silence_id
                    break
        alert.changed = alert.changed or before != alert.silenced_by


def apply_inhibition(alerts: Sequence[AlertRow], routing: Routing) -> None:
    """Set `inhibited_by` (the source muting each alert, or None) and each source's `impact`."""
    firing = [a for a in alerts if a.state == "firing"]
    verdict: dict[str, str | None] = {a.fingerprint: None for a in alerts}
    covered: dict[str, dict[str, AlertRow]] = defaultdict(dict)
    for rule in routing.inhibit_rules:
        # Per `equal` key, the source that went pending first: the earliest possible cause.
        sources: dict[tuple[str, ...], AlertRow] = {}
        for alert in sorted(firing, key=lambda a: a.pending_since):
            if matches_all(rule.source_matchers, alert.labels):
                sources.setdefault(tuple(alert.labels.get(n, "") for n in rule.equal), alert)
        if not sources:
            continue
        for alert in firing:
            if not matches_all(rule.target_matchers, alert.labels):
                continue
            source = sources.get(tuple(alert.labels.get(n, "") for n in rule.equal))
            if source is None or source.fingerprint == alert.fingerprint:
                continue
            if rule.only_after_source and alert.pending_since < source.pending_since:
                continue
            covered[source.fingerprint].setdefault(alert.fingerprint, alert)
            if verdict[alert.fingerprint] is None and not rule.still_told(alert.labels):
                verdict[alert.fingerprint] = source.fingerprint
    for alert in alerts:
        if alert.inhibited_by != verdict[alert.fingerprint]:
            alert.inhibited_by = verdict[alert.fingerprint]
            alert.changed = True
        alert.impact = (
            impact_of(covered[alert.fingerprint].values()) if alert.fingerprint in covered else None
        )


# ---------------------------------------------------------------------------------------------
# 3 and 4. Groups and notifications (pure)


@dataclass(slots=True)
class _Group:
    match: RouteMatch
    labels: dict[str, str]
    alerts: list[AlertRow] = field(default_factory=list)


def route_groups(alerts: Iterable[AlertRow], routing: Routing) -> dict[tuple[str, str], _Group]:
    groups: dict[tuple[str, str], _Group] = {}
    for alert in alerts:
        if alert.state != "firing" or alert.silenced_by is not None or alert.inhibited_by is not None:
            continue
        for match in routing.receivers_for(alert.labels):
            key, labels = _group_key(match, alert.labels)
            group = groups.setdefault((match.receiver, key), _Group(match, labels))
            group.alerts.append(alert)
    return groups


DetailsOf = Callable[[AlertRow], tuple[tuple[PartitionDetail, ...], int]]
"""An alert's worst partitions and how many are flagged (`PartitionDetails.for_alert`)."""


def notified_as(alert: AlertRow) -> str:
    """What `alert_groups.notified` remembers of a firing alert, to tell news from old news: its
    severity, and the kinds of consequence it covers as an inhibition source."""
    covered = signature(alert.impact)
    return f"{alert.severity};impact={covered}" if covered else alert.severity


class Planner:
    """Decides the notifications of one cycle from the groups and their incidents.

    `details` gives a consumer group alert's partitions; it is asked only for alerts that are
    about to be notified (once per alert and cycle).
    """

    def __init__(
        self, routing: Routing, now: datetime, external_url: str, details: DetailsOf | None = None
    ) -> None:
        self.routing = routing
        self.now = now
        self.external_url = external_url.rstrip("/")
        self.notifications: list[Notification] = []
        self._details = details
        self._views: dict[str, AlertView] = {}

    def view(self, alert: AlertRow) -> AlertView:
        """The firing alert as notifications show it, with its partitions."""
        if alert.fingerprint not in self._views:
            partitions, total = self._details(alert) if self._details else ((), 0)
            self._views[alert.fingerprint] = alert.view(partitions=partitions, partitions_total=total)
        return self._views[alert.fingerprint]

    def _kind_of(self, receiver: str) -> str:
        config = self.routing.receiver_configs.get(receiver, {})
        return next((k for k in config if k != "name"), "")

    def _notify(
        self,
        row: GroupRow,
        kind: NotificationKind,
        alerts: Sequence[AlertView],
        receiver: str | None = None,
        dedup_key: str | None = None,
    ) -> None:
        self.notifications.append(
            Notification(
                receiver=receiver or row.receiver,
                kind=kind,
                severity=most_severe(a.severity for a in alerts) if alerts else row.severity,
                group_key=row.group_key,
                group_labels=dict(row.group_labels),
                dedup_key=dedup_key or row.dedup_key,
                alerts=tuple(alerts),
                created_at=self.now,
                ack_url=f"{self.external_url}/ack/{row.ack_token}",
                extra={"acknowledged_by": row.acknowledged_by or ""} if row.acknowledged_by else {},
            )
        )

    def new_group(self, receiver: str, key: str, group: _Group) -> GroupRow:
        token = secrets.token_urlsafe(18)
        return GroupRow(
            id=None,
            receiver=receiver,
            group_key=key,
            group_labels=group.labels,
            route_path=group.match.route_path,
            dedup_key="kh-" + hashlib.sha256(f"{receiver}\x1f{key}\x1f{token}".encode()).hexdigest()[:32],
            ack_token=token,
            severity=most_severe(a.severity for a in group.alerts),
            created_at=self.now,
        )

    def plan_open(self, row: GroupRow, group: _Group, resolved: Sequence[AlertView] = ()) -> None:
        """`resolved`: alerts of the group's last notice that have resolved since (while others
        still fire); the next notice lists them, where the route sends resolved notices."""
        match = group.match
        firing = {a.fingerprint: notified_as(a) for a in group.alerts}
        ordered = sorted(group.alerts, key=_alert_order)

        def views() -> list[AlertView]:
            return [self.view(a) for a in ordered]

        told_resolved = list(resolved) if match.send_resolved and not self._is_pager(row.receiver) else []
        row.severity = most_severe(a.severity for a in group.alerts)
        sent = False
        if row.first_notified_at is None:
            if self.now >= row.created_at + timedelta(seconds=match.group_wait):
                self._notify(row, "firing", views())
                row.first_notified_at = self.now
                sent = True
        else:
            assert row.last_notified_at is not None
            news = bool(told_resolved) or any(row.notified.get(fp) != sig for fp, sig in firing.items())
            since = (self.now - row.last_notified_at).total_seconds()
            if news and since >= match.group_interval:
                self._notify(row, "firing", [*views(), *told_resolved])
                sent = True
            elif row.acknowledged_at is None and since >= match.repeat_interval:
                self._notify(row, "repeat", [*views(), *told_resolved])
                sent = True
        if sent:
            row.last_notified_at = self.now
            row.notified = firing
        if (
            row.acknowledged_at is None
            and row.escalated_at is None
            and match.escalate_to
            and match.escalate_after is not None
            and row.first_notified_at is not None
            and row.severity == "warning"
            and (self.now - row.first_notified_at).total_seconds() >= match.escalate_after
        ):
            self._notify(
                row, "escalation", views(), receiver=match.escalate_to, dedup_key=row.dedup_key + ":esc"
            )
            row.escalated_at, row.escalated_to = self.now, match.escalate_to
        self._pass_on_ack(row, views)

    def _pass_on_ack(self, row: GroupRow, views: Callable[[], list[AlertView]]) -> None:
        if row.acknowledged_at is None or row.ack_notified_at is not None or row.first_notified_at is None:
            return
        self._notify(row, "acknowledge", views())
        if row.escalated_to:
            self._notify(
                row, "acknowledge", views(), receiver=row.escalated_to, dedup_key=row.dedup_key + ":esc"
            )
        row.ack_notified_at = self.now

    def _is_pager(self, receiver: str) -> bool:
        return self._kind_of(receiver) in PAGER_KINDS

    def plan_closed(self, row: GroupRow, resolved: Sequence[AlertView], send_resolved: bool) -> None:
        """Nothing of the group fires unmuted any more: close the incident."""
        row.closed_at = self.now
        if row.first_notified_at is None or not resolved:
            return
        if send_resolved or self._is_pager(row.receiver):
            self._notify(row, "resolved", resolved)
        if row.escalated_to:
            self._notify(
                row, "resolved", resolved, receiver=row.escalated_to, dedup_key=row.dedup_key + ":esc"
            )


def _alert_order(alert: AlertRow) -> tuple[int, str]:
    return (-SEVERITY_RANK.get(alert.severity, 0), alert.entity_key)


# ---------------------------------------------------------------------------------------------
# The cycle against the database


_OPEN_FINDINGS = text(
    "SELECT rule, entity, entity_key, cluster, labels, severity, value, summary, description, runbook,"
    " state FROM findings WHERE state <> 'resolved'"
)
_OPEN_ALERTS = text("SELECT * FROM alerts WHERE state <> 'resolved'")
_OPEN_GROUPS = text("SELECT * FROM alert_groups WHERE closed_at IS NULL")
_ACTIVE_SILENCES = text(
    "SELECT id, matchers FROM silences WHERE starts_at <= :now AND ends_at > :now AND expired_at IS NULL"
    " ORDER BY id"
)


def _alert_from_row(r: Any) -> AlertRow:
    return AlertRow(
        id=r["id"],
        fingerprint=r["fingerprint"],
        rule=r["rule"],
        cluster=r["cluster"],
        entity=r["entity"],
        entity_key=r["entity_key"],
        labels=dict(r["labels"]),
        severity=r["severity"],
        state=r["state"],
        summary=r["summary"],
        description=r["description"],
        value=r["value"],
        runbook=r["runbook"],
        pending_since=r["pending_since"],
        starts_at=r["starts_at"],
        resolved_at=r["resolved_at"],
        silenced_by=r["silenced_by"],
        inhibited_by=r["inhibited_by"],
    )


def _group_from_row(r: Any) -> GroupRow:
    values = {k: r[k] for k in GroupRow.__dataclass_fields__}
    values["group_labels"] = dict(values["group_labels"])
    values["notified"] = dict(values["notified"])
    return GroupRow(**values)


_ALERT_COLUMNS = (
    "fingerprint, rule, cluster, entity, entity_key, labels, severity, state, summary, description, value,"
    " runbook, pending_since, starts_at, resolved_at, updated_at, silenced_by, inhibited_by"
)


def _alert_params(a: AlertRow, now: datetime) -> dict[str, Any]:
    return {
        "id": a.id,
        "fingerprint": a.fingerprint,
        "rule": a.rule,
        "cluster": a.cluster,
        "entity": a.entity,
        "entity_key": a.entity_key,
        "labels": json.dumps(a.labels),
        "severity": a.severity,
        "state": a.state,
        "summary": a.summary,
        "description": a.description,
        "value": a.value,
        "runbook": a.runbook,
        "pending_since": a.pending_since,
        "starts_at": a.starts_at,
        "resolved_at": a.resolved_at,
        "updated_at": now,
        "silenced_by": a.silenced_by,
        "inhibited_by": a.inhibited_by,
    }


def _write_alerts(conn: Connection, alerts: Iterable[AlertRow], now: datetime) -> None:
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for alert in alerts:
        if alert.id is None:
            inserts.append(_alert_params(alert, now))
        elif alert.changed:
            updates.append(_alert_params(alert, now))
    if inserts:
        conn.execute(
            text(
                f"INSERT INTO alerts ({_ALERT_COLUMNS})"
                " VALUES (:fingerprint, :rule, :cluster, :entity, :entity_key,"
                " CAST(:labels AS jsonb), :severity, :state, :summary, :description, :value, :runbook,"
                " :pending_since, :starts_at, :resolved_at, :updated_at, :silenced_by, :inhibited_by)"
            ),
            inserts,
        )
    if updates:
        conn.execute(
            text(
                "UPDATE alerts SET labels = CAST(:labels AS jsonb), severity = :severity, state = :state,"
                " summary = :summary, description = :description, value = :value, runbook = :runbook,"
                " starts_at = :starts_at, resolved_at = :resolved_at, updated_at = :updated_at,"
                " silenced_by = :silenced_by, inhibited_by = :inhibited_by WHERE id = :id"
            ),
            updates,
        )


def _group_params(g: GroupRow) -> dict[str, Any]:
    values = {k: getattr(g, k) for k in GroupRow.__dataclass_fields__}
    values["group_labels"] = json.dumps(g.group_labels)
    values["notified"] = json.dumps(g.notified)
    return values


def _write_groups(conn: Connection, groups: Iterable[GroupRow]) -> None:
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for group in groups:
        (inserts if group.id is None else updates).append(_group_params(group))
    columns = [c for c in GroupRow.__dataclass_fields__ if c != "id"]
    if inserts:
        values = ", ".join(
            f"CAST(:{c} AS jsonb)" if c in ("group_labels", "notified") else f":{c}" for c in columns
        )
        conn.execute(text(f"INSERT INTO alert_groups ({', '.join(columns)}) VALUES ({values})"), inserts)
    if updates:
        sets = ", ".join(
            f"{c} = CAST(:{c} AS jsonb)" if c in ("group_labels", "notified") else f"{c} = :{c}"
            for c in columns
            if c not in ("receiver", "group_key", "dedup_key", "ack_token", "created_at")
        )
        conn.execute(text(f"UPDATE alert_groups SET {sets} WHERE id = :id"), updates)


def run_cycle(conn: Connection, routing: Routing, now: datetime, external_url: str) -> CycleResult:
    """One alert cycle inside the caller's transaction (which must commit for any of it to count)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LIFECYCLE_LOCK})
    findings = [dict(r._mapping) for r in conn.execute(_OPEN_FINDINGS)]
    open_alerts = {r.fingerprint: _alert_from_row(r._mapping) for r in conn.execute(_OPEN_ALERTS)}
    current, resolved_now = merge_alerts(open_alerts, findings, routing, now)
    silences = [
        SilenceRow(int(r.id), tuple(r.matchers)) for r in conn.execute(_ACTIVE_SILENCES, {"now": now})
    ]
    alerts = list(current.values())
    apply_silences(alerts, silences)
    apply_inhibition(alerts, routing)

    partitions = PartitionDetails(conn, now)
    planner = Planner(
        routing, now, external_url, lambda a: partitions.for_alert(a.entity, a.cluster, a.labels)
    )
    groups = route_groups(alerts, routing)
    rows = {
        (g.receiver, g.group_key): g
        for g in map(_group_from_row, (r._mapping for r in conn.execute(_OPEN_GROUPS)))
    }
    result = CycleResult()
    touched: list[GroupRow] = []
    known = {**current, **{a.fingerprint: a for a in resolved_now}}
    for key, group in groups.items():
        row = rows.pop(key, None)
        if row is None:
            row = planner.new_group(key[0], key[1], group)
            result.groups_opened += 1
        still = {a.fingerprint for a in group.alerts}
        planner.plan_open(
            row, group, _resolved_views(conn, known, [fp for fp in row.notified if fp not in still], now)
        )
        touched.append(row)

    for row in rows.values():
        # The group no longer has an unmuted firing alert.
        views = _resolved_views(conn, known, list(row.notified), now)
        match = _route_of(routing, row)
        planner.plan_closed(row, views, send_resolved=match.send_resolved if match else True)
        result.groups_closed += 1
        touched.append(row)

    _write_alerts(conn, [*alerts, *resolved_now], now)
    _write_groups(conn, touched)
    for notification in planner.notifications:
        enqueue(conn, notification, now)
    result.notifications = planner.notifications
    counts: dict[str, int] = defaultdict(int)
    for alert in alerts:
        counts[alert.state] += 1
        counts["silenced"] += alert.silenced_by is not None
        counts["inhibited"] += alert.inhibited_by is not None
    counts["resolved"] = len(resolved_now)
    result.alerts = dict(counts)
    return result


def _resolved_views(
    conn: Connection, known: Mapping[str, AlertRow], fingerprints: Iterable[str], now: datetime
) -> list[AlertView]:
    """The alerts among `fingerprints` that really resolved, as resolved views. Muted alerts still
    fire, and a re-rated alert fires in another group: neither is announced as resolved."""
    views = []
    for fp in fingerprints:
        alert = known.get(fp) or _last_alert(conn, fp)
        if alert is not None and alert.state == "resolved":
            views.append(alert.view(ends_at=alert.resolved_at or now))
    return views


def _last_alert(conn: Connection, fp: str) -> AlertRow | None:
    row = conn.execute(
        text("SELECT * FROM alerts WHERE fingerprint = :fp ORDER BY id DESC LIMIT 1"), {"fp": fp}
    ).first()
    return _alert_from_row(row._mapping) if row is not None else None


def _route_of(routing: Routing, row: GroupRow) -> RouteMatch | None:
    for match in routing.receivers_for(row.group_labels):
        if match.receiver == row.receiver:
            return match
    return None
