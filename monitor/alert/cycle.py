"""One alert cycle: findings -> alerts -> muted or not -> groups per receiver -> notifications.

The steps, each in its own module, in the order `run_cycle` runs them:

1. alerts from findings             `monitor.alert.alerts.merge_alerts`, of the clusters whose
                                     findings changed when the cycle has a memory
                                     (`monitor.alert.memory`)
2. muting: silences, inhibition     `monitor.alert.mute.silence`, `monitor.alert.mute.inhibit`
3. groups per receiver              `monitor.alert.dispatch.groups.route_groups`
4. notifications per group          `monitor.alert.dispatch.planner.Planner`
   (timing, escalation, acknowledgement, closing)
5. record: alerts, incidents, and the outbox rows the sender delivers (`monitor.alert.notify`)

Everything a cycle decides, the alerts, the groups and the outbox rows, is written in one
transaction under an advisory lock (`monitor.alert.state`, which holds every statement of the
cycle), so two daemons never decide the same notification twice and a crash leaves either all of
it or none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy import Connection

from monitor.alert import state
from monitor.alert.alerts import AlertRow
from monitor.alert.config.routing import Routing
from monitor.alert.details import PartitionDetails
from monitor.alert.dispatch.groups import Group, GroupRow
from monitor.alert.dispatch.planner import Planner
from monitor.alert.dispatch.route import RouteMatch
from monitor.alert.memory import CycleMemory, merge
from monitor.alert.model import AlertView, Notification
from monitor.alert.notify.outbox import enqueue_all
from monitor.core.gc_pause import gc_paused
from monitor.store import changes


@dataclass(slots=True)
class CycleResult:
    alerts: dict[str, int] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)
    groups_opened: int = 0
    groups_closed: int = 0
    alerts_version: int = 0
    """The `alerts` change counter this cycle set (monitor.store.changes)."""
    full_read: bool = True
    """Whether the cycle read every open finding and alert (no usable memory)."""
    findings_read: int = 0
    clusters_read: tuple[str, ...] = ()
    """The clusters whose findings a cycle with a memory read again."""


def run_cycle(
    conn: Connection,
    routing: Routing,
    now: datetime,
    external_url: str,
    memory: CycleMemory | None = None,
) -> CycleResult:
    """One alert cycle inside the caller's transaction (which must commit for any of it to count).

    `memory` (`monitor.alert.memory`) keeps the open alerts between cycles: the caller calls its
    `committed` with the result's `alerts_version` once the transaction commits; a memory whose
    cycle did not commit is not used (the next cycle reads everything). Without one, each cycle
    reads every open finding and alert.

    Python's cyclic garbage collector is held off meanwhile (`monitor.core.gc_pause`): the tens of
    thousands of rows and alerts a big cycle makes would otherwise set off full collections that
    walk every object of the daemon, for nothing to free (about a third of a 10,000-alert cycle)."""
    with gc_paused():
        return _run_cycle(conn, routing, now, external_url, memory if memory is not None else CycleMemory())


def _run_cycle(
    conn: Connection, routing: Routing, now: datetime, external_url: str, memory: CycleMemory
) -> CycleResult:
    state.lock(conn)
    # 1. Alerts from findings.
    merged = merge(conn, routing, now, memory)
    current, resolved = merged.current, merged.resolved
    alerts = list(current.values())
    # 2. Muting and 3. groups (those of the last cycle when nothing they depend on changed).
    groups = memory.route(merged, routing, state.active_silences(conn, now))
    # 4. Notifications.
    partitions = PartitionDetails(conn, now)
    planner = Planner(
        routing, now, external_url, lambda a: partitions.for_alert(a.entity, a.cluster, a.labels)
    )
    known = {**current, **{a.fingerprint: a for a in resolved}}
    result = CycleResult()
    open_groups = state.open_groups(conn)
    read = {row.id: replace(row) for row in open_groups.values()}
    touched = _plan(conn, planner, groups, open_groups, known, now, result)
    # 5. Record: what changed (a quiet incident of 100,000 alerts is not written again each cycle).
    state.write_alerts(conn, [*alerts, *resolved], now)
    state.write_groups(conn, [row for row in touched if row.id is None or row != read.get(row.id)])
    enqueue_all(conn, planner.notifications, now)
    result.alerts_version = changes.raise_versions(conn, [changes.ALERTS])[changes.ALERTS]
    result.notifications = planner.notifications
    result.alerts = _counts(alerts, resolved)
    result.full_read = merged.full
    result.findings_read = merged.findings_read
    result.clusters_read = merged.clusters_read
    return result


def _plan(
    conn: Connection,
    planner: Planner,
    groups: Mapping[tuple[str, str], Group],
    open_groups: dict[tuple[str, str], GroupRow],
    known: Mapping[str, AlertRow],
    now: datetime,
    result: CycleResult,
) -> list[GroupRow]:
    """Step 4 for every group that fires (opening its incident if needed) and every open incident
    whose group no longer has an unmuted firing alert (closing it); returns the incidents touched."""
    touched: list[GroupRow] = []
    for key, group in groups.items():
        row = open_groups.pop(key, None)
        if row is None:
            row = planner.new_group(key[0], key[1], group)
            result.groups_opened += 1
        left = row.notified.keys() - group.fingerprints()
        gone = [fp for fp in row.notified if fp in left] if left else []
        planner.plan_open(row, group, _resolved_views(conn, known, gone, now))
        touched.append(row)
    for row in open_groups.values():
        match = _route_of(planner.routing, row)
        views = _resolved_views(conn, known, list(row.notified), now)
        planner.plan_closed(row, views, send_resolved=match.send_resolved if match else True)
        result.groups_closed += 1
        touched.append(row)
    return touched


def _resolved_views(
    conn: Connection, known: Mapping[str, AlertRow], fingerprints: Iterable[str], now: datetime
) -> list[AlertView]:
    """The alerts among `fingerprints` that really resolved, as resolved views. Muted alerts still
    fire, and a re-rated alert fires in another group: neither is announced as resolved."""
    views = []
    for fp in fingerprints:
        alert = known.get(fp) or state.last_alert(conn, fp)
        if alert is not None and alert.state == "resolved":
            views.append(alert.view(ends_at=alert.resolved_at or now))
    return views


def _route_of(routing: Routing, row: GroupRow) -> RouteMatch | None:
    for match in routing.receivers_for(row.group_labels):
        if match.receiver == row.receiver:
            return match
    return None


def _counts(alerts: Sequence[AlertRow], resolved: list[AlertRow]) -> dict[str, int]:
    """The alerts of the cycle by state, and how many are silenced, inhibited and resolved now."""
    counts: Counter[str] = Counter(alert.state for alert in alerts)
    counts["silenced"] = sum(alert.silenced_by is not None for alert in alerts)
    counts["inhibited"] = sum(alert.inhibited_by is not None for alert in alerts)
    counts["resolved"] = len(resolved)
    return dict(counts)
