"""Notices from the act stage (the retention button) delivered like alerts.

The act stage writes a `notices` row for what an owning team or the reviewers must hear (a raise
awaiting approval, applied, about to revert, reverted, failed); it may not import this stage, so
it never touches the outbox. Each alert cycle forwards the notices not yet forwarded: one
notification per receiver the routing picks for the labels `rule=RetentionRequest`, `cluster`,
`topic`, `severity` and the notice's `team` (so the team's own receivers from owners.yaml hear
it), written to the outbox in the cycle's transaction. The outbox row's group key,
`notice:<id>`, is what marks a notice as forwarded, so a notice is forwarded once however many
instances run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, text

from monitor.alert.config import Routing
from monitor.alert.model import AlertView, Notification
from monitor.alert.notify.outbox import enqueue

NOTICE_RULE = "RetentionRequest"
MAX_AGE = timedelta(days=2)
"""Older notices are not forwarded any more (a monitor that was down for days does not flood
the teams with stale news)."""

_PENDING = text(
    """
SELECT n.* FROM notices n
WHERE n.created_at >= :since
  AND NOT EXISTS (SELECT 1 FROM notification_outbox o WHERE o.group_key = 'notice:' || n.id)
ORDER BY n.id LIMIT :limit
"""
)


def forward_notices(conn: Connection, routing: Routing, now: datetime, limit: int = 200) -> int:
    """Enqueue the pending notices for their receivers; returns the notifications written. Call
    inside the alert cycle's transaction (its advisory lock keeps two instances apart)."""
    written = 0
    for notice in conn.execute(_PENDING, {"since": now - MAX_AGE, "limit": limit}):
        labels = {
            "rule": NOTICE_RULE,
            "cluster": notice.cluster,
            "topic": notice.topic,
            "severity": notice.severity,
            "kind": notice.kind,
        }
        if notice.team:
            labels["team"] = notice.team
        view = AlertView(
            fingerprint=f"notice-{notice.id}",
            rule=NOTICE_RULE,
            severity=notice.severity,
            state="firing",
            cluster=notice.cluster,
            entity="topic",
            entity_key=notice.topic,
            labels=labels,
            summary=notice.summary,
            description=notice.description,
            value=None,
            annotations={},
            starts_at=notice.created_at,
        )
        for match in routing.receivers_for(labels):
            notification = Notification(
                receiver=match.receiver,
                kind="firing",
                severity=notice.severity,
                group_key=f"notice:{notice.id}",
                group_labels=labels,
                dedup_key=f"notice-{notice.id}",
                alerts=(view,),
                created_at=now,
            )
            enqueue(conn, notification, now)
            written += 1
    return written
