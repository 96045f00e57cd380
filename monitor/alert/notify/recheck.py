"""The re-check of a due notification: a notice is decided by one alert cycle and sent by the
sender some seconds later, after a retry even minutes later; what it announces is checked against
the alerts as they are when it is sent, and a notice no longer true is `dropped` with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from sqlalchemy import Connection, text

from monitor.alert.model import Notification
from monitor.alert.notify.outbox import NOTIFICATIONS, Claimed, log_attempt


class DropReason(StrEnum):
    """Why a due notification was not sent (the `reason` of its `dropped` log row)."""

    ALL_RESOLVED = "all_resolved"
    """Every alert it announced as firing resolved after it was decided (a "no members" notice
    for a group that came back meanwhile): the group's resolved notice follows, or nothing."""
    NEVER_ANNOUNCED = "never_announced"
    """A resolved notice for an incident of which nothing was ever sent to this receiver (its
    firing notice was dropped or failed): there is nothing to resolve for the people told."""


ANNOUNCING_KINDS = frozenset({"firing", "repeat", "escalation"})
"""The kinds that tell people something fires (and so have something to resolve)."""


def stale_reason(notification: Notification, states: Mapping[str, str], announced: bool) -> DropReason | None:
    """Whether a due notification is no longer true (pure).

    `states`: the current state of each alert of the notification, by fingerprint, for those
    that have an alert row (a notice of the retention button has none, and is always true);
    `announced`: whether a notice that announces firing alerts was sent on its (receiver,
    dedup_key) before.
    """
    if notification.kind in ANNOUNCING_KINDS:
        firing = [a.fingerprint for a in notification.firing]
        if firing and all(states.get(fp) == "resolved" for fp in firing):
            return DropReason.ALL_RESOLVED
    if notification.kind == "resolved" and not announced:
        return DropReason.NEVER_ANNOUNCED
    return None


_ALERT_STATES = text(
    """
SELECT DISTINCT ON (a.fingerprint) a.fingerprint,
       CASE WHEN a.state = 'resolved' OR NOT EXISTS (
                SELECT 1 FROM findings f
                WHERE f.rule = a.rule AND f.entity_key = a.entity_key AND f.state <> 'resolved')
            THEN 'resolved' ELSE a.state END AS state
FROM alerts a WHERE a.fingerprint = ANY(:fps) ORDER BY a.fingerprint, a.id DESC
"""
)
"""The state of each alert now: resolved when its row is, or when its finding has resolved and
the alert cycle has not caught up yet (the evaluation that saw the group come back ran after
the cycle that decided the notice)."""
_ANNOUNCED = text(
    "SELECT EXISTS (SELECT 1 FROM notification_outbox WHERE receiver = :receiver AND dedup_key = :dedup_key"
    " AND id < :id AND state = 'sent' AND kind = ANY(:kinds))"
)


def recheck(conn: Connection, item: Claimed, notification: Notification) -> DropReason | None:
    """`stale_reason` against the alerts and the outbox as they are now."""
    fps = [a.fingerprint for a in notification.alerts]
    states = {str(r.fingerprint): str(r.state) for r in conn.execute(_ALERT_STATES, {"fps": fps})}
    announced = True
    if notification.kind == "resolved":
        params = {
            "receiver": item.receiver,
            "dedup_key": item.dedup_key,
            "id": item.id,
            "kinds": sorted(ANNOUNCING_KINDS),
        }
        announced = bool(conn.execute(_ANNOUNCED, params).scalar())
    return stale_reason(notification, states, announced)


def drop(
    conn: Connection, item: Claimed, instance: str, reason: DropReason, now: datetime, alerts: int
) -> None:
    """Mark a claimed notification `dropped` and log why, in the caller's transaction."""
    conn.execute(
        text(
            "UPDATE notification_outbox SET state = 'dropped', claimed_by = NULL, claimed_until = NULL,"
            " last_error = :reason WHERE id = :id AND claimed_by = :me AND state = 'sending'"
        ),
        {"reason": f"dropped: {reason.value}", "id": item.id, "me": instance},
    )
    log_attempt(conn, item, instance, now, "dropped", None, reason.value, alerts)
    NOTIFICATIONS.labels(item.receiver, "dropped").inc()
