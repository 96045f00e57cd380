"""Durable delivery: the notification outbox and the sender that drains it.

A notification is a row written in the transaction that decided it (`enqueue`). Any instance's
sender claims due rows with `FOR UPDATE SKIP LOCKED` (so two instances never take the same row),
marks them `sending` until `claimed_until`, commits, sends, and records the outcome in a second
transaction, fenced on its claim: an instance that lost its claim (it stalled past
`claimed_until` and another took the row over) cannot overwrite the other's outcome.

- delivered -> `sent`;
- retryable (429, 5xx, timeout, connection error) -> back to `pending`, next attempt after an
  exponential backoff with jitter;
- anything else, or older than `give_up_after` -> `failed`, with the reason;
- no longer true when it is due -> `dropped`, with a `DropReason` (`recheck`): a notice is
  decided by one alert cycle and sent by the sender some seconds later, after a retry even
  minutes later; what it announces is checked against the alerts as they are when it is sent.

Per (receiver, dedup_key) rows go out in order: a row is not claimed while an older one of the same
key is unsent, so a resolve never overtakes its trigger. A daemon killed after claiming and before
sending leaves the row `sending`; once the claim expires, it is claimed again and sent (once, as far
as the receiver can tell when it deduplicates; PagerDuty does, by dedup_key). Every attempt is in
`notification_log`.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from prometheus_client import Counter
from sqlalchemy import Connection, Engine, text

from monitor.alert.model import DeliveryResult, FailureReason, Notification
from monitor.core.clock import Clock

log = logging.getLogger(__name__)

NOTIFICATIONS = Counter(
    "kafka_health_notifications_total",
    "Notification delivery attempts by receiver and outcome (sent, retry, failed).",
    ["receiver", "outcome"],
)
NOTIFICATION_FAILURES = Counter(
    "kafka_health_notification_failures_total",
    "Failed delivery attempts by receiver and reason class (http_<status>, timeout, connection, other).",
    ["receiver", "reason"],
)


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
    _log(conn, item, instance, now, "dropped", None, reason.value, alerts)
    NOTIFICATIONS.labels(item.receiver, "dropped").inc()


class Sendable(Protocol):
    """What the sender needs of a receiver (`monitor.alert.receivers` provide it)."""

    def send(self, notification: Notification) -> DeliveryResult: ...


def enqueue(conn: Connection, notification: Notification, now: datetime) -> int:
    """Store `notification` for sending; returns its outbox id. The caller commits."""
    return int(
        conn.execute(
            text(
                "INSERT INTO notification_outbox"
                " (receiver, kind, group_key, dedup_key, payload, state, attempts,"
                " created_at, next_attempt_at) VALUES (:receiver, :kind, :group_key, :dedup_key, :payload,"
                " 'pending', 0, :now, :now) RETURNING id"
            ),
            {
                "receiver": notification.receiver,
                "kind": notification.kind,
                "group_key": notification.group_key,
                "dedup_key": notification.dedup_key,
                "payload": notification.to_json(),
                "now": now,
            },
        ).scalar_one()
    )


_CLAIM = text(
    """
UPDATE notification_outbox o SET state = 'sending', claimed_by = :me, claimed_until = :until,
       attempts = o.attempts + 1
