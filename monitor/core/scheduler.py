"""The daemon's job scheduler (APScheduler 3), started after every stage and stopped first.

Policy for every job: one instance at a time (`max_instances=1`), missed runs coalesced into one,
and a job that raises is logged and retried at its next interval; it never stops the scheduler.

Jobs run in pools (`every(pool=...)`): each cluster's collect jobs in a pool of their own, the
daemon's other jobs (evaluation, alerting, the sender, the writer's flush, `/metrics`) in
`DAEMON_POOL`. A cluster that does not answer holds its own pool's threads for its timeouts, never
another cluster's nor the daemon's: its collectors cannot delay a notification. APScheduler only
times the ticks; its threads hand each run to the job's pool at once.

`run_soon(job_id)` runs a job now instead of at its next tick (a collection that saw a broker go
calls it for the evaluation): at most one run is ever pending. Asked while the job is running, it
runs once more straight after; asked again meanwhile, that is still the one run.
`run_later(job_id, seconds)` asks for it once, some seconds on (a metadata run that saw a change
looks again soon).

How a request is never lost: which run of a job is under way is tracked here, under one lock, not
left to APScheduler's instance count (which a run still holds for a moment after it returned, so
a run asked of APScheduler in that moment would be skipped as "maximum number of running
instances reached"). A request while a run is under way marks the job pending, and the run that
is under way runs the job again in its own thread before it lets go, checking the mark under the
same lock as it lets go. A request while no run is under way claims the job and starts the run in
a thread of this scheduler's own. A tick that comes while a run is under way is skipped, as
APScheduler skips it. A job `expect`ed (its stage starts in the background, after the scheduler)
keeps a request made before it is scheduled, and runs it when `every` schedules it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent import futures
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from monitor.core.malloc import trim
from monitor.core.settings import AlertConfig, Intervals, RetentionConfig

log = logging.getLogger(__name__)

LATER = ":later"
"""The suffix of the one-off APScheduler job `run_later` adds for a job."""

DAEMON_POOL = "daemon"
"""The pool of the jobs `every` is not given one for."""

POOL_WORKERS = 16
"""Threads a pool may start: more than the jobs of any pool (a cluster has eight collect jobs),
so that a job never waits for a thread; each job runs once at a time, so a pool starts a thread
only for runs that overlap."""

TRIM_AFTER_SECONDS = 1.0
"""A run at least this long is followed by `monitor.core.malloc.trim`: the runs that allocate much
(evaluations, alert cycles at scale, offsets runs of a large fleet) are the long ones."""


def run_intervals(
    intervals: Intervals | None = None,
    alert: AlertConfig | None = None,
    retention: RetentionConfig | None = None,
    *,
    collect: Mapping[str, float],
) -> dict[str, float]:
    """Seconds between runs of each job that records `collection_runs` rows, by its `job` name.

    The one job -> interval map: the daemon schedules the evaluate, retention and maintenance jobs
    with it, and the collection page reads it to tell a stale job from a one-off run. `collect` is
    the collect stage's part, from its job registry (`monitor.collect.jobs.job_intervals`, which
    the stage schedules from too); the alert stage schedules from the same setting as here.
    """
    intervals = intervals or Intervals()
    return {
        **collect,
        "evaluate": intervals.evaluate_seconds,
        "alert": (alert or AlertConfig()).interval_seconds,
        "retention": (retention or RetentionConfig()).interval_seconds,
        "maintenance": intervals.maintenance_seconds,
    }


class Scheduler:
    name = "scheduler"

    def __init__(self, max_workers: int = POOL_WORKERS) -> None:
        """`max_workers`: the threads each pool may start."""
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=2)},  # hands runs to the pools
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
            timezone="UTC",
        )
        self._workers = max_workers
        self._pools: dict[str, futures.ThreadPoolExecutor] = {}
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._running: set[str] = set()  # a run is under way (from a tick or from run_soon)
        self._pending: set[str] = set()  # asked to run again while running: one run, not a queue
        self._expected: set[str] = set()  # scheduled later: a request before then is kept
        self._early: set[str] = set()  # asked for before it was scheduled
        self._stopping = False

    def expect(self, job_id: str) -> None:
        """`job_id` is scheduled later (`every`), by a stage that starts after the scheduler: a
        `run_soon` asked before then is kept, and runs as soon as the job is scheduled."""
        with self._lock:
            self._expected.add(job_id)

    def every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[[], Any],
        *,
        first_run_in: float = 0.0,
        pool: str = DAEMON_POOL,
    ) -> None:
        """Run `func` every `seconds`, first after `first_run_in` seconds, in the threads of
        `pool` (the module's docstring). Replaces a job of that id."""
        start = datetime.now().astimezone() + timedelta(seconds=first_run_in)
        logged = _logged(job_id, func)
        with self._lock:
            self._jobs[job_id] = _Job(seconds, logged, pool)
            asked = job_id in self._early
            self._early.discard(job_id)
        self._scheduler.add_job(
            self._on_tick,
            "interval",
            args=(job_id,),
            seconds=seconds,
            id=job_id,
            name=job_id,
            next_run_time=start,
            replace_existing=True,
        )
        if asked:
            self.run_soon(job_id)

    def run_soon(self, job_id: str) -> bool:
        """Run `job_id` now rather than at its next tick; its interval counts from this run.
        Returns False when the request was coalesced into a run already pending, or the job is
        unknown (not scheduled, nor `expect`ed: e.g. its stage is disabled) or the scheduler is
        stopping. A job expected but not scheduled yet keeps the request for when it is."""
        with self._lock:
            if self._stopping:
                return False
            if job_id not in self._jobs:
                if job_id not in self._expected or job_id in self._early:
                    return False
                self._early.add(job_id)
                return True
            if job_id in self._running:
                queued = job_id not in self._pending
                self._pending.add(job_id)
                return queued
            self._running.add(job_id)  # claimed: a tick now is skipped, a request now is pending
        seconds = self._jobs[job_id].seconds
        job = self._scheduler.get_job(job_id)
        if job is not None:  # the next tick an interval after this run
            job.modify(next_run_time=datetime.now(UTC) + timedelta(seconds=seconds))
        return self._submit(job_id)

    def _submit(self, job_id: str) -> bool:
        """Start a claimed run in its job's pool; False (and the claim let go) once stopping."""
        with self._lock:
            pool = None if self._stopping else self._pool(self._jobs[job_id].pool)
        try:
            if pool is not None:
                pool.submit(self._run_claimed, job_id)
                return True
        except RuntimeError:  # shut down between the check and the submit
            pass
        with self._lock:
            self._running.discard(job_id)
        return False

    def _pool(self, name: str) -> futures.ThreadPoolExecutor:
        """The pool `name`, started at its first run (call under the lock)."""
        pool = self._pools.get(name)
        if pool is None:
            pool = futures.ThreadPoolExecutor(self._workers, thread_name_prefix=f"jobs-{name}")
            self._pools[name] = pool
        return pool

    def run_later(self, job_id: str, seconds: float) -> bool:
        """Run `job_id` once `seconds` from now, as `run_soon` would then (beside its ticks); a
        request made before then replaces it. Returns False when the job is not scheduled or the
        scheduler is stopping."""
        with self._lock:
            if self._stopping or job_id not in self._jobs:
                return False
        self._scheduler.add_job(
            self.run_soon,
            "date",
            args=(job_id,),
            run_date=datetime.now(UTC) + timedelta(seconds=seconds),
            id=f"{job_id}{LATER}",
            name=f"{job_id}{LATER}",
            replace_existing=True,
        )
        return True

    def _on_tick(self, job_id: str) -> None:
        with self._lock:
            if job_id in self._running:
                log.debug("job %s: tick skipped, a run is under way", job_id)
                return
            self._running.add(job_id)
        self._submit(job_id)

    def _run_claimed(self, job_id: str) -> None:
        """Run a job this thread has claimed (in `_running`); again while it was asked meanwhile."""
        func = self._jobs[job_id].func
        while True:
            started = time.monotonic()
            try:
                func()
            finally:
                if time.monotonic() - started >= TRIM_AFTER_SECONDS:
                    trim()
                with self._lock:
                    again = job_id in self._pending and not self._stopping
                    self._pending.discard(job_id)
                    if not again:
                        self._running.discard(job_id)
            if not again:
                return

    def job_ids(self) -> list[str]:
        """The scheduled jobs (not the runs `run_later` asked for)."""
        return sorted(job.id for job in self._scheduler.get_jobs() if not job.id.endswith(LATER))

    def start(self) -> None:
        self._scheduler.start()

    def stop(self) -> None:
        """Stop scheduling and wait for in-flight jobs to finish their writes; a run asked for
        meanwhile is not started."""
        with self._lock:
            self._stopping = True
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.shutdown(wait=True)


@dataclass(frozen=True)
class _Job:
    seconds: float
    func: Callable[[], None]
    pool: str


def _logged(job_id: str, func: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            func()
        except Exception:
            log.exception("job %s failed; it runs again at its next interval", job_id)

    return run


@dataclass(frozen=True)
class Due:
    """Pending alerts of `cluster` whose `for:` has run out once a sample taken at `at` or later
    has come, from one of `jobs` (any of the cluster's jobs when empty)."""

    cluster: str
    at: datetime
    jobs: frozenset[str] = frozenset()

    def met_by(self, cluster: str, job: str, at: datetime) -> bool:
        return cluster == self.cluster and at >= self.at and (not self.jobs or job in self.jobs)


class DueRun:
    """A job to run at the first sample that can make a pending alert fire: the evaluation, when
    an alert's `for:` runs out. Its `for:` counts in sample time (to the end of the newest run of
    the jobs its entity is derived from), so the evaluation waits for the first run of one of those
    jobs that ends at or after the due time, and runs then rather than at its next tick, up to an
    interval later. A sample of another job, or of another cluster, asks for nothing."""

    def __init__(self, scheduler: Scheduler, job_id: str) -> None:
        self._scheduler = scheduler
        self._job_id = job_id
        self._lock = threading.Lock()
        self._dues: tuple[Due, ...] = ()

    def set(self, dues: Iterable[Due]) -> None:
        """What falls due now (after each evaluation: an empty one when nothing is pending)."""
        with self._lock:
            self._dues = tuple(dues)

    @property
    def dues(self) -> tuple[Due, ...]:
        with self._lock:
            return self._dues

    def sample_arrived(self, cluster: str, job: str, at: datetime) -> bool:
        """A run of `job` on `cluster` ended at `at`, its samples written: run the job now when
        that meets a due time (each once). Returns whether it asked for the run."""
        with self._lock:
            left = tuple(due for due in self._dues if not due.met_by(cluster, job, at))
            if len(left) == len(self._dues):
                return False
            self._dues = left
        self._scheduler.run_soon(self._job_id)
        return True


_NEVER = object()


@dataclass
class Pacing:
    """Whether a periodic job whose runs cost what its input's size makes them cost runs at a tick:
    after a run of `seconds`, the next waits `rest` times as long, unless its input changed (a
    `stamp` other than the last run's). A job that takes longer than its interval otherwise runs
    back to back and holds a core; at a small size (runs of milliseconds) every tick runs."""

    rest: float
    _until: float = 0.0
    _stamp: object = _NEVER

    def due(self, now: float, stamp: object) -> bool:
        """Whether to run at monotonic time `now`, the input's stamp being `stamp`."""
        return stamp != self._stamp or now >= self._until

    def rested(self, now: float) -> bool:
        """Whether the rest after the last run is over at monotonic time `now`, whatever changed."""
        return now >= self._until

    def ran(self, started: float, ended: float, stamp: object) -> None:
        """A run from `started` to `ended` (monotonic) read the input as of `stamp`."""
        self._until = ended + self.rest * max(0.0, ended - started)
        self._stamp = stamp
