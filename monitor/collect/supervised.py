"""A job's thread that works between the job's scheduled runs (the commit stream, the end offsets'
refresh), supervised by those runs.

Each run calls `supervise`: it notes the run's time and starts the thread when it is not alive
(the first run, or after the thread stopped on an error). Runs happen only while this instance
holds the cluster's lease, so a thread whose runs stop coming (the lease went to another
instance) stops itself: its loop asks `unsupervised` and returns when it is, after
`unsupervised_limit` (three run intervals, at least two lease periods). `close` stops it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from monitor.collect.context import ClusterContext


class SupervisedThread:
    """One cluster's thread of one job (see the module)."""

    def __init__(
        self, context: ClusterContext, name: str, loop: Callable[[], None], stop_within: float
    ) -> None:
        self._ctx = context
        self._name = name
        self._loop = loop
        self._stop_within = stop_within
        self.stop = threading.Event()
        """Set when the thread should return (`close`); its loop waits on it."""
        self._thread: threading.Thread | None = None
        self._runs: list[float] = []  # the clock's monotonic times of the last two runs

    def supervise(self) -> None:
        """A run of the job: noted, and the thread started when it is not alive."""
        self._runs = [*self._runs[-1:], self._ctx.clock.monotonic()]
        if self._thread is None or not self._thread.is_alive():
            self.stop.clear()
            self._thread = threading.Thread(
                target=self._loop, name=f"{self._name}-{self._ctx.cluster.name}", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop the thread: it returns within `stop_within` seconds plus a request timeout."""
        self.stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=self._stop_within + self._ctx.cluster.request_timeout_seconds)
        self._thread = None

    def unsupervised_limit(self) -> float:
        """Seconds without a run after which the thread stops: three run intervals, and at least
        two lease periods."""
        runs = self._runs
        interval = runs[-1] - runs[0] if len(runs) == 2 else 0.0
        return max(3 * interval, 2 * self._ctx.config.lease_ttl_seconds)

    def unsupervised(self) -> bool:
        """Whether the runs stopped coming for longer than `unsupervised_limit`."""
        runs = self._runs
        return bool(runs) and self._ctx.clock.monotonic() - runs[-1] > self.unsupervised_limit()
