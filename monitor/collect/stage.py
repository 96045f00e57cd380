"""The collect stage as an app component: one collector per configured cluster, each job on the
scheduler. A cluster whose admin client cannot be built is disabled with its error recorded as a
failed run; the other clusters are collected as usual."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sqlalchemy import Engine

from monitor.clock import Clock
from monitor.collect.metadata import collect_metadata
from monitor.collect.runs import Run, RunRecorder
from monitor.config import ClusterConfig, Intervals
from monitor.errors import MonitorError
from monitor.kafka import KafkaAdmin
from monitor.scheduler import Scheduler

log = logging.getLogger(__name__)


class ClusterCollector:
    """The jobs of one cluster. Each job is wrapped in a recorded run."""

    def __init__(self, cluster: ClusterConfig, engine: Engine, clock: Clock, recorder: RunRecorder) -> None:
        self.cluster = cluster
        self._engine = engine
        self._clock = clock
        self._recorder = recorder
        self._admin = KafkaAdmin(cluster)

    def start(self) -> None:
        self._admin.start()

    def stop(self) -> None:
        self._admin.close()

    def _job(self, name: str, body: Callable[[Run], None]) -> None:
        with self._recorder.run(self.cluster.name, name) as run:
            body(run)

    def metadata(self) -> None:
        self._job(
            "metadata",
            lambda run: collect_metadata(run, self.cluster, self._admin, self._engine, self._clock),
        )


class CollectStage:
    name = "collect"

    def __init__(
        self,
        clusters: Sequence[ClusterConfig],
        intervals: Intervals,
        engine: Callable[[], Engine],
        clock: Clock,
        scheduler: Scheduler,
    ) -> None:
        self._clusters = list(clusters)
        self._intervals = intervals
        self._engine = engine
        self._clock = clock
        self._scheduler = scheduler
        self.collectors: dict[str, ClusterCollector] = {}

    def start(self) -> None:
        engine = self._engine()
        recorder = RunRecorder(engine, self._clock)
        for cluster in self._clusters:
            collector = ClusterCollector(cluster, engine, self._clock, recorder)
            try:
                collector.start()
            except MonitorError as exc:
                log.error("cluster %s is disabled: %s", cluster.name, exc)
                with recorder.run(cluster.name, "start") as run:
                    run.problem(f"cluster disabled: {exc}")
                continue
            self.collectors[cluster.name] = collector
            self._scheduler.every(
                f"{cluster.name}:metadata", self._intervals.metadata_seconds, collector.metadata
            )

    def stop(self) -> None:
        for collector in self.collectors.values():
            collector.stop()
        self.collectors.clear()
