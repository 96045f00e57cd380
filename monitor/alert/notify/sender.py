"""The sender: drains the outbox (`notify/outbox.py`), one round after another, sending the due
notifications in parallel through the receivers and recording each outcome.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from sqlalchemy import Connection, Engine

from monitor.alert.model import DeliveryResult, FailureReason, Notification
from monitor.alert.notify.outbox import Claimed, claim, complete
from monitor.alert.notify.recheck import DropReason, drop, recheck
from monitor.alert.notify.retry import RetryPolicy
from monitor.core.clock import Clock

log = logging.getLogger(__name__)


class Sendable(Protocol):
    """What the sender needs of a receiver (`monitor.alert.receivers` provide it)."""

    def send(self, notification: Notification) -> DeliveryResult: ...


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
