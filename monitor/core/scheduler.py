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

log = logging.getLogger(__name__)


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
