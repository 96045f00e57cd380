"""The notification outbox: its rows and every statement on them.

A notification is a row written in the transaction that decided it (`enqueue`). Any instance's
sender (`notify/sender.py`) claims due rows with `FOR UPDATE SKIP LOCKED` (so two instances never
take the same row), marks them `sending` until `claimed_until`, commits, sends, and records the
outcome in a second transaction (`complete`), fenced on its claim: an instance that lost its claim
(it stalled past `claimed_until` and another took the row over) cannot overwrite the other's
outcome.

- delivered -> `sent`;
- a retryable failure (`FailureReason.retryable`: rate limited, server error, timeout,
  connection, ...) -> back to `pending`, next attempt after an exponential backoff with jitter
  (`notify/retry.py`);
- anything else, or older than `give_up_after` -> `failed`, with the reason;
- no longer true when it is due -> `dropped`, with a `DropReason` (`notify/recheck.py`).

Per (receiver, dedup_key) rows go out in order: a row is not claimed while an older one of the same
key is unsent, so a resolve never overtakes its trigger. A daemon killed after claiming and before
sending leaves the row `sending`; once the claim expires, it is claimed again and sent (once, as far
as the receiver can tell when it deduplicates; PagerDuty does, by dedup_key). Every attempt is in
`notification_log`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import Counter
from sqlalchemy import Connection, text

from monitor.alert.model import DeliveryResult, Notification
from monitor.alert.notify.retry import RetryPolicy, decide, failure_label
from monitor.core.vocabulary import OUTBOX_UNDELIVERED
from monitor.store.base import one_of

NOTIFICATIONS = Counter(
    "kafka_health_notifications_total",
    "Notification delivery attempts by receiver and outcome (sent, retry, failed).",
    ["receiver", "outcome"],
)
NOTIFICATION_FAILURES = Counter(
    "kafka_health_notification_failures_total",
    "Failed delivery attempts by receiver and reason: http_<status> when the receiver answered, else the "
    "failure type (timeout, connection, misconfigured, template, ...).",
    ["receiver", "reason"],
)


_ENQUEUE = (
    "INSERT INTO notification_outbox"
    " (receiver, kind, group_key, dedup_key, payload, state, attempts, created_at, next_attempt_at)"
    " VALUES (:receiver, :kind, :group_key, :dedup_key, :payload, 'pending', 0, :now, :now)"
)


def _enqueued(notification: Notification, now: datetime) -> dict[str, Any]:
    """The parameters of `_ENQUEUE` for `notification`."""
    keys = {name: getattr(notification, name) for name in ("receiver", "kind", "group_key", "dedup_key")}
    return {**keys, "payload": notification.to_json(), "now": now}


def enqueue(conn: Connection, notification: Notification, now: datetime) -> int:
    """Store `notification` for sending; returns its outbox id. The caller commits."""
    return int(conn.execute(text(_ENQUEUE + " RETURNING id"), _enqueued(notification, now)).scalar_one())


def enqueue_all(conn: Connection, notifications: Sequence[Notification], now: datetime) -> None:
    """Store `notifications` for sending, in their order (their ids ascending), in one batch of
    statements: a cycle that opens hundreds of incidents does not wait for a round trip each. The
    caller commits."""
    if notifications:
        conn.execute(text(_ENQUEUE), [_enqueued(n, now) for n in notifications])


_UNDELIVERED = one_of("e.state", OUTBOX_UNDELIVERED)

_CLAIM = text(
    f"""
UPDATE notification_outbox o SET state = 'sending', claimed_by = :me, claimed_until = :until,
       attempts = o.attempts + 1
