"""Notifications (step 4 of a cycle), per group: Alertmanager's timing plus acknowledgement and
escalation.

First notice after `group_wait`; news after `group_interval`: new or re-rated alerts, a new kind
of impact, and alerts of the group that resolved while others still fire (listed as resolved in
the next notice, Alertmanager's send_resolved; not to a pager, whose incident is the group's and
resolves with it); a repeat after `repeat_interval` unless acknowledged; an unacknowledged warning
that outlasts `escalate_after` is sent to `escalate_to` (the pager) once; an acknowledgement is
passed on once (the pager stops escalating); when nothing in the group fires any more the
incident closes with a resolved notice where the route asks for one (always to a pager, so its
incident closes).

A notice about consumer groups lists each alert's worst partitions (status, since, lag, time
until data loss: `monitor.alert.details`), read from the newest evaluation when it is decided.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from monitor.alert.alerts import AlertRow
from monitor.alert.config.routing import Routing
from monitor.alert.dispatch.groups import Group, GroupRow, most_severe
from monitor.alert.model import AlertView, Notification, NotificationKind, PartitionDetail
from monitor.alert.mute.impact import signature
from monitor.alert.receivers.registry import REGISTRY, kinds_in

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

    def new_group(self, receiver: str, key: str, group: Group) -> GroupRow:
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

    def plan_open(self, row: GroupRow, group: Group, resolved: Sequence[AlertView] = ()) -> None:
        """`resolved`: alerts of the group's last notice that have resolved since (while others
        still fire); the next notice lists them, where the route sends resolved notices."""
        match = group.match
        firing = group.signatures(notified_as)

        def views() -> list[AlertView]:
            return [self.view(a) for a in group.ordered()]

        told_resolved = list(resolved) if match.send_resolved and not self._is_pager(row.receiver) else []
        row.severity = group.severity()
        sent = False
        if row.first_notified_at is None:
            if self.now >= row.created_at + timedelta(seconds=match.group_wait):
                self._notify(row, "firing", views())
                row.first_notified_at = self.now
                sent = True
        else:
            assert row.last_notified_at is not None
            news = bool(told_resolved) or (
                row.notified != firing and any(row.notified.get(fp) != sig for fp, sig in firing.items())
            )
            since = (self.now - row.last_notified_at).total_seconds()
            if news and since >= match.group_interval:
                self._notify(row, "firing", [*views(), *told_resolved])
                sent = True
            elif row.acknowledged_at is None and since >= match.repeat_interval:
                self._notify(row, "repeat", [*views(), *told_resolved])
                sent = True
        if sent:
            row.last_notified_at = self.now
            row.notified = dict(firing)
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
        """Whether the receiver keeps an incident that only a resolved notice closes."""
        kinds = kinds_in(self.routing.receiver_configs.get(receiver, {}))
        return bool(kinds) and REGISTRY[kinds[0]].incidents

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
