"""Composition root: builds every stage from the settings, starts them in flow order, stops them
in reverse, and rolls back a failed start.

Constructors validate and never connect; `start()` connects. The order is the flow:
store -> collect -> evaluate -> alert -> act -> expose, with the scheduler started last so that
no job runs before every stage it needs is up.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from monitor.core.clock import Clock, SystemClock
from monitor.core.errors import ConfigError
from monitor.core.settings import Settings

if TYPE_CHECKING:  # the alert stage is imported only when enabled
    from monitor.alert.config import Routing

log = logging.getLogger(__name__)


class Component(Protocol):
    """A runtime part of the service.

    `start()` may block while it connects (bounded by its own timeouts) and raises a MonitorError
    when it cannot start; `stop()` never raises and is safe to call on a component that did not
    finish starting.
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class App:
    components: Sequence[Component]
    _started: list[Component] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        """Start every component in order; on failure stop the started ones in reverse and re-raise."""
        for component in self.components:
            log.info("starting %s", component.name)
            try:
                component.start()
            except BaseException:
                log.exception("%s failed to start; stopping what was started", component.name)
                self.stop()
                raise
            self._started.append(component)

    def stop(self) -> None:
        """Stop the started components in reverse order. Idempotent."""
        while self._started:
            component = self._started.pop()
            log.info("stopping %s", component.name)
            try:
                component.stop()
            except Exception:  # a failing stop must not keep the others running
                log.exception("%s did not stop cleanly", component.name)
        self._stopping.set()

    def request_stop(self) -> None:
        self._stopping.set()

    def run_until_signalled(self) -> None:
        """Start, block until SIGTERM/SIGINT (or request_stop), then stop.

        The first signal stops gracefully: in-flight jobs finish their write before the scheduler
        shuts down.
        """

        def handler(signum: int, frame: FrameType | None) -> None:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            self._stopping.set()

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
        self._stopping.clear()
        try:
            self.start()
            while not self._stopping.wait(timeout=1.0):
                pass
        finally:
            self.stop()
            for sig, old in previous.items():
                signal.signal(sig, old)


def check_operator_files(settings: Settings) -> Routing | None:
    """Load every file an operator edits that the enabled stages use (rule files, routing and
    ownership, retention policy), so that a bad one stops the daemon before anything starts.
    Returns the routing the checks loaded (None with the alert stage off), for the settings the
    web layer takes from it.

    Raises ConfigError listing every problem as `file: line N: key.path: message`. Reads files
    only: no database, Kafka or Spark. The stages reload the files later; a bad edit then is
    reported on the run and the last good version stays in force.
    """
    errors: list[ConfigError] = []
    routing: Routing | None = None
    if settings.evaluate.enabled:
        from monitor.evaluate.rules import load_rules, rule_files

        errors += load_rules(rule_files(settings.evaluate.rules_dir)).errors
    if settings.alert.enabled:
        from monitor.alert.config import check_routing, routing_paths

        routing, problems = check_routing(*routing_paths(settings.alert))
        errors += problems
    if settings.retention.enabled:
        from monitor.act.policy import default_policy_path, load_policy
        from monitor.core.owners import load_owners_file, owners_file

        checks: list[Callable[[], object]] = [
            partial(load_policy, settings.retention.policy_file or default_policy_path()),
            partial(load_owners_file, owners_file(settings.alert)),
        ]
        for check in checks:
            try:
                check()
            except ConfigError as exc:
                errors.append(exc)
    if settings.push.targets():
        from monitor.expose.metrics.push.stage import check_push

        try:
            check_push(settings.push)
        except ConfigError as exc:
            errors.append(exc)
    if errors:
        unique = {(error.source, problem): None for error in errors for problem in error.problems}
        raise ConfigError([f"{source}: {problem}" for source, problem in unique], "configuration")
    return routing


def find_jdbc_jar(settings: Settings) -> Callable[[], Path]:
    """`spark.jdbc_jar`, else the driver `kafka-health setup` installs (never fetched here: the
    evaluate stage refuses to start, naming the fix, when it is missing)."""
    if settings.spark.jdbc_jar is not None:
        configured = settings.spark.jdbc_jar
        return lambda: configured
    from monitor.evaluate.jdbc_driver import driver_path

    return driver_path


