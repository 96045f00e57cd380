"""The daemon's job scheduler (APScheduler 3), started after every stage and stopped first.

Policy for every job: one instance at a time (`max_instances=1`), missed runs coalesced into one,
and a job that raises is logged and retried at its next interval; it never stops the scheduler.
Each cluster's jobs run in a shared thread pool sized so a slow cluster cannot starve the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from monitor.core.settings import AlertConfig, Intervals, RetentionConfig

log = logging.getLogger(__name__)


def run_intervals(
    intervals: Intervals | None = None,
    alert: AlertConfig | None = None,
    retention: RetentionConfig | None = None,
) -> dict[str, float]:
    """Seconds between runs of each job that records `collection_runs` rows, by its `job` name.

    The one job -> interval map: the daemon schedules the evaluate, retention and maintenance jobs
    with it, and the collection page reads it to tell a stale job from a one-off run. The collect
    and alert stages schedule from the same settings (`CollectStage._schedule`, `AlertStage.start`).
    """
    intervals = intervals or Intervals()
    return {
        "offsets": intervals.offsets_seconds,
        "metadata": intervals.metadata_seconds,
        "configs": intervals.metadata_seconds,
        "log_dirs": intervals.log_dirs_seconds,
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
            _logged(job_id, func),
            "interval",
            seconds=seconds,
            id=job_id,
            name=job_id,
            next_run_time=start,
            replace_existing=True,
        )

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
