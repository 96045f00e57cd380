"""Sample writes that survive PostgreSQL going away: a bounded, in-memory queue in front of it.

The policy, in the order `submit` applies it:

1. Anything already queued is replayed first, oldest first, each write in its own transaction and
   with ``replay=True``: a queued write may have been committed by an attempt whose answer was
   lost, so a replay must be idempotent.
2. The new write runs in its own transaction (``engine.begin()``); True when it committed.
3. PostgreSQL unavailable (connection refused or lost, server shutting down, pool exhausted,
   deadlock or timeout: every error that can succeed on a later try) -> the write is queued and
   False returned; the collector carries on sampling.
4. More than `max_rows` queued -> the OLDEST queued writes are dropped, counted and logged: when
   the database comes back, the newest samples are the ones alerts need.
5. Any other error (a bug, a constraint) -> logged with its traceback, counted in
   `failed_writes` and dropped: retrying cannot fix it and would hold up the writes behind it.

While the database is known to be down, `submit` queues without trying it for `retry_seconds`
(a connect that hangs would otherwise cost every collector cycle its connect timeout); `flush`,
which the daemon also calls from a timer, always tries. Thread-safe: collector threads of several
clusters submit concurrently, and write concurrently while nothing is queued.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeAlias

import psycopg
from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc

from monitor.core.clock import Clock
from monitor.core.errors import StoreUnavailableError

log = logging.getLogger(__name__)

DEFAULT_RETRY_SECONDS = 5.0

_TRANSIENT: tuple[type[BaseException], ...] = (
    StoreUnavailableError,
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


def is_unavailable(exc: BaseException) -> bool:
    """True when `exc` (or an error it was raised from) means "the database cannot be used right
    now" rather than "this write is wrong"."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _TRANSIENT):
            return True
        if isinstance(seen, sa_exc.DBAPIError) and seen.connection_invalidated:
            return True
        seen = seen.__cause__
    return False


