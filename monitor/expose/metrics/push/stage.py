"""The push component: one scheduler job per target (`push:<name>`), each reading the state
metrics of the `/metrics` snapshot (`snapshot.MetricsSnapshot.families`, built once per
evaluation) and sending its selection. A target that is slow or away holds up only its own job."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from prometheus_client.metrics_core import Metric

from monitor.core.clock import Clock
from monitor.core.scheduler import Scheduler
from monitor.core.settings import PushConfig, RemoteWriteTarget
from monitor.expose.metrics.catalogue import STATE
from monitor.expose.metrics.push.cloudwatch import CloudWatchPusher
from monitor.expose.metrics.push.remote_write import RemoteWriter
from monitor.expose.metrics.push.series import check_names, select

log = logging.getLogger(__name__)

Families = Callable[[], Iterable[Metric]]


def check_push(config: PushConfig) -> None:
    """Raise ConfigError naming every pushed metric that is not a state metric."""
    known = [spec.name for spec in STATE]
    for target in config.remote_write:
        check_names(target.name, target.metrics, known, "remote_write")
    for cloudwatch in config.cloudwatch:
        check_names(cloudwatch.name, cloudwatch.metrics, known, "cloudwatch")


class PushStage:
    name = "push"

    def __init__(self, config: PushConfig, families: Families, clock: Clock, scheduler: Scheduler) -> None:
        check_push(config)
        self._config = config
        self._families = families
        self._clock = clock
        self._scheduler = scheduler
        self._writers: list[RemoteWriter | CloudWatchPusher] = []

    def start(self) -> None:
        for target in self._config.targets():
            sender: RemoteWriter | CloudWatchPusher = (
                RemoteWriter(target) if isinstance(target, RemoteWriteTarget) else CloudWatchPusher(target)
            )
            self._writers.append(sender)
            self._scheduler.every(f"push:{target.name}", target.interval_seconds, self._job(sender),
                                  first_run_in=min(target.interval_seconds, 10), pool="push")  # fmt: skip
        if self._writers:
            log.info("pushing to %s", ", ".join(w.target.name for w in self._writers))

    def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    def _job(self, sender: RemoteWriter | CloudWatchPusher) -> Callable[[], None]:
        def run() -> None:
            push_once(sender, self._families(), self._clock.now())

        return run


def push_once(sender: RemoteWriter | CloudWatchPusher, families: Iterable[Metric], now: datetime) -> int:
    """Select the target's series from `families` and send them at `now`; samples taken."""
    if isinstance(sender, RemoteWriter):
        series = select(families, sender.target.metrics, sender.target.clusters)
        return sender.push(series, int(now.astimezone(UTC).timestamp() * 1000))
    series = select(families, sender.target.metrics, sender.target.clusters)
    return sender.push(series, now)