def build_app(settings: Settings, database_url: str, clock: Clock | None = None) -> App:
    """Wire the stages for `settings` against the database at `database_url`. Connects nothing.

    Raises ConfigError when an operator file is invalid (`check_operator_files`)."""
    from datetime import timedelta

    routing = check_operator_files(settings)
    for warning in settings.warnings():
        log.warning("configuration: %s", warning)

    from monitor.collect.jobs import job_intervals
    from monitor.collect.stage import CollectStage
    from monitor.core.scheduler import DueRun, Scheduler, run_intervals
    from monitor.expose.web.app import create_app
    from monitor.expose.web.inbox import inbox_paths
    from monitor.expose.web.server import WebServer
    from monitor.store.service import StoreService

    clock = clock or SystemClock()
    intervals = run_intervals(
        settings.intervals, settings.alert, settings.retention, collect=job_intervals(settings.intervals)
    )
    scheduler = Scheduler(max_workers=max(4, 2 * len(settings.clusters)))
    store = StoreService(database_url, settings.database, clock)
    # Stages never call one another: a collection that sees a critical change asks the scheduler
    # for an evaluation now, and an evaluation that changed findings for the alert cycle now; a
    # pending alert whose `for:` runs out is evaluated at the first sample after that (`due`).
    due = DueRun(scheduler, "evaluate")
    collect = CollectStage(
        settings.clusters,
        settings.intervals,
        settings.collect,
        lambda: store.engine,
        clock,
        scheduler,
        on_critical=lambda cluster: scheduler.run_soon("evaluate"),
        on_sample=lambda cluster: due.sample_arrived(clock.now()),
    )
    stale_after = timedelta(
        seconds=3 * max(settings.intervals.metadata_seconds, settings.intervals.offsets_seconds)
    )
    components: list[Component] = [store, collect]
    if settings.evaluate.enabled:
        from monitor.evaluate.stage import EvaluateStage

        components.append(
            EvaluateStage(
                settings.spark,
                settings.evaluate,
                intervals["evaluate"],
                database_url,
                [c.name for c in settings.clusters],
                lambda: store.engine,
                clock,
                scheduler,
                find_jdbc_jar(settings),
                on_findings_changed=lambda: scheduler.run_soon("alert"),
                due=due,
            )
        )
    if settings.alert.enabled:
        from monitor.alert.stage import AlertStage

        components.append(AlertStage(settings.alert, settings.web, lambda: store.engine, clock, scheduler))
    from monitor.act.repairs import RepairService
    from monitor.act.service import RetentionService

    retention: RetentionService | None = None
    repairs: RepairService | None = None
    if settings.retention.enabled:
        from monitor.act.stage import ActStage, build_repairs, build_service

        retention = build_service(settings, lambda: store.engine, clock)
        repairs = build_repairs(settings, lambda: store.engine, clock)
        components.append(ActStage(retention, scheduler, intervals["retention"], repairs))
    # the web forms and API bound silences as the routing file says
    silence_max_seconds = routing.settings.silence_max_duration if routing is not None else 7 * 86400
    inboxes = inbox_paths(routing) if routing is not None else {}
    from monitor.expose.metrics.snapshot import MetricsSnapshot

    # /metrics and the push targets serve one snapshot, rebuilt when a new evaluation lands
    no_partition_series = [c.name for c in settings.clusters if not c.partition_series]
    snapshot = MetricsSnapshot(lambda: store.engine, settings.metrics, keep=settings.push.metric_names(),
                               partition_series_off=no_partition_series)  # fmt: skip
    web = _LazyWeb(lambda: WebServer(create_app(store.engine, stale_after=stale_after, clock=clock,
                                                retention=retention, repairs=repairs,
                                                identity=settings.web.identity,
                                                snapshot=snapshot, job_intervals=intervals,
                                                inboxes=inboxes, silence_max_seconds=silence_max_seconds,
                                                max_silences_per_team=settings.alert.max_silences_per_team,
                                                ack_link_seconds=settings.alert.ack_link_seconds,
                                                rules_dir=settings.evaluate.rules_dir,
                                                hsts=settings.web.behind_tls),
                                     settings.web.host, settings.web.port))  # fmt: skip
    if settings.push.targets():
        from monitor.expose.metrics.push.stage import PushStage

        components.append(PushStage(settings.push, snapshot.families, clock, scheduler))
    scheduler.every("metrics:snapshot", settings.metrics.snapshot_check_seconds, snapshot.refresh,
                    first_run_in=min(settings.metrics.snapshot_check_seconds, 5))  # fmt: skip
    scheduler.every("store:maintenance", intervals["maintenance"], store.maintain,
                    first_run_in=intervals["maintenance"])  # fmt: skip
    return App([*components, web, scheduler])


class _LazyWeb:
    """The web server needs the store's engine, which exists only once the store has started."""

    name = "web"

    def __init__(self, build: Callable[[], Component]) -> None:
        self._build = build
        self._server: Component | None = None

    def start(self) -> None:
        self._server = self._build()
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