def _reason(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


@dataclass(frozen=True)
class _Pending:
    label: str
    rows: int
    write: Callable[[Connection, bool], object]
    queued_at: datetime


class BufferedWriter:
    """Runs sample writes in their own transactions, queueing them while PostgreSQL is down."""

    Write: TypeAlias = Callable[[Connection, bool], object]
    """``write(conn, replay)``: writes one sample inside the transaction of `conn`, never commits."""

    def __init__(
        self, engine: Engine, max_rows: int, clock: Clock, *, retry_seconds: float = DEFAULT_RETRY_SECONDS
    ) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        if retry_seconds < 0:
            raise ValueError(f"retry_seconds must be >= 0, got {retry_seconds}")
        self._engine = engine
        self._max_rows = max_rows
        self._clock = clock
        self._retry_seconds = retry_seconds
        self._lock = threading.Lock()  # the queue and the counters
        self._flush_lock = threading.Lock()  # one replay at a time, in order
        self._queue: deque[_Pending] = deque()
        self._queued_rows = 0
        self._dropped_rows = 0
        self._dropped_writes = 0
        self._failed_writes = 0
        self._available = True
        self._down_since: float | None = None  # clock.monotonic() of the last unavailable attempt
        self._last_error: str | None = None

    # -- state --------------------------------------------------------------------------------------

    @property
    def pending_rows(self) -> int:
        with self._lock:
            return self._queued_rows

    @property
    def pending_writes(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def dropped_rows(self) -> int:
        """Rows of queued writes dropped to keep the queue within `max_rows`, since start."""
        with self._lock:
            return self._dropped_rows

    @property
    def dropped_writes(self) -> int:
        with self._lock:
            return self._dropped_writes

    @property
    def failed_writes(self) -> int:
        """Writes dropped because they failed for a reason other than the database being away."""
        with self._lock:
            return self._failed_writes

    @property
    def available(self) -> bool:
        """False from a failed attempt because the database was unavailable until the next success."""
        with self._lock:
            return self._available

    @property
    def last_error(self) -> str | None:
        """Why the last write failed (type and first line); None once a write succeeds again."""
        with self._lock:
            return self._last_error

    # -- writing ------------------------------------------------------------------------------------

    def submit(self, label: str, rows: int, write: Write) -> bool:
        """Write now (after replaying the queue) or queue; True only when written now.

        `label` names the write in logs ("cluster:job"); `rows` is its weight against `max_rows`.
        Never raises for a database error: see the module's policy.
        """
        pending = _Pending(label, rows, write, self._clock.now())
        with self._flush_lock:
            if self._queue and not self._backing_off():
                self._flush_locked()
            if self._queue or self._backing_off():
                self._enqueue(pending)
                return False
        return self._attempt(pending, replay=False)

    def flush(self) -> int:
        """Replay the queued writes, oldest first, until one finds the database unavailable;
        return how many were written."""
        with self._flush_lock:
            return self._flush_locked()

    def _flush_locked(self) -> int:
        written = 0
        while True:
            with self._lock:
                if not self._queue:
                    break
                # Taken out while it runs, so a concurrent drop of the oldest cannot remove it.
                pending = self._queue.popleft()
                self._queued_rows -= pending.rows
            try:
                self._run(pending, replay=True)
            except Exception as exc:
                if is_unavailable(exc):
                    self._went_down(exc)
                    self._enqueue(pending, front=True)
                    break
                self._failed(pending, exc)
                continue
            written += 1
            self._went_up()
        if written:
            log.info("PostgreSQL is available: wrote %d queued sample write(s)", written)
        return written

    def _attempt(self, pending: _Pending, *, replay: bool) -> bool:
        try:
            self._run(pending, replay=replay)
        except Exception as exc:
            if is_unavailable(exc):
                self._went_down(exc)
                self._enqueue(pending)
            else:
                self._failed(pending, exc)
            return False
        self._went_up()
        return True

    def _run(self, pending: _Pending, *, replay: bool) -> None:
        with self._engine.begin() as conn:
            pending.write(conn, replay)

    # -- bookkeeping --------------------------------------------------------------------------------

    def _backing_off(self) -> bool:
        with self._lock:
            down_since = self._down_since
        return down_since is not None and self._clock.monotonic() - down_since < self._retry_seconds

    def _enqueue(self, pending: _Pending, *, front: bool = False) -> None:
        dropped: list[_Pending] = []
        with self._lock:
            if front:
                self._queue.appendleft(pending)
            else:
                self._queue.append(pending)
            self._queued_rows += pending.rows
            while self._queued_rows > self._max_rows and self._queue:
                oldest = self._queue.popleft()
                self._queued_rows -= oldest.rows
                self._dropped_rows += oldest.rows
                self._dropped_writes += 1
                dropped.append(oldest)
        for write in dropped:
            log.warning(
                "sample write queue is over %d rows while PostgreSQL is unavailable: dropped %s "
                "(%d rows, queued at %s)",
                self._max_rows,
                write.label,
                write.rows,
                write.queued_at.isoformat(),
            )

    def _went_down(self, exc: BaseException) -> None:
        reason = _reason(exc)
        with self._lock:
            was_available = self._available
            self._available = False
            self._down_since = self._clock.monotonic()
            self._last_error = reason
        if was_available:
            log.warning(
                "PostgreSQL is unavailable, queueing sample writes in memory (up to %d rows): %s",
                self._max_rows,
                reason,
            )

    def _went_up(self) -> None:
        with self._lock:
            self._available = True
            self._down_since = None
            self._last_error = None

    def _failed(self, pending: _Pending, exc: BaseException) -> None:
        with self._lock:
            self._failed_writes += 1
            self._last_error = _reason(exc)
        log.error(
            "sample write %s failed and is dropped (%d rows)", pending.label, pending.rows, exc_info=exc
        )
