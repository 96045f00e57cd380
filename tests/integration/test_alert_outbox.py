"""The notification outbox on the real PostgreSQL: delivered once, retried on schedule, given up with
a reason, in order per incident, and never sent twice by two senders or lost by a crashed one."""

from __future__ import annotations

import random
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text

from monitor.alert.model import AlertView, DeliveryResult, FailureReason, Notification
from monitor.alert.notify.outbox import claim, enqueue, enqueue_all
from monitor.alert.notify.retry import RetryPolicy
from monitor.alert.notify.sender import Sender
from monitor.core.clock import FakeClock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _empty_outbox(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE notification_outbox, notification_log"))


class Recording:
    """A receiver that records what it got and answers from a script (then 'delivered')."""

    def __init__(self, script: list[DeliveryResult] | None = None) -> None:
        self.script = list(script or [])
        self.received: list[Notification] = []
        self._lock = threading.Lock()

    def send(self, notification: Notification) -> DeliveryResult:
        with self._lock:
            self.received.append(notification)
            return self.script.pop(0) if self.script else DeliveryResult.delivered(200)


def notification(
    n: int, receiver: str = "r", dedup_key: str | None = None, kind: str = "firing"
) -> Notification:
    alert = AlertView(
        fingerprint=f"fp{n}",
        rule="UnderReplicated",
        severity="warning",
        state="firing",
        cluster="prod",
        entity="partition",
        entity_key=f"prod/t/{n}",
        labels={"cluster": "prod", "topic": "t", "partition": str(n)},
        summary=f"t[{n}] lost a replica",
        description="",
        value=1.0,
        annotations={},
        starts_at=T0,
    )
    return Notification(
        receiver=receiver,
        kind=kind,  # type: ignore[arg-type]
        severity="warning",
        group_key=f"g{n}",
        group_labels={"cluster": "prod"},
        dedup_key=dedup_key or f"key-{n}",
        alerts=(alert,),
        created_at=T0,
    )


def sender(engine: Engine, receivers: dict[str, Recording], clock: FakeClock, name: str = "a") -> Sender:
    return Sender(
        lambda: engine,
        lambda: receivers,
        clock,
        name,
        batch=50,
        concurrency=4,
        claim_seconds=30,
        policy=RetryPolicy(base_seconds=2, max_seconds=60, give_up_after_seconds=3600),
        seed=1,
    )


def states(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            s: n for s, n in conn.execute(text("SELECT state, count(*) FROM notification_outbox GROUP BY 1"))
        }


def test_each_notification_is_delivered_once_and_logged(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        for n in range(3):
            enqueue(conn, notification(n), T0)
    receiver = Recording()
    s = sender(engine, {"r": receiver}, clock)
    try:
        assert s.drain() == {"sent": 3}
        assert s.drain() == {}
    finally:
        s.close()
    assert sorted(n.group_key for n in receiver.received) == ["g0", "g1", "g2"]
    assert receiver.received[0].alerts[0].summary.endswith("lost a replica")
    assert states(engine) == {"sent": 3}
    with engine.connect() as conn:
        log = conn.execute(text("SELECT outcome, attempt, instance, alerts FROM notification_log")).all()
    assert sorted(tuple(r) for r in log) == [("sent", 1, "a", 1)] * 3


@pytest.mark.parametrize("count", [0, 1, 250])
def test_a_cycles_notifications_are_stored_in_one_batch_in_their_order(engine: Engine, count: int) -> None:
    decided = [
        notification(n, dedup_key=f"key-{n % 7}", kind="resolved" if n % 5 else "firing")
        for n in range(count)
    ]
    with engine.begin() as conn:
        enqueue_all(conn, decided, T0)
        rows = conn.execute(
            text("SELECT id, receiver, kind, group_key, dedup_key, payload, state, next_attempt_at"
                 " FROM notification_outbox ORDER BY id")
        ).all()  # fmt: skip
    assert [Notification.from_json(r.payload) for r in rows] == decided
    assert [(r.kind, r.group_key, r.dedup_key) for r in rows] == [
        (n.kind, n.group_key, n.dedup_key) for n in decided
    ]
    assert {(r.state, r.next_attempt_at) for r in rows} <= {("pending", T0)}


def test_retryable_failures_back_off_then_deliver(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        enqueue(conn, notification(1), T0)
    receiver = Recording(
        [
            DeliveryResult.failed(FailureReason.SERVER_ERROR, "HTTP 503", 503),
            DeliveryResult.failed(FailureReason.TIMEOUT, "timed out"),
        ]
    )
    s = sender(engine, {"r": receiver}, clock)
    try:
        assert s.drain() == {"retry": 1}
        assert s.drain() == {}, "not due before its backoff"
        clock.advance(2)  # the first delay is 1-2 s
        assert s.drain() == {"retry": 1}
        clock.advance(1)
        assert s.drain() == {}, "the second delay is 2-4 s"
        clock.advance(3)
        assert s.drain() == {"sent": 1}
    finally:
        s.close()
    assert len(receiver.received) == 3
    with engine.connect() as conn:
        row = conn.execute(text("SELECT state, attempts, last_error FROM notification_outbox")).one()
        log = conn.execute(text("SELECT outcome, status FROM notification_log ORDER BY id")).all()
    assert tuple(row) == ("sent", 3, None)
    assert [tuple(r) for r in log] == [("retry", 503), ("retry", None), ("sent", 200)]


def test_other_client_errors_give_up_with_the_reason(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        enqueue(conn, notification(1), T0)
        enqueue(conn, notification(2, receiver="gone"), T0)
    receiver = Recording(
        [DeliveryResult.failed(FailureReason.CLIENT_ERROR, "HTTP 400: invalid routing_key", 400)]
    )
    s = sender(engine, {"r": receiver}, clock)
    try:
        assert s.drain() == {"failed": 2}
        clock.advance(3600)
        assert s.drain() == {}
    finally:
        s.close()
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT receiver, last_error FROM notification_outbox")).all())
    assert rows["r"] == "HTTP 400: invalid routing_key"
    assert "receiver 'gone' is not configured" in rows["gone"]


def test_a_notification_undelivered_past_the_limit_is_failed(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        enqueue(conn, notification(1), T0)
    receiver = Recording([DeliveryResult.failed(FailureReason.SERVER_ERROR, "HTTP 503", 503)] * 100)
    s = sender(engine, {"r": receiver}, clock)
    try:
        for _ in range(100):
            s.drain()
            clock.advance(60)
            if states(engine).get("failed"):
                break
    finally:
        s.close()
    with engine.connect() as conn:
        error = conn.execute(text("SELECT last_error FROM notification_outbox")).scalar_one()
    assert states(engine) == {"failed": 1}
    assert error.startswith("gave up after") and "HTTP 503" in error


def test_a_later_notification_of_the_same_incident_waits_for_the_earlier_one(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        enqueue(conn, notification(1, dedup_key="incident", kind="firing"), T0)
        enqueue(conn, notification(1, dedup_key="incident", kind="resolved"), T0)
        enqueue(conn, notification(2, dedup_key="other"), T0)
    receiver = Recording([DeliveryResult.failed(FailureReason.RATE_LIMITED, "HTTP 429", 429)])
    s = sender(engine, {"r": receiver}, clock)
    try:
        s.drain()
        assert [(n.dedup_key, n.kind) for n in receiver.received] == [
            ("incident", "firing"),
            ("other", "firing"),
        ]
        clock.advance(5)
        s.drain()
    finally:
        s.close()
    kinds = [(n.dedup_key, n.kind) for n in receiver.received if n.dedup_key == "incident"]
    assert kinds == [("incident", "firing"), ("incident", "firing"), ("incident", "resolved")]


def test_two_senders_never_send_the_same_notification(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        for n in range(400):
            enqueue(conn, notification(n), T0)
    receiver = Recording()
    senders = [sender(engine, {"r": receiver}, clock, name) for name in ("a", "b")]
    threads = [threading.Thread(target=s.drain) for s in senders]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for s in senders:
            s.close()
    counts = Counter(n.group_key for n in receiver.received)
    assert len(counts) == 400 and set(counts.values()) == {1}
    with engine.connect() as conn:
        by_instance = dict(
            conn.execute(text("SELECT instance, count(*) FROM notification_log GROUP BY 1")).all()
        )
    assert sum(by_instance.values()) == 400


def test_a_claim_abandoned_by_a_crashed_sender_is_sent_once_after_it_expires(engine: Engine) -> None:
    clock = FakeClock(T0)
    with engine.begin() as conn:
        enqueue(conn, notification(1, receiver="pager"), T0)
    with engine.begin() as conn:
        claimed = claim(conn, "crashed", clock.now(), 10, claim_seconds=30)
    assert len(claimed) == 1
    receiver = Recording()
    s = sender(engine, {"pager": receiver}, clock, "restarted")
    try:
        assert s.drain() == {}, "still claimed by the crashed instance"
        clock.advance(31)
        assert s.drain() == {"sent": 1}
        clock.advance(60)
        assert s.drain() == {}
    finally:
        s.close()
    assert len(receiver.received) == 1
    assert receiver.received[0].dedup_key == "key-1"


def test_backoff_grows_and_stays_within_its_bounds() -> None:
    policy = RetryPolicy(base_seconds=2, max_seconds=60)
    rng = random.Random(7)
    delays = [policy.delay(attempt, rng) for attempt in range(1, 10)]
    ceilings = [min(60, 2 * 2 ** (a - 1)) for a in range(1, 10)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert delays[-1] >= 30


def test_outbox_payload_round_trips() -> None:
    original = notification(3)
    copy = Notification.from_json(original.to_json(), id=9)
    assert copy.id == 9
    assert copy.alerts == original.alerts and copy.dedup_key == original.dedup_key
    assert copy.created_at == original.created_at and copy.alerts[0].starts_at.tzinfo is not None
    assert (copy.created_at + timedelta(0)) == T0
