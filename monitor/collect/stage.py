"""The collect stage as an app component.

One `ClusterCollector` per configured cluster, each with three scheduled jobs (offsets, metadata
and configs, log dirs). Policy:

- a cluster whose client cannot be built (bad config) is disabled with its error recorded as a
  failed run; the other clusters are collected as usual;
- jobs run in the scheduler's pool, one instance of each at a time; every Kafka call has a
  timeout, so a slow or unreachable cluster occupies only its own jobs' threads;
- several daemons may share one database: a cluster is collected only by the instance holding its
  lease in PostgreSQL (`leases`), renewed every third of its TTL; when the holder stops renewing,
  another instance takes the cluster over within two lease periods;
- sample writes go through one `BufferedWriter`, so a PostgreSQL outage queues samples (bounded)
  and the queue is flushed when the database is back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from monitor.collect.configs import collect_configs
from monitor.collect.logdirs import collect_log_dirs
from monitor.collect.metadata import collect_metadata
from monitor.collect.offsets import OffsetsCollector, Topology
from monitor.core.clock import Clock
from monitor.core.errors import MonitorError, StoreUnavailableError
from monitor.core.scheduler import Scheduler
from monitor.core.settings import ClusterConfig, CollectConfig, Intervals
from monitor.kafka import KafkaAdmin, LogDirClient, RecordTimestampReader
from monitor.store import leases
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import Run, RunRecorder, instance_name

log = logging.getLogger(__name__)


class ClusterCollector:
    """The clients and jobs of one cluster. Each job is wrapped in a recorded run."""

    def __init__(
        self,
        cluster: ClusterConfig,
        engine: Engine,
        clock: Clock,
        recorder: RunRecorder,
        writer: BufferedWriter,
        config: CollectConfig,
        on_critical: Callable[[str], object] | None = None,
    ) -> None:
        self.cluster = cluster
        self._on_critical = on_critical
        self._critical_seen: frozenset[object] = frozenset()
        self._engine = engine
        self._clock = clock
        self._recorder = recorder
        self._writer = writer
        self._admin = KafkaAdmin(cluster)
        self._reader = RecordTimestampReader(cluster)
        self._log_dirs = LogDirClient(cluster)
        self.offsets_collector = OffsetsCollector(
            cluster, self._admin, self._reader, engine, writer, clock, config
        )

    def start(self) -> None:
        """Build the clients (no connection yet); raises ConfigError for a bad cluster config."""
        self._admin.start()
        self._reader.start()
        self._log_dirs.start()

    def stop(self) -> None:
        self._log_dirs.close()
        self._reader.close()
        self._admin.close()

    def _job(self, name: str, body: Callable[[Run], None]) -> None:
        with self._recorder.run(self.cluster.name, name) as run:
            body(run)

    def offsets(self) -> None:
        def body(run: Run) -> None:
            self.offsets_collector.collect(run)
            self._critical(run, "offsets", self.offsets_collector.critical_changed)

        self._job("offsets", body)

    def _critical(self, run: Run, job: str, changed: bool) -> None:
        """Ask for an evaluation now when `changed` (a critical rule's input changed)."""
        if changed and self._on_critical is not None:
            run.count("evaluation_requested", 1)
            log.info("%s/%s: a change critical rules depend on; evaluating now", self.cluster.name, job)
            self._on_critical(self.cluster.name)

    def metadata(self) -> None:
        def body(run: Run) -> None:
            topics = collect_metadata(run, self.cluster, self._admin, self._clock, self._writer)
            self.offsets_collector.topology = Topology.of(topics, self._clock.now())
            # What critical rules depend on: a broker gone, a partition offline or with fewer
            # in-sync replicas (under min ISR is one of those). Evaluated at once when it grows.
            seen = frozenset(
                (t.name, p.partition, len(p.isr), p.offline)
                for t in topics
                for p in t.partitions
                if p.offline or p.under_replicated
            )
            grew = bool(seen - self._critical_seen)
            self._critical_seen = seen
            self._critical(run, "metadata", run.counts.get("brokers_went_down", 0) > 0 or grew)

        self._job("metadata", body)

    def configs(self) -> None:
        self._job(
            "configs", lambda run: collect_configs(run, self.cluster, self._admin, self._engine, self._clock)
        )

    def log_dirs(self) -> None:
        self._job(
            "log_dirs",
            lambda run: collect_log_dirs(
                run, self.cluster, self._admin, self._log_dirs, self._clock, self._writer
            ),
        )


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
    ) -> None:
        self._on_critical = on_critical
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
        self.writer: BufferedWriter | None = None

    def start(self) -> None:
        engine = self._engine()
        self.writer = BufferedWriter(engine, self._config.buffer_max_rows, self._clock)
        recorder = RunRecorder(engine, self._clock, self.instance, self.writer)
        for cluster in self._clusters:
            collector = ClusterCollector(
                cluster, engine, self._clock, recorder, self.writer, self._config, self._on_critical
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

    def _schedule(self, collector: ClusterCollector) -> None:
        name = collector.cluster.name
        i = self._intervals
        self._scheduler.every(f"{name}:metadata", i.metadata_seconds, self._leased(name, collector.metadata))
        self._scheduler.every(f"{name}:configs", i.metadata_seconds, self._leased(name, collector.configs))
        self._scheduler.every(
            f"{name}:offsets", i.offsets_seconds, self._leased(name, collector.offsets), first_run_in=1.0
        )
        self._scheduler.every(
            f"{name}:log_dirs", i.log_dirs_seconds, self._leased(name, collector.log_dirs), first_run_in=2.0
        )

    def _leased(self, cluster: str, job: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            if self.holds(cluster):
                job()

        return run

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