WHERE o.id IN (
    SELECT c.id FROM notification_outbox c
    WHERE ((c.state = 'pending' AND c.next_attempt_at <= :now)
           OR (c.state = 'sending' AND c.claimed_until < :now))
      AND NOT EXISTS (
          SELECT 1 FROM notification_outbox e
          WHERE e.receiver = c.receiver AND e.dedup_key = c.dedup_key AND e.id < c.id
            AND {_UNDELIVERED})
    ORDER BY c.id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING o.id, o.receiver, o.kind, o.dedup_key, o.payload, o.attempts, o.created_at
"""
)


@dataclass(frozen=True, slots=True)
class Claimed:
    id: int
    receiver: str
    kind: str
    dedup_key: str
    payload: str
    attempt: int
    created_at: datetime


def claim(conn: Connection, instance: str, now: datetime, limit: int, claim_seconds: float) -> list[Claimed]:
    rows = conn.execute(
        _CLAIM, {"me": instance, "now": now, "until": now + timedelta(seconds=claim_seconds), "limit": limit}
    )
    claimed = [
        Claimed(r.id, r.receiver, r.kind, r.dedup_key, r.payload, r.attempts, r.created_at) for r in rows
    ]
    return sorted(claimed, key=lambda c: c.id)


def complete(
    conn: Connection,
    item: Claimed,
    instance: str,
    result: DeliveryResult,
    now: datetime,
    policy: RetryPolicy,
    rng: random.Random,
    alerts: int,
) -> str:
    """Record the outcome of one attempt; returns sent, retry or failed ('lost' if the claim was
    taken over meanwhile, in which case nothing is changed)."""
    decision = decide(result, item.attempt, item.created_at, now, policy, rng)
    state = "pending" if decision.outcome == "retry" else decision.outcome
    updated = conn.execute(
        text(
            "UPDATE notification_outbox SET state = :state, next_attempt_at = :next_at, claimed_by = NULL,"
            " claimed_until = NULL, last_error = :error, last_status = :status,"
            " sent_at = CASE WHEN :state = 'sent' THEN CAST(:now AS timestamptz) ELSE sent_at END"
            " WHERE id = :id AND claimed_by = :me AND state = 'sending' AND attempts = :attempt"
        ),
        {
            "state": state,
            "next_at": decision.next_attempt_at,
            "error": None if result.ok else decision.reason,
            "status": result.status,
            "now": now,
            "id": item.id,
            "me": instance,
            "attempt": item.attempt,
        },
    ).rowcount
    outcome = decision.outcome if updated else "lost"
    log_attempt(conn, item, instance, now, outcome, result.status, decision.reason or None, alerts)
    NOTIFICATIONS.labels(item.receiver, decision.outcome).inc()
    if not result.ok:
        NOTIFICATION_FAILURES.labels(item.receiver, failure_label(result)).inc()
    return outcome


def log_attempt(
    conn: Connection,
    item: Claimed,
    instance: str,
    now: datetime,
    outcome: str,
    status: int | None,
    reason: str | None,
    alerts: int,
) -> None:
    conn.execute(
        text(
            "INSERT INTO notification_log"
            " (outbox_id, receiver, kind, dedup_key, attempt, at, outcome, status,"
            " reason, instance, alerts) VALUES (:id, :receiver, :kind, :dedup_key, :attempt, :now, :outcome,"
            " :status, :reason, :me, :alerts)"
        ),
        {
            "id": item.id,
            "receiver": item.receiver,
            "kind": item.kind,
            "dedup_key": item.dedup_key,
            "attempt": item.attempt,
            "now": now,
            "outcome": outcome,
            "status": status,
            "reason": reason,
            "me": instance,
            "alerts": alerts,
        },
    )


def outbox_rows(conn: Connection, state: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest outbox rows (optionally in one state), for `kafka-health alerts outbox`."""
    rows = conn.execute(
        text(
            "SELECT id, receiver, kind, dedup_key, state, attempts, created_at, next_attempt_at, sent_at,"
            " last_status, last_error FROM notification_outbox"
            " WHERE (CAST(:state AS text) IS NULL OR state = :state) ORDER BY id DESC LIMIT :limit"
        ),
        {"state": state, "limit": limit},
    )
    return [dict(r._mapping) for r in rows]


def outbox_counts(conn: Connection) -> dict[str, int]:
    rows = conn.execute(text("SELECT state, count(*) FROM notification_outbox GROUP BY state"))
    return {str(state): int(n) for state, n in rows}
