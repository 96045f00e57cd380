"""Every scheduled job (collection, evaluation) runs inside a `RunRecorder`, which writes one
`collection_runs` row.

Partial-failure policy (the same for every job):
- a step that fails for some entities (one topic, one group, one broker) is recorded as a problem
  and the run ends `partial`; the other entities' samples are still written;
- a failure that leaves nothing to write (cluster unreachable, every broker down) ends the run
  `failed` with the error; nothing is written but the run row;
- the run row is written in its own transaction after the samples, so a failed sample write is
  visible too. When the database itself is down, the run row is queued in the same buffered
  writer as the samples and written, in order, when the database is back. A job without samples
  (evaluation, alerting, retention) queues its run rows in a writer of its own, up to
  `RUN_ROWS_QUEUED`, written at its next run once the database is back: the runs of an outage
  are recorded, failed ones with their error, and a run the outage interrupted does not stay
  `running`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import Counter, Histogram
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from monitor.core.clock import Clock
from monitor.core.errors import MonitorError, StoreUnavailableError
from monitor.core.vocabulary import REACHED_RUN_STATUSES, WRITING_RUN_STATUSES
from monitor.store.buffer import BufferedWriter
from monitor.store.metadata import finish_run, insert_finished_run, start_run

log = logging.getLogger(__name__)

MAX_ERROR_LENGTH = 2000
RUN_ROWS_QUEUED = 10_000

RUNS = Counter(
    "kafka_health_collection_runs_total",
    "Job runs (collection, evaluation, alerting) this process finished, by cluster, job and status.",
    ["cluster", "job", "status"],
)
RUN_SECONDS = Histogram(
    "kafka_health_collection_run_duration_seconds",
    "Wall time of this process's job runs, by cluster and job.",
    ["cluster", "job"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300),
)


def instance_name() -> str:
    """Who collected: host and process, so two daemons sharing a database can be told apart."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Run:
    """What one job did: counts of what it sampled and the problems that made it partial."""

    cluster: str | None
    job: str
    started_at: datetime
    run_id: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    finished_at: datetime | None = None
    """When it ended (set as the run is recorded)."""
    status: str | None = None
    """How it ended: ok, partial or failed (set as the run is recorded)."""

    @property
    def reached(self) -> datetime | None:
        """When it ended, having reached its cluster (ok or partial); None otherwise or not yet."""
        return self.finished_at if self.status in REACHED_RUN_STATUSES else None

    def count(self, key: str, value: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + value

    def problem(self, message: str) -> None:
        """A step failed for some entities; the run ends `partial`."""
        log.warning("%s/%s: %s", self.cluster, self.job, message)
        self.problems.append(message)

    def problems_from(self, what: str, errors: Mapping[str, str], limit: int | None = 20) -> None:
        """One problem per failed entity of a partial result (`Partial.errors`), at most `limit`
        of them plus a count of the rest."""
        items = sorted(errors.items())
        for key, message in items[:limit]:
            self.problem(f"{what} {key}: {message}")
        if limit is not None and len(items) > limit:
            self.problem(f"... and {len(items) - limit} more {what} failures")


class RunRecorder:
    def __init__(
        self, engine: Engine, clock: Clock, instance: str | None = None, writer: BufferedWriter | None = None
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._instance = instance or instance_name()
        self._writer = writer or BufferedWriter(engine, RUN_ROWS_QUEUED, clock)

    @contextmanager
    def run(self, cluster: str | None, job: str) -> Iterator[Run]:
        """Record the block as one run. Exceptions escaping the block mark it `failed` and are
        swallowed after logging (MonitorError) or re-raised (anything else, a bug)."""
        started = self._clock.now()
        t0 = self._clock.monotonic()
        run = Run(cluster=cluster, job=job, started_at=started)
        run.run_id = self._try_start(run)
        error: str | None = None
        bug: BaseException | None = None
        try:
            yield run
        except MonitorError as exc:
            error = str(exc)
        except Exception as exc:
            error = f"internal error: {type(exc).__name__}: {exc}"
            bug = exc
        status = "failed" if error else ("partial" if run.problems else "ok")
        if error is None and run.problems:
            error = "; ".join(run.problems)
        if error:
            log.warning("%s/%s %s: %s", cluster, job, status, error)
        seconds = self._clock.monotonic() - t0
        RUNS.labels(cluster or "", job, status).inc()
        RUN_SECONDS.labels(cluster or "", job).observe(seconds)
        self._finish(run, status, error, int(seconds * 1000))
        if bug is not None:
            raise bug

    def _try_start(self, run: Run) -> int | None:
        try:
            with self._engine.begin() as conn:
                return start_run(conn, run.cluster, run.job, self._instance, run.started_at)
        except (StoreUnavailableError, SQLAlchemyError) as exc:
            log.warning("cannot record the start of %s/%s: %s", run.cluster, run.job, exc)
            return None

    def _finish(self, run: Run, status: str, error: str | None, duration_ms: int) -> None:
        error = error[:MAX_ERROR_LENGTH] if error else None
        finished = self._clock.now()
        run.finished_at, run.status = finished, status
        counts = dict(run.counts)

        def write(conn: Connection, replay: bool) -> object:
            if run.run_id is not None:
                finish_run(
                    conn, run.run_id, finished_at=finished, duration_ms=duration_ms,
                    status=status, counts=counts, error=error,
                )  # fmt: skip
                return run.run_id
            return insert_finished_run(
                conn, cluster=run.cluster, job=run.job, instance=self._instance,
                started_at=run.started_at, finished_at=finished, duration_ms=duration_ms,
                status=status, counts=counts, error=error,
            )  # fmt: skip

        self._writer.submit(f"{run.cluster}:{run.job}:run", 1, write)


_NEWEST_REACHED = """
SELECT DISTINCT ON (cluster, job) cluster, job, started_at, finished_at FROM collection_runs
WHERE cluster = ANY(:clusters) AND job = ANY(:jobs) AND status = ANY(:reached)
  AND started_at > :since AND finished_at <= :at
ORDER BY cluster, job, finished_at DESC
"""


@dataclass(frozen=True)
class Reached:
    """The span of a run that reached its cluster: its samples were read between the two."""

    started_at: datetime
    finished_at: datetime


def newest_reached(
    conn: Connection, clusters: Collection[str], jobs: Collection[str], at: datetime, since: datetime
) -> dict[tuple[str, str], Reached]:
    """(cluster, job) -> its newest run that reached the cluster (ok or partial), started after
    `since` and finished by `at`: the newest samples that job wrote by `at`."""
    rows = conn.execute(
        text(_NEWEST_REACHED),
        {
            "clusters": list(clusters),
            "jobs": list(jobs),
            "at": at,
            "since": since,
            "reached": list(REACHED_RUN_STATUSES),
        },
    )
    return {
        (str(cluster), str(job)): Reached(started, finished) for cluster, job, started, finished in rows.all()
    }


_NEWEST_BEGUN = """
SELECT cluster, job, max(started_at) FROM collection_runs
WHERE cluster = ANY(:clusters) AND job = ANY(:jobs) AND status = ANY(:writing)
  AND started_at > :since AND started_at <= :by
GROUP BY cluster, job
"""


def newest_begun(
    conn: Connection, clusters: Collection[str], jobs: Collection[str], by: datetime, since: datetime
) -> dict[tuple[str, str], datetime]:
    """(cluster, job) -> the start of its newest run begun after `since` and by `by` that has not
    failed: reached, or still going. A run writes its samples before its row is finished, and
    the tables of latest values are read as they are when read, so a reader that read until `by`
    may have seen that run's samples, and nothing it saw of the job is older than that start."""
    rows = conn.execute(
        text(_NEWEST_BEGUN),
        {
            "clusters": list(clusters),
            "jobs": list(jobs),
            "by": by,
            "since": since,
            "writing": list(WRITING_RUN_STATUSES),
        },
    )
    return {(str(cluster), str(job)): started for cluster, job, started in rows.all()}
