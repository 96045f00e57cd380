"""Step 1 of a cycle with a memory: the open alerts as the last committed cycle left them, kept
between cycles, so a cycle reads again only the findings of the clusters an evaluation changed
since (`monitor.store.changes`) and merges only those.

At 115,000 open findings, reading them and every open alert and merging the two took about 4.5 s
of a 6-7 s cycle (docs/bench/alerts.md), at every tick, though the findings change only when an
evaluation merges new ones. With the memory a tick with no new evaluation reads none of them, and
one after an evaluation of one cluster reads and merges that cluster's.

The memory is what the store holds, or nothing:
- it is taken only after the cycle's transaction committed (`committed`, which `AlertStage`
  calls then): what a cycle that did not commit staged is never used, the next cycle reads
  everything;
- every cycle raises the `alerts` counter, so a cycle of another instance (a lease that moved)
  makes this one's memory stale, and the next cycle here reads everything again (a full read);
- so does a change of the teams in owners.yaml, which label the alerts;
- and every `READ_ALL_EVERY` (ten minutes) a cycle reads everything anyway.

The full read is the reference: a test runs the same cycles with and without a memory and
requires the same alerts, incidents and notifications (tests/integration/test_alert_memory.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.alert import state
from monitor.alert.alerts import AlertRow, merge_alerts
from monitor.alert.config.routing import Routing
from monitor.alert.dispatch.groups import Group, route_groups
from monitor.alert.mute.inhibit import apply_inhibition
from monitor.alert.mute.silence import SilenceRow, apply_silences
from monitor.core.owners import Team
from monitor.store import changes

READ_ALL_EVERY = timedelta(minutes=10)
"""How long the memory is used before a cycle reads every open finding and alert again: only the
evaluation's merges and the alert cycles write them, and both raise their counters, but a row
changed by hand in an incident (or by a writer of an older version) is then taken up within
this time. At 100,000 open findings that is one cycle of about 5 s in ten minutes."""


@dataclass(slots=True)
class Merged:
    """What step 1 gives the rest of a cycle, and what it read."""

    current: dict[str, AlertRow]
    """The open alerts after this cycle's findings, by fingerprint."""
    resolved: list[AlertRow]
    """The alerts resolved now."""
    full: bool
    """Whether every open finding and alert was read (no usable memory)."""
    findings_read: int
    clusters_read: tuple[str, ...] = ()
    """The clusters whose findings were read again (a read from memory)."""
    regroup: bool = True
    """Whether muting and routing must run again: an alert is new or resolved, or changed in what
    they read (its labels, severity or state), or the alerts were all read. A finding's value and
    texts move at each evaluation (the lag, the time until data loss) and change none of it."""


@dataclass(frozen=True, slots=True)
class Routed:
    """A cycle's groups and what they were muted and routed with."""

    groups: dict[tuple[str, str], Group]
    routing: Routing
    silences: tuple[SilenceRow, ...]


@dataclass(slots=True)
class _Kept:
    alerts: dict[str, AlertRow]
    findings: dict[str, int]
    teams: tuple[Team, ...]
    read_all_at: datetime
    groups: Routed | None = None


