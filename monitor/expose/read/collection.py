"""What the collection health page reads: is the monitor still seeing its clusters?

Per cluster and job: the last run (status, start, duration, what it counted, its error), and how
old the newest successful run is compared with the job's interval. A job is stale when its newest
successful (`ok` or `partial`) run is older than `STALE_INTERVALS` intervals: the numbers on every
other page stop moving then, without anything looking wrong. Below, the recent failed and partial
runs with their errors; beside each cluster, its Kafka release and what that release cannot give.
Every job writes a `collection_runs` row (`monitor/store/runs.py`), so the page sees failures the
log alone would hide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.vocabulary import FAULTY_RUN_STATUSES, REACHED_RUN_STATUSES
from monitor.expose.read import queries
from monitor.expose.read.clusters import kafka_releases

STALE_INTERVALS = 3
"""Missed runs before a job counts as stale: one late run is normal under load, three are not
(the daemon's readiness check uses the same factor)."""

RECENT_FAILURES = 50

_LAST_SUCCESS = text(
    "SELECT cluster, job, max(finished_at) AS finished_at FROM collection_runs"
    " WHERE status = ANY(:reached) GROUP BY cluster, job"
)
_FAILURES = text(
    "SELECT id, cluster, job, instance, started_at, duration_ms, status, error FROM collection_runs"
    " WHERE status = ANY(:faulty) ORDER BY started_at DESC, id DESC LIMIT :limit"
)
_AS_OF = text("SELECT max(coalesce(finished_at, started_at)) FROM collection_runs")


@dataclass(frozen=True, slots=True)
class JobHealth:
    cluster: str | None
    job: str
    last: Mapping[str, Any]
    """The newest `collection_runs` row of the job."""
    last_success: datetime | None
    interval_seconds: float | None
    age_seconds: float | None
    """How old the newest successful run is; None when there never was one."""

    @property
    def stale(self) -> bool:
        if self.interval_seconds is None:  # a one-off job (a cluster disabled at start)
            return False
        return self.age_seconds is None or self.age_seconds > STALE_INTERVALS * self.interval_seconds

    @property
    def intervals_behind(self) -> float | None:
        if self.age_seconds is None or not self.interval_seconds:
            return None
        return self.age_seconds / self.interval_seconds


def job_health(
    last_runs: Sequence[Mapping[str, Any]],
    last_success: Mapping[tuple[str | None, str], datetime],
    intervals: Mapping[str, float],
    now: datetime,
) -> list[JobHealth]:
    """Per cluster and job, the last run and the age of the newest success against the interval."""
    rows = []
    for run in last_runs:
        key = (run["cluster"], run["job"])
        success = last_success.get(key)
        rows.append(
            JobHealth(
                cluster=run["cluster"],
                job=run["job"],
                last=run,
                last_success=success,
                interval_seconds=intervals.get(run["job"]),
                age_seconds=None if success is None else max((now - success).total_seconds(), 0.0),
            )
        )
    return sorted(rows, key=lambda r: (r.cluster is None, r.cluster or "", r.job))


def read_collection(conn: Connection, intervals: Mapping[str, float], now: datetime) -> dict[str, Any]:
    last = queries.last_runs(conn)
    success = {
        (r.cluster, r.job): r.finished_at
        for r in conn.execute(_LAST_SUCCESS, {"reached": list(REACHED_RUN_STATUSES)})
    }
    jobs = job_health(last, success, intervals, now)
    clusters: dict[str | None, list[JobHealth]] = {}
    for job in jobs:
        clusters.setdefault(job.cluster, []).append(job)
    as_of = conn.execute(_AS_OF).scalar()
    return {
        "clusters": clusters,
        "stale": [j for j in jobs if j.stale],
        "failures": [
            dict(r._mapping)
            for r in conn.execute(_FAILURES, {"limit": RECENT_FAILURES, "faulty": list(FAULTY_RUN_STATUSES)})
        ],
        "as_of": as_of if isinstance(as_of, datetime) else None,
        "kafka": kafka_releases(conn),
    }
