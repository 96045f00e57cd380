"""Groups (step 3 of a cycle): every unmuted firing alert is routed (`Routing.receivers_for`);
per receiver it joins the group given by the route's `group_by` labels. An open `alert_groups`
row (`GroupRow`) is the incident of one group at one receiver.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from monitor.alert.alerts import AlertRow
from monitor.alert.config.routing import Routing
from monitor.alert.dispatch.route import GROUP_BY_ALL, RouteMatch
from monitor.core.vocabulary import SEVERITY_RANK


def group_key(match: RouteMatch, labels: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The key of an alert's group at the receiver of `match` (unique per route), and the labels
    that identify the group. A label the alert does not have is left out, not grouped as "": a
    partition alert's group is (cluster, rule) whether or not group_by also names group_id."""
    chosen = dict(sorted(match.group_labels(labels).items()))
    return f"{match.route_path}:{json.dumps(chosen, sort_keys=True)}", chosen


def most_severe(severities: Iterable[str]) -> str:
    return max(severities, key=lambda s: SEVERITY_RANK.get(s, 0), default="info")


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


@dataclass(slots=True)
class Group:
    """The unmuted firing alerts of one group at one receiver, this cycle (or, when nothing
    changed, the cycles since it was routed: `monitor.alert.memory`). What the planner reads of
    the alerts is worked out once per group, not at every cycle it is kept for."""

    match: RouteMatch
    labels: dict[str, str]
    alerts: list[AlertRow] = field(default_factory=list)
    _cached_for: list[AlertRow] | None = field(default=None, repr=False, compare=False)
    _severity: str | None = field(default=None, repr=False, compare=False)
    _ordered: list[AlertRow] | None = field(default=None, repr=False, compare=False)
    _signatures: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _fingerprints: frozenset[str] | None = field(default=None, repr=False, compare=False)

    def _current(self) -> None:
        """Drop what was worked out for another list of alerts (one assigned since)."""
        if self._cached_for is not self.alerts:
            self._cached_for = self.alerts
            self._severity = self._ordered = self._signatures = self._fingerprints = None

    def severity(self) -> str:
        """The most severe of the alerts' severities."""
        self._current()
        if self._severity is None:
            self._severity = most_severe(a.severity for a in self.alerts)
        return self._severity

    def fingerprints(self) -> frozenset[str]:
        self._current()
        if self._fingerprints is None:
            self._fingerprints = frozenset(a.fingerprint for a in self.alerts)
        return self._fingerprints

    def signatures(self, signature: Callable[[AlertRow], str]) -> dict[str, str]:
        """Each alert's `signature` (the planner's `notified_as`), by fingerprint."""
        self._current()
        if self._signatures is None:
            self._signatures = {a.fingerprint: signature(a) for a in self.alerts}
        return self._signatures

    def ordered(self) -> list[AlertRow]:
        """The alerts, most severe first, then by entity key (as notices list them)."""
        self._current()
        if self._ordered is None:
            self._ordered = sorted(self.alerts, key=_alert_order)
        return self._ordered


def route_groups(alerts: Iterable[AlertRow], routing: Routing) -> dict[tuple[str, str], Group]:
    """Every unmuted firing alert in the group of each receiver it is routed to, keyed by
    (receiver, group key)."""
    groups: dict[tuple[str, str], Group] = {}
    keys: dict[tuple[str, tuple[str, ...], tuple[str | None, ...]], tuple[str, dict[str, str]]] = {}
    """(route path, group_by, the values of those labels) -> group key and labels: thousands of
    alerts fall into a few groups, and a group's key is made once, not once per alert."""
    routed_by = routing.routed_by()
    routes: dict[tuple[str | None, ...], list[RouteMatch]] = {}
    """The receivers of alerts equal on the labels routing reads, found once."""
    for alert in alerts:
        if alert.state != "firing" or alert.silenced_by is not None or alert.inhibited_by is not None:
            continue
        labels = alert.labels
        routed = tuple([labels.get(name) for name in routed_by])
        matches = routes.get(routed)
        if matches is None:
            matches = routes[routed] = routing.receivers_for(labels)
        for match in matches:
            known = (match.route_path, match.group_by, _grouped_by(match, labels))
            found = keys.get(known)
            if found is None:
                found = keys[known] = group_key(match, labels)
            key = (match.receiver, found[0])
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(match, dict(found[1]))
            group.alerts.append(alert)
    return groups


def _alert_order(alert: AlertRow) -> tuple[int, str]:
    return (-SEVERITY_RANK.get(alert.severity, 0), alert.entity_key)


def _grouped_by(match: RouteMatch, labels: Mapping[str, str]) -> tuple[str | None, ...]:
    """The values of the labels that decide an alert's group at `match` (None: not there)."""
    if match.group_by == (GROUP_BY_ALL,):
        return tuple(item for pair in sorted(labels.items()) for item in pair)
    return tuple([labels.get(name) for name in match.group_by])