WHERE o.id IN (
    SELECT c.id FROM notification_outbox c
    WHERE ((c.state = 'pending' AND c.next_attempt_at <= :now)
           OR (c.state = 'sending' AND c.claimed_until < :now))
      AND NOT EXISTS (
          SELECT 1 FROM notification_outbox e
          WHERE e.receiver = c.receiver AND e.dedup_key = c.dedup_key AND e.id < c.id
            AND e.state IN ('pending', 'sending'))
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


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base_seconds: float = 2.0
    max_seconds: float = 300.0
    give_up_after_seconds: float = 86_400.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Exponential backoff with full jitter over its upper half: never a thundering herd, never 0."""
        ceiling = min(self.max_seconds, self.base_seconds * 2 ** max(0, attempt - 1))
        return float(ceiling * (0.5 + rng.random() / 2))


def failure_label(result: DeliveryResult) -> str:
    """The `reason` label of a failed attempt: the HTTP status where there is one (`http_503`;
    an SMTP reply is `code_<n>` below 100, else `http_<n>` too: the code shows either way), else
    the failure's type (`timeout`, `connection`, `template`, ...)."""
    if result.status is not None:
        return f"http_{result.status}" if result.status >= 100 else f"code_{result.status}"
    return result.failure.value if result.failure is not None else "other"


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
    if result.ok:
        outcome, state, next_at = "sent", "sent", now
    else:
        expired = (now - item.created_at).total_seconds() >= policy.give_up_after_seconds
        if result.retryable and not expired:
            outcome, state = "retry", "pending"
            next_at = now + timedelta(seconds=policy.delay(item.attempt, rng))
        else:
            outcome, state, next_at = "failed", "failed", now
    reason = result.reason
    if outcome == "failed" and result.retryable:
        reason = f"gave up after {item.attempt} attempts: {result.reason}"
    updated = conn.execute(
        text(
            "UPDATE notification_outbox SET state = :state, next_attempt_at = :next_at, claimed_by = NULL,"
            " claimed_until = NULL, last_error = :error, last_status = :status,"
            " sent_at = CASE WHEN :state = 'sent' THEN CAST(:now AS timestamptz) ELSE sent_at END"
            " WHERE id = :id AND claimed_by = :me AND state = 'sending' AND attempts = :attempt"
        ),
        {
            "state": state,
            "next_at": next_at,
            "error": None if result.ok else reason,
            "status": result.status,
            "now": now,
            "id": item.id,
            "me": instance,
            "attempt": item.attempt,
        },
    ).rowcount
    _log(conn, item, instance, now, outcome if updated else "lost", result.status, reason or None, alerts)
    NOTIFICATIONS.labels(item.receiver, outcome).inc()
    if not result.ok:
        NOTIFICATION_FAILURES.labels(item.receiver, failure_label(result)).inc()
    return outcome if updated else "lost"


def _log(
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


class Sender:
    """Drains the outbox: claims due notifications, sends them in parallel, records outcomes.

    `drain()` runs until nothing is due (bounded by `max_rounds`); the daemon calls it every
    `alert.sender_interval_seconds`. A PostgreSQL outage makes a round fail and log; nothing is
    lost because nothing was claimed, or the claim expires and the row is taken again.
    """

    def __init__(
        self,
        engine: Callable[[], Engine],
        receivers: Callable[[], Mapping[str, Sendable]],
        clock: Clock,
        instance: str,
        *,
        batch: int = 200,
        concurrency: int = 8,
        claim_seconds: float = 60.0,
        policy: RetryPolicy | None = None,
        seed: int | None = None,
    ) -> None:
        self._engine = engine
        self._receivers = receivers
        self._clock = clock
        self.instance = instance
        self._batch = batch
        self._claim_seconds = claim_seconds
        self._policy = policy or RetryPolicy()
        self._rng = random.Random(seed)  # noqa: S311 - jitter, not security
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="notify")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def drain(self, max_rounds: int = 50) -> dict[str, int]:
        totals: dict[str, int] = {}
        with self._lock:
            for _ in range(max_rounds):
                counts = self._round()
                for key, value in counts.items():
                    totals[key] = totals.get(key, 0) + value
                if not counts:
                    break
        return totals

    def _round(self) -> dict[str, int]:
        engine = self._engine()
        counts: dict[str, int] = {}
        with engine.begin() as conn:
            now = self._clock.now()
            claimed = claim(conn, self.instance, now, self._batch, self._claim_seconds)
            items = []
            for item in claimed:
                if (reason := self._stale(conn, item)) is None:
                    items.append(item)
                    continue
                drop(conn, item, self.instance, reason, now, _alert_count(item))
                counts["dropped"] = counts.get("dropped", 0) + 1
                log.info("dropped %s notification %d to %s: %s", item.kind, item.id, item.receiver, reason)
        if not items:
            return counts
        receivers = self._receivers()
        outcomes = list(self._pool.map(lambda item: self._send(item, receivers), items))
        with engine.begin() as conn:
            now = self._clock.now()
            for item, (result, alerts) in zip(items, outcomes, strict=True):
                outcome = complete(conn, item, self.instance, result, now, self._policy, self._rng, alerts)
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome == "sent":
                    log.info(
                        "sent %s notification %d to %s (%s)",
                        item.kind,
                        item.id,
                        item.receiver,
                        item.dedup_key,
                    )
                elif outcome != "lost":
                    log.warning(
                        "notification %d to %s: %s (%s)",
                        item.id,
                        item.receiver,
                        outcome,
                        result.reason or "?",
                    )
        return counts

    @staticmethod
    def _stale(conn: Connection, item: Claimed) -> DropReason | None:
        try:
            notification = Notification.from_json(item.payload, id=item.id)
        except (ValueError, KeyError, TypeError):
            return None  # `_send` gives it up with the reason
        return recheck(conn, item, notification)

    def _send(self, item: Claimed, receivers: Mapping[str, Sendable]) -> tuple[DeliveryResult, int]:
        try:
            notification = Notification.from_json(item.payload, id=item.id)
        except (ValueError, KeyError, TypeError) as exc:
            return DeliveryResult.failed(FailureReason.UNREADABLE, f"unreadable outbox payload: {exc}"), 0
        receiver = receivers.get(item.receiver)
        if receiver is None:
            result = DeliveryResult.failed(
                FailureReason.MISCONFIGURED,
                f"receiver {item.receiver!r} is not configured; add it to routing.yaml's receivers",
            )
            return result, len(notification.alerts)
        try:
            return receiver.send(notification), len(notification.alerts)
        except Exception as exc:  # a receiver bug must not stop the others; retried like an outage
            log.exception("receiver %s failed on notification %d", item.receiver, item.id)
            result = DeliveryResult.failed(FailureReason.RECEIVER_BUG, f"{type(exc).__name__}: {exc}")
            return result, len(notification.alerts)


def _alert_count(item: Claimed) -> int:
    try:
        return len(Notification.from_json(item.payload).alerts)
    except (ValueError, KeyError, TypeError):
        return 0


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
