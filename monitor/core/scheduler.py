"""The daemon's job scheduler (APScheduler 3), started after every stage and stopped first.

Policy for every job: one instance at a time (`max_instances=1`), missed runs coalesced into one,
and a job that raises is logged and retried at its next interval; it never stops the scheduler.
Each cluster's jobs run in a shared thread pool sized so a slow cluster cannot starve the others.

`run_soon(job_id)` runs a job now instead of at its next tick (a collection that saw a broker go
calls it for the evaluation): at most one run is ever pending. Asked while the job is running, it
runs once more straight after; asked again meanwhile, that is still the one run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from monitor.core.settings import AlertConfig, Intervals, RetentionConfig

log = logging.getLogger(__name__)


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

    def __init__(self, max_workers: int = 8) -> None:
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=max_workers)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
            timezone="UTC",
        )
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._pending: set[str] = set()  # asked to run again while running: one run, not a queue

    def every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[[], Any],
        *,
        first_run_in: float = 0.0,
    ) -> None:
        """Run `func` every `seconds`, first after `first_run_in` seconds. Replaces a job of that id."""
        start = datetime.now().astimezone() + timedelta(seconds=first_run_in)
        self._scheduler.add_job(
            self._tracked(job_id, _logged(job_id, func)),
            "interval",
            seconds=seconds,
            id=job_id,
            name=job_id,
            next_run_time=start,
            replace_existing=True,
        )

    def run_soon(self, job_id: str) -> bool:
        """Run `job_id` now rather than at its next tick; its interval counts from this run.
        Returns False when the request was coalesced into a run already pending, or the job is
        unknown (not scheduled: e.g. its stage is disabled)."""
        with self._lock:
            if job_id in self._running:
                queued = job_id not in self._pending
                self._pending.add(job_id)
                return queued
        return self._move_to_now(job_id)

    def _move_to_now(self, job_id: str) -> bool:
        job = self._scheduler.get_job(job_id)
        if job is None:
            return False
        now = datetime.now(UTC)
        if job.next_run_time is not None and job.next_run_time <= now:
            return False  # already due: that run is the pending one
        job.modify(next_run_time=now)
        return True

    def _tracked(self, job_id: str, func: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            with self._lock:
                self._running.add(job_id)
            try:
                func()
            finally:
                with self._lock:
                    self._running.discard(job_id)
                    again = job_id in self._pending
                    self._pending.discard(job_id)
                if again:
                    self._move_to_now(job_id)

        return run

    def job_ids(self) -> list[str]:
        return sorted(job.id for job in self._scheduler.get_jobs())

    def start(self) -> None:
        self._scheduler.start()

    def stop(self) -> None:
        """Stop scheduling and wait for in-flight jobs to finish their writes."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)


def _logged(job_id: str, func: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            func()
        except Exception:
            log.exception("job %s failed; it runs again at its next interval", job_id)

    return run
