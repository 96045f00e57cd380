"""The collector jobs, registered in one table: job name -> `CollectorJob` (how to build its
runner, the interval setting it runs at, the tables it writes).

The collect stage schedules every job of this table for every cluster, and the daemon's one
job -> interval map (`monitor.core.scheduler.run_intervals`) takes the collect jobs' intervals
from `job_intervals`. Adding a job is one module here (its `JOB`) plus its table (a migration)
plus one line below.
"""

from __future__ import annotations

from typing import Final

from monitor.collect.context import CollectorJob
from monitor.collect.jobs import (
    commits,
    configs,
    end_offsets,
    log_dirs,
    metadata,
    offsets,
    probe,
    share_groups,
)
from monitor.core.settings import Intervals

JOBS: Final[dict[str, CollectorJob]] = {
    job.name: job
    for job in (
        metadata.JOB,
        configs.JOB,
        offsets.JOB,
        commits.JOB,
        end_offsets.JOB,
        log_dirs.JOB,
        probe.JOB,
        share_groups.JOB,
    )
}


def job_intervals(intervals: Intervals | None = None) -> dict[str, float]:
    """Seconds between runs of each collect job, by name, under `intervals` (default settings
    when None)."""
    settings = intervals or Intervals()
    return {name: job.interval(settings) for name, job in JOBS.items()}
