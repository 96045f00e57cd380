"""Composition root: builds every stage from the settings, starts them, stops them in reverse,
and rolls back a failed start.

Constructors validate and never connect; `start()` connects. The order puts the lag first: the
store (the schema checked, today's partitions), the web server (its modules imported as it
starts: before the collectors' runs, whose second offsets run, asked for at once to read the
append times, would otherwise hold the import back), the collectors and the scheduler (the
offsets job's first run starts at once, the others' as their `first_run_in` says, counted from
there), then alert, act and push, which schedule their jobs on the running
scheduler. What can wait waits for the collectors' first answer, on a thread of its own
(`_AfterFirstAnswer`): the store's maintenance (rollups, retention) and the evaluate stage, whose
Spark (pyspark's import, the JVM) would otherwise hold the collectors and the web back for
seconds. The scheduler is stopped first (`_StopsFirst`), so no job runs while the stages stop.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from monitor.core.clock import Clock, SystemClock
from monitor.core.errors import ConfigError, MonitorError
from monitor.core.settings import Settings

if TYPE_CHECKING:  # the stages are imported only when enabled
    from sqlalchemy import Engine

    from monitor.act.repairs import RepairService
    from monitor.act.service import RetentionService
    from monitor.alert.config import Routing
    from monitor.collect.stage import CollectStage
    from monitor.core.scheduler import DueRun, Scheduler
    from monitor.expose.metrics.snapshot import MetricsSnapshot
    from monitor.store.service import StoreService

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
    _failure: BaseException | None = None

    def start(self) -> None:
        """Start every component in order; on failure stop the started ones in reverse and re-raise."""
        for component in self.components:
            log.info("starting %s", component.name)
            try:
                component.start()
            except BaseException as exc:
                known = isinstance(exc, MonitorError)  # it says what is wrong and the fix: no traceback
                reason = f" ({exc})" if known else ""
                log.error("%s failed to start%s; stopping what was started", component.name, reason,
                          exc_info=not known)  # fmt: skip
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

    def fail(self, exc: BaseException) -> None:
        """A component that starts in the background could not start: the daemon stops, and
        `run_until_signalled` raises `exc` as a failed start in the foreground does."""
        self._failure = exc
        self._stopping.set()

    def run_until_signalled(self) -> None:
        """Start, block until SIGTERM/SIGINT (or request_stop), then stop. The first signal stops
        gracefully: in-flight jobs finish their write before the scheduler shuts down."""

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
        if self._failure is not None:
            raise self._failure


@dataclass(frozen=True)
class Checked:
    """The operator files passed `check_operator_files`."""

    routing: Routing | None
    """The routing the check loaded (None with the alert stage off), for the settings the web
    layer takes from it."""


def check_operator_files(settings: Settings) -> Checked:
    """Load every file an operator edits that the enabled stages use (rule files, lag objectives,
    routing and ownership, retention policy), so that a bad one stops the daemon before anything starts.

    Raises ConfigError listing every problem as `file: line N: key.path: message`. Reads files
    only: no database, Kafka or Spark. The stages reload the files later; a bad edit then is
    reported on the run and the last good version stays in force.
    """
    errors: list[ConfigError] = []
    routing: Routing | None = None
    if settings.evaluate.enabled:
        errors += _rule_file_problems(settings)
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
    return Checked(routing)


def _rule_file_problems(settings: Settings) -> list[ConfigError]:
    """The problems of the rule files and the lag objectives; none without checking them when
    these exact files passed the check at a start before, with this code (`PassedChecks`: the
    rule files' check is a few tenths of a second the collectors would wait for)."""
    from monitor.core.passed_checks import PassedChecks, fingerprint
    from monitor.evaluate.rule_files import rule_files

    files = rule_files(settings.evaluate.rules_dir)
    objectives = settings.evaluate.objectives_file
    digest = fingerprint([*files, *([objectives] if objectives is not None else [])])
    passed = PassedChecks()
    if passed.passed("rules", digest):
        return []
    from monitor.evaluate.rules import load_rules

    errors = list(load_rules(files).errors)
    if objectives is not None:
        from monitor.core.objectives import load_objectives

        try:
            load_objectives(objectives)
        except ConfigError as exc:
            errors.append(exc)
    if not errors:
        passed.remember("rules", digest)
    return errors


def find_jdbc_jar(settings: Settings) -> Callable[[], Path]:
    """`spark.jdbc_jar`, else the driver `kafka-health setup` installs (never fetched here: the
    evaluate stage refuses to start, naming the fix, when it is missing)."""
    if settings.spark.jdbc_jar is not None:
        configured = settings.spark.jdbc_jar
        return lambda: configured
    from monitor.evaluate.jdbc_driver import driver_path

    return driver_path


@dataclass
class Wiring:
    """What every stage's build step reads (the settings, the store, the scheduler, the clock) and
    what one step makes for a later one; `components` collects the stages started after the web
    server, `later` those started once the collectors have answered."""

    settings: Settings
    database_url: str
    clock: Clock
    routing: Routing | None
    scheduler: Scheduler
    store: StoreService
    intervals: dict[str, float]
    """Seconds between runs of every scheduled job, by name (`run_intervals`)."""
    due: DueRun
    """The evaluation that waits for the next sample (a pending alert's `for:` ran out)."""
    collect: CollectStage | None = None
    components: list[Component] = field(default_factory=list)
    later: list[Callable[[], Component]] = field(default_factory=list)
    retention: RetentionService | None = None
    repairs: RepairService | None = None
    snapshot: MetricsSnapshot | None = None

    def engine(self) -> Engine:
        """The store's engine (it exists once the store has started)."""
        return self.store.engine


def build_app(
    settings: Settings, database_url: str, clock: Clock | None = None, checked: Checked | None = None
) -> App:
    """Wire the stages for `settings` against the database at `database_url`. Connects nothing.

    Raises ConfigError when an operator file is invalid (`check_operator_files`; not again when
    `checked` says the caller checked them)."""
    checked = checked or check_operator_files(settings)
    for warning in settings.warnings():
        log.warning("configuration: %s", warning)
    from monitor.collect.jobs import job_intervals
    from monitor.core.scheduler import DueRun, Scheduler, run_intervals
    from monitor.store.service import StoreService

    clock = clock or SystemClock()
    scheduler = Scheduler()
    wiring = Wiring(
        settings,
        database_url,
        clock,
        checked.routing,
        scheduler,
        StoreService(database_url, settings.database, clock),
        run_intervals(
            settings.intervals, settings.alert, settings.retention, collect=job_intervals(settings.intervals)
        ),
        # a pending alert whose `for:` runs out is evaluated at the first sample after that
        DueRun(scheduler, "evaluate"),
    )
    # Stages never call one another: each step below hands a stage the scheduler's `run_soon` of
    # the next one (a critical change evaluates now, changed findings run the alert cycle now).
    for step in (_collect, _evaluate, _alert, _act, _metrics):
        step(wiring)
    assert wiring.collect is not None
    later = _AfterFirstAnswer(
        wiring.collect.answered_in_full,
        wiring.intervals["offsets"],
        partial(scheduler.run_soon, "store:maintenance"),
        wiring.later,
    )
    app = App(
        [
            wiring.store,
            _web(wiring),
            wiring.collect,
            scheduler,
            *wiring.components,
            later,
            _StopsFirst(scheduler),
        ]
    )
    later.on_failure = app.fail
    return app


def _collect(w: Wiring) -> None:
    from monitor.collect.stage import CollectStage

    w.collect = CollectStage(
        w.settings.clusters,
        w.settings.intervals,
        w.settings.collect,
        w.engine,
        w.clock,
        w.scheduler,
        on_critical=lambda cluster: w.scheduler.run_soon("evaluate"),
        on_sample=w.due.sample_arrived,
    )


def _evaluate(w: Wiring) -> None:
    """The evaluate stage, built and started once the collectors have answered: its module
    imports pyspark, and its start may start the JVM. A critical change collected before then
    is evaluated as soon as it has started (`Scheduler.expect`)."""
    if not w.settings.evaluate.enabled:
        return

    def build() -> Component:
        from monitor.evaluate.stage import EvaluateStage

        return EvaluateStage(
            w.settings.spark,
            w.settings.evaluate,
            w.intervals["evaluate"],
            w.database_url,
            [c.name for c in w.settings.clusters],
            w.engine,
            w.clock,
            w.scheduler,
            find_jdbc_jar(w.settings),
            on_findings_changed=lambda: w.scheduler.run_soon("alert"),
            due=w.due,
        )

    w.scheduler.expect("evaluate")
    w.later.append(build)


def _alert(w: Wiring) -> None:
    if not w.settings.alert.enabled:
        return
    from monitor.alert.stage import AlertStage

    w.components.append(AlertStage(w.settings.alert, w.settings.web, w.engine, w.clock, w.scheduler))


def _act(w: Wiring) -> None:
    """The retention button and the repairs (the web's forms use them when enabled)."""
    if not w.settings.retention.enabled:
        return
    from monitor.act.stage import ActStage, build_repairs, build_service

    w.retention = build_service(w.settings, w.engine, w.clock)
    w.repairs = build_repairs(w.settings, w.engine, w.clock)
    w.components.append(ActStage(w.retention, w.scheduler, w.intervals["retention"], w.repairs))


def _metrics(w: Wiring) -> None:
    """One snapshot serves /metrics and the push targets, rebuilt when a new evaluation lands;
    the store's maintenance is scheduled beside it."""
    from monitor.expose.metrics.snapshot import MetricsSnapshot

    settings = w.settings
    no_partition_series = [c.name for c in settings.clusters if not c.partition_series]
    w.snapshot = MetricsSnapshot(w.engine, settings.metrics, keep=settings.push.metric_names(),
                                 partition_series_off=no_partition_series)  # fmt: skip
    if settings.push.targets():
        from monitor.expose.metrics.push.stage import PushStage

        w.components.append(PushStage(settings.push, w.snapshot.families, w.clock, w.scheduler))
    w.scheduler.every("metrics:snapshot", settings.metrics.snapshot_check_seconds, w.snapshot.check,
                      first_run_in=min(settings.metrics.snapshot_check_seconds, 5))  # fmt: skip
    w.scheduler.every("store:maintenance", w.intervals["maintenance"], w.store.maintain,
                      first_run_in=w.intervals["maintenance"])  # fmt: skip


def _web(w: Wiring) -> Component:
    """The web server, built when it starts (the app needs the store's engine), its modules
    imported then too."""
    settings, routing = w.settings, w.routing
    stale_after = timedelta(
        seconds=3 * max(settings.intervals.metadata_seconds, settings.intervals.offsets_seconds)
    )
    # the web forms and API bound silences as the routing file says
    silence_max_seconds = routing.settings.silence_max_duration if routing is not None else 7 * 86400

    def build() -> Component:
        from monitor.expose.web.app import create_app
        from monitor.expose.web.inbox import inbox_paths
        from monitor.expose.web.server import WebServer

        inboxes = inbox_paths(routing) if routing is not None else {}
        app = create_app(w.engine(), stale_after=stale_after, clock=w.clock, retention=w.retention,
                         repairs=w.repairs, identity=settings.web.identity, snapshot=w.snapshot,
                         job_intervals=w.intervals, inboxes=inboxes, silence_max_seconds=silence_max_seconds,
                         max_silences_per_team=settings.alert.max_silences_per_team,
                         ack_link_seconds=settings.alert.ack_link_seconds,
                         rules_dir=settings.evaluate.rules_dir, hsts=settings.web.behind_tls)  # fmt: skip
        return WebServer(app, settings.web.host, settings.web.port)

    return _LazyWeb(build)


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


class _AfterFirstAnswer:
    """What waits for the collectors' first answer (each cluster's offsets job has answered the
    lag and read the append times its first run left: `CollectStage.answered_in_full`; or at
    most `wait_at_most` seconds): `first` (the store's maintenance, run on the scheduler), then the
    stages of `later`, built and started in order on a thread of their own, so that the start of
    the daemon, its collectors and its web server do not wait for them, nor share the CPUs with
    them before the lag is answered. A stage that cannot start stops the daemon
    (`on_failure`: `App.fail`), as a failed start in the foreground does."""

    name = "after the first answer"

    def __init__(
        self,
        answered: Callable[[float], bool],
        wait_at_most: float,
        first: Callable[[], object],
        later: Sequence[Callable[[], Component]],
    ) -> None:
        self._answered = answered
        self._wait_at_most = wait_at_most
        self._first = first
        self._later = later
        self._stages: App | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_failure: Callable[[BaseException], object] = lambda exc: None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="after-first-answer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        waited = time.monotonic()
        while not self._answered(0.1):
            if self._stopping.is_set():
                return
            if time.monotonic() - waited >= self._wait_at_most:
                log.info(
                    "no first answer from the collectors after %.0f s: starting the rest", self._wait_at_most
                )
                break
        self._first()
        try:
            self._stages = App([build() for build in self._later])
            self._stages.start()
        except BaseException as exc:
            log.error("the daemon stops: a stage started after the first answer failed: %s", exc)
            self.on_failure(exc)

    def stop(self) -> None:
        """Wait for a stage that is starting (a JVM), then stop the started ones in reverse."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        if self._stages is not None:
            self._stages.stop()


class _StopsFirst:
    """The scheduler, started in its place (before the stages that schedule jobs) but stopped
    before every stage: no job runs while a stage stops (its own place's stop does nothing)."""

    name = "the scheduler's jobs"

    def __init__(self, scheduler: Component) -> None:
        self._scheduler = scheduler

    def start(self) -> None:  # the scheduler started in its place
        pass

    def stop(self) -> None:
        self._scheduler.stop()
