"""The collect stage as an app component.

One `ClusterCollector` per configured cluster, running every job of the registry
(`monitor.collect.jobs.JOBS`: metadata, configs, offsets, log dirs, and the end-to-end probe
when `collect.probe.enabled`) at its interval. Policy:

- a cluster whose client cannot be built (bad config) is disabled with its error recorded as a
  failed run; the other clusters are collected as usual;
- jobs run in the scheduler's pool, one instance of each at a time; every Kafka call has a
  timeout, so a slow or unreachable cluster occupies only its own jobs' threads;
- several daemons may share one database: a cluster is collected only by the instance holding its
  lease in PostgreSQL (`leases`), renewed every third of its TTL; when the holder stops renewing,
  another instance takes the cluster over within two lease periods;
- sample writes go through one `BufferedWriter`, so a PostgreSQL outage queues samples (bounded)
  and the queue is flushed when the database is back;
- the first run of every cluster's offsets job is the lag's first answer after a start
  (`first_answer`); the daemon starts what can wait (Spark, the store's maintenance) once the
  job has also read the append times that run left for the next (`answered_in_full`: at most
  its second run, asked for at once), so that neither takes the CPUs from the collectors and
  the web server while the lag is first asked for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from monitor.collect.clients import Clients
from monitor.collect.context import ClusterContext, JobRun
from monitor.collect.jobs import JOBS, offsets
from monitor.core.clock import Clock
from monitor.core.errors import MonitorError, StoreUnavailableError
from monitor.core.gc_pause import gc_paused
from monitor.core.scheduler import Scheduler
from monitor.core.settings import ClusterConfig, CollectConfig, Intervals
from monitor.kafka.protocol import Client
from monitor.store import leases
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import Run, RunRecorder, instance_name

log = logging.getLogger(__name__)

ANSWER_JOB = offsets.JOB.name
"""The job whose first run answers every group-partition's lag (`first_answer`)."""
ANSWER_RUNS = 2
"""The runs of the answer job after which a cluster's lag is answered in full whatever they read
(`answered_in_full`): the first reads no append time, the second the append times its budget
allows."""


class ClusterCollector:
    """The clients and jobs of one cluster. Each job runs wrapped in a recorded run."""

    def __init__(
        self,
        cluster: ClusterConfig,
        engine: Engine,
        clock: Clock,
        recorder: RunRecorder,
        writer: BufferedWriter,
        config: CollectConfig,
        on_critical: Callable[[str], object] | None = None,
        clients: Mapping[str, Client] | None = None,
        on_sample: Callable[[str, str, datetime], object] | None = None,
        intervals: Intervals | None = None,
        run_soon: Callable[[str], object] | None = None,
        run_later: Callable[[str, float], object] | None = None,
    ) -> None:
        self.cluster = cluster
        self._recorder = recorder
        jobs = [job for job in JOBS.values() if job.enabled(config)]
        made = Clients(cluster, config, clients)
        made.make(kind for job in jobs for kind in job.clients)
        self.context = ClusterContext(
            cluster,
            made,
            engine,
            writer,
            clock,
            config,
            on_critical,
            intervals=intervals or Intervals(),
            run_soon=run_soon,
            run_later=run_later,
            on_sample=on_sample,
        )
        self.runners: dict[str, JobRun] = {job.name: job.build(self.context) for job in jobs}

    def start(self) -> None:
        """Start the clients the jobs declared (no connection yet); raises ConfigError for a bad
        cluster config."""
        self.context.clients.start()

    def stop(self) -> None:
        for close in reversed(self.context.closers):
            close()
        self.context.clients.close()

    def run(self, job: str) -> Run:
        """One run of `job` (a name of `monitor.collect.jobs.JOBS`), recorded in `collection_runs`."""
        runner = self.runners.get(job)
        if runner is None:
            raise ValueError(f"no collector job {job!r}; the jobs are {', '.join(sorted(self.runners))}")
        with self._recorder.run(self.cluster.name, job) as record, gc_paused():
            runner(record)
        self.context.recorded(record)
        return record