@dataclass(slots=True)
class CycleMemory:
    """The open alerts of the last committed cycle and the counters they are as of; and its
    groups, with the routing and the silences they were muted and routed with."""

    alerts: dict[str, AlertRow] | None = None
    """The open alerts by fingerprint; None: nothing kept, the next cycle reads everything."""
    findings: dict[str, int] = field(default_factory=dict)
    """The findings counter of each cluster (by subject) the alerts were merged from."""
    alerts_version: int | None = None
    """The `alerts` counter the last cycle here set."""
    teams: tuple[Team, ...] | None = None
    """The teams the alerts were labelled with."""
    groups: Routed | None = None
    read_all_at: datetime | None = None
    """When the alerts kept were last read whole from the store."""
    read_all_every: timedelta = READ_ALL_EVERY
    _pending: _Kept | None = None

    def forget(self) -> None:
        """Keep nothing (a cycle failed, or its transaction did not commit)."""
        self.alerts, self.findings, self.alerts_version = None, {}, None
        self.teams, self.groups, self.read_all_at, self._pending = None, None, None, None

    def usable(self, counters: dict[str, int], routing: Routing, now: datetime) -> bool:
        """Whether the kept alerts are what the store holds: the last cycle here committed (a
        cycle staged and never committed may have changed them), no cycle ran elsewhere since,
        the teams are the same, and they were read whole less than `read_all_every` ago."""
        return (
            self._pending is None
            and self.alerts is not None
            and self.alerts_version == counters.get(changes.ALERTS)
            and self.teams == routing.teams
            and self.read_all_at is not None
            and timedelta(0) <= now - self.read_all_at < self.read_all_every
        )

    def stage(
        self, current: dict[str, AlertRow], counters: dict[str, int], routing: Routing, read_all_at: datetime
    ) -> None:
        """What the cycle's step 1 leaves, kept once its transaction commits (`committed`)."""
        self._pending = _Kept(current, changes.of_findings(counters), routing.teams, read_all_at)

    def route(
        self, merged: Merged, routing: Routing, silences: Sequence[SilenceRow]
    ) -> dict[tuple[str, str], Group]:
        """Steps 2 and 3 on the alerts of `merged`: muted by `silences` and the inhibition rules,
        and routed into groups; or the groups of the last cycle, when it read from this memory,
        nothing changed in step 1 that they read (`Merged.regroup`) and the routing and the
        active silences are the same (then muting and routing would give the same again). The
        kept groups hold the same alert objects, with this cycle's values."""
        assert self._pending is not None, "stage first"
        kept = self.groups
        alerts = list(merged.current.values())
        if (
            kept is not None
            and not merged.full
            and kept.routing == routing
            and kept.silences == tuple(silences)
            and not merged.regroup
        ):
            self._pending.groups = kept
            return kept.groups
        apply_silences(alerts, silences)
        apply_inhibition(alerts, routing.inhibit_rules)
        groups = route_groups(alerts, routing)
        self._pending.groups = Routed(groups, routing, tuple(silences))
        return groups

    def committed(self, alerts_version: int) -> None:
        """The cycle's transaction committed, having set the `alerts` counter to `alerts_version`."""
        if self._pending is None:
            self.forget()
            return
        kept, self._pending = self._pending, None
        self.alerts, self.findings, self.teams, self.groups = (
            kept.alerts,
            kept.findings,
            kept.teams,
            kept.groups,
        )
        self.alerts_version, self.read_all_at = alerts_version, kept.read_all_at


def merge(conn: Connection, routing: Routing, now: datetime, memory: CycleMemory) -> Merged:
    """Step 1: the open alerts after the findings, from the store or from `memory`. Reads the
    counters before the rows (`monitor.store.changes`) and stages them in `memory`."""
    counters = changes.versions(conn)
    if not memory.usable(counters, routing, now):
        open_alerts = state.open_alerts(conn)
        findings = state.open_findings(conn)
        current, resolved = _merge(conn, routing, now, open_alerts, findings)
        memory.stage(current, counters, routing, now)
        return Merged(current, resolved, True, len(findings))
    assert memory.alerts is not None and memory.read_all_at is not None
    moved = sorted(
        cluster
        for subject, version in counters.items()
        if (cluster := changes.cluster_of(subject)) is not None and memory.findings.get(subject) != version
    )
    current, resolved, read, regroup = _merge_clusters(conn, routing, now, memory.alerts, moved)
    memory.stage(current, counters, routing, memory.read_all_at)
    return Merged(current, resolved, False, read, tuple(moved), regroup)


def _merge_clusters(
    conn: Connection,
    routing: Routing,
    now: datetime,
    kept: dict[str, AlertRow],
    clusters: Collection[str],
) -> tuple[dict[str, AlertRow], list[AlertRow], int, bool]:
    """The kept alerts of the other clusters as they were, those of `clusters` merged with their
    open findings read again; how many findings were read; and whether to regroup
    (`Merged.regroup`)."""
    current: dict[str, AlertRow] = {}
    open_alerts: dict[str, AlertRow] = {}
    for fp, alert in kept.items():
        if alert.cluster in clusters:
            open_alerts[fp] = alert
        else:
            alert.changed = False  # written by the cycle that changed it
            current[fp] = alert
    findings = state.open_findings(conn, clusters) if clusters else []
    before = {fp: _routed_by(alert) for fp, alert in open_alerts.items()}
    merged, resolved = _merge(conn, routing, now, open_alerts, findings)
    regroup = bool(resolved) or any(before.get(fp) != _routed_by(alert) for fp, alert in merged.items())
    current.update(merged)
    return current, resolved, len(findings), regroup


def _routed_by(alert: AlertRow) -> tuple[dict[str, str], str]:
    """What muting and routing read of an alert that a merge may change: its labels (which hold
    its severity) and its state (its `pending_since`, which inhibition reads too, is set once)."""
    return alert.labels, alert.state


def _merge(
    conn: Connection,
    routing: Routing,
    now: datetime,
    open_alerts: dict[str, AlertRow],
    findings: list[dict[str, object]],
) -> tuple[dict[str, AlertRow], list[AlertRow]]:
    open_keys = {(str(f["rule"]), str(f["entity_key"])) for f in findings}
    reasons = state.resolved_reasons(
        conn, (a for a in open_alerts.values() if (a.rule, a.entity_key) not in open_keys)
    )
    return merge_alerts(open_alerts, findings, routing.team_for, now, reasons)