class CollectStage:
    name = "collect"

    def __init__(
        self,
        clusters: Sequence[ClusterConfig],
        intervals: Intervals,
        config: CollectConfig,
        engine: Callable[[], Engine],
        clock: Clock,
        scheduler: Scheduler,
        instance: str | None = None,
        on_critical: Callable[[str], object] | None = None,
        on_sample: Callable[[str, str, datetime], object] | None = None,
    ) -> None:
        """`on_critical`: a change critical rules depend on; `on_sample`: a run ended and was
        recorded (ClusterContext)."""
        self._on_critical = on_critical
        self._on_sample = on_sample
        self._clusters = list(clusters)
        self._intervals = intervals
        self._config = config
        self._engine = engine
        self._clock = clock
        self._scheduler = scheduler
        self.instance = instance or instance_name()
        self.collectors: dict[str, ClusterCollector] = {}
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._first_answer = threading.Event()
        self._answer_runs: dict[str, int] = {}
        self._unanswered: set[str] = set()  # clusters whose latest answer run did not reach them
        self._in_full: set[str] = set()
        self._answered_in_full = threading.Event()
        self._started_at = 0.0
        self.writer: BufferedWriter | None = None

    def start(self) -> None:
        self._started_at = time.monotonic()
        engine = self._engine()
        self.writer = BufferedWriter(engine, self._config.buffer_max_rows, self._clock)
        recorder = RunRecorder(engine, self._clock, self.instance, self.writer)
        for cluster in self._clusters:
            collector = ClusterCollector(
                cluster,
                engine,
                self._clock,
                recorder,
                self.writer,
                self._config,
                self._on_critical,
                intervals=self._intervals,
                run_soon=self._run_soon(cluster.name),
                run_later=self._run_later(cluster.name),
                on_sample=self._on_sample,
            )
            try:
                collector.start()
            except MonitorError as exc:
                log.error("cluster %s is disabled: %s", cluster.name, exc)
                with recorder.run(cluster.name, "start") as run:
                    run.problem(f"cluster disabled: {exc}")
                collector.stop()
                continue
            self.collectors[cluster.name] = collector
            self._schedule(collector)
        lease_every = self._config.lease_ttl_seconds / 3
        self._scheduler.every("collect:leases", lease_every, self.renew_leases)
        self._scheduler.every("collect:flush", 5.0, self._flush)
        self.renew_leases()
        if not self.collectors:
            self._first_answer.set()
            self._answered_in_full.set()

    def _schedule(self, collector: ClusterCollector) -> None:
        name = collector.cluster.name
        for job in JOBS.values():
            if job.name not in collector.runners:
                continue
            self._scheduler.every(
                f"{name}:{job.name}",
                job.interval(self._intervals),
                self._leased(collector, job.name),
                first_run_in=job.first_run_in,
                pool=f"collect:{name}",
            )

    def _run_soon(self, cluster: str) -> Callable[[str], object]:
        """Run a job of `cluster` now rather than at its next tick (when this instance holds the
        cluster: the scheduled run checks the lease)."""

        def run_soon(job: str) -> object:
            return self._scheduler.run_soon(f"{cluster}:{job}")

        return run_soon

    def _run_later(self, cluster: str) -> Callable[[str, float], object]:
        """Run a job of `cluster` once, some seconds from now (as `_run_soon` then)."""

        def run_later(job: str, seconds: float) -> object:
            return self._scheduler.run_later(f"{cluster}:{job}", seconds)

        return run_later

    def _leased(self, collector: ClusterCollector, job: str) -> Callable[[], None]:
        name = collector.cluster.name

        def run() -> None:
            held, reached = False, True  # a cluster another instance holds is not unanswered
            try:
                if self.holds(name):
                    held, reached = True, False  # as it stays when the run raises
                    reached = collector.run(job).reached is not None
            finally:
                if job == ANSWER_JOB:
                    filling = getattr(collector.runners.get(ANSWER_JOB), "filling", False)
                    self._answer_ended(name, in_full=not (held and filling), reached=reached)

        return run

    def _answer_ended(self, cluster: str, in_full: bool, reached: bool = True) -> None:
        """A run of `cluster`'s answer job ended (`in_full`: nothing is left for the next;
        `reached`: it reached the cluster, or another instance holds it)."""
        if self._answered_in_full.is_set():  # every later offsets run: nothing to count
            return
        with self._lock:
            if reached:
                self._unanswered.discard(cluster)
            else:
                self._unanswered.add(cluster)
            silent = f" (no answer from {', '.join(sorted(self._unanswered))})" if self._unanswered else ""
            runs = self._answer_runs[cluster] = self._answer_runs.get(cluster, 0) + 1
            if in_full or runs >= ANSWER_RUNS:
                self._in_full.add(cluster)
            first = self._answer_runs.keys() >= self.collectors.keys() and not self._first_answer.is_set()
            full = self._in_full >= self.collectors.keys() and not self._answered_in_full.is_set()
            if first:
                self._first_answer.set()
            if full:
                self._answered_in_full.set()
        seconds = time.monotonic() - self._started_at
        if first:
            log.info(
                "first answer: every cluster's offsets run is over%s, %.1f s after the collectors started",
                silent,
                seconds,
            )
        if full:
            log.info(
                "lag answered in full: every cluster's offsets job has read its append times%s, %.1f s "
                "after the collectors started",
                silent,
                seconds,
            )

    def first_answer(self, timeout: float) -> bool:
        """Wait, at most `timeout` seconds, until the first offsets run of every cluster is over
        (the lag answered, the run failed, or another instance holds the cluster); whether it is."""
        return self._first_answer.wait(timeout)

    def answered_in_full(self, timeout: float) -> bool:
        """Wait, at most `timeout` seconds, until every cluster's offsets job has also read the
        append times its first run left for the next (or has run `ANSWER_RUNS` times, failed, or
        another instance holds the cluster); whether it has."""
        return self._answered_in_full.wait(timeout)

    def holds(self, cluster: str) -> bool:
        with self._lock:
            return cluster in self._held

    def renew_leases(self) -> None:
        """Take or renew the lease of every cluster; drop those another instance holds.

        With the database unreachable, the leases held are kept until their TTL runs out (the
        other instances cannot take them over either), then dropped.
        """
        held: set[str] = set()
        try:
            with self._engine().begin() as conn:
                for name in self.collectors:
                    if leases.acquire(conn, f"collect:{name}", self.instance, self._config.lease_ttl_seconds):
                        held.add(name)
        except (StoreUnavailableError, SQLAlchemyError) as exc:
            log.warning("cannot renew collection leases: %s", exc)
            return
        with self._lock:
            gained, lost = held - self._held, self._held - held
            self._held = held
        for name in sorted(gained):
            log.info("collecting cluster %s (lease taken by %s)", name, self.instance)
        for name in sorted(lost):
            log.info("cluster %s is collected by another instance now", name)

    def _flush(self) -> None:
        if self.writer is not None and self.writer.pending_writes:
            self.writer.flush()

    def stop(self) -> None:
        if self.writer is not None:
            self.writer.flush()
        try:
            with self._engine().begin() as conn:
                for name in sorted(self._held):
                    leases.release(conn, f"collect:{name}", self.instance)
        except (StoreUnavailableError, SQLAlchemyError) as exc:
            log.warning("cannot release collection leases: %s", exc)
        self._held.clear()
        for collector in self.collectors.values():
            collector.stop()
        self.collectors.clear()
