"""Composition root: builds every stage from the settings, starts them, stops them in reverse,
and rolls back a failed start.

Constructors validate and never connect; `start()` connects. The order puts the lag first: the
store (the schema checked, today's partitions), the web server (its modules imported as it
starts: before the collectors' runs, whose second offsets run, asked for at once to read the
append times, would otherwise hold the import back), the collectors and the scheduler (the
offsets job's first run starts at once, the others' as their `first_run_in` says, counted from
there), then alert, act and push, which schedule their jobs on the running
scheduler. What can wait waits for the collectors' first answer, on a thread of its own
(`AfterFirstAnswer`): the store's maintenance (the other days' partitions, rollups, retention)
and the evaluate stage, whose Spark (pyspark's import, the JVM) would otherwise hold the
collectors and the web back for seconds. The scheduler is stopped first (`StopsFirst`), so no
job runs while the stages stop, and what waits for the first answer is halted before it
(`monitor.core.lifecycle`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.core.clock import Clock, SystemClock
from monitor.core.errors import ConfigError
from monitor.core.lifecycle import AfterFirstAnswer, App, Component, StopsFirst
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
    later = AfterFirstAnswer(
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
            StopsFirst(scheduler, halts=[later.halt]),
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


MAINTENANCE_RETRY_SECONDS = 60.0
"""How soon the store's maintenance runs again when it postponed a table (a long read held it)."""


def maintenance(store: StoreService, scheduler: Scheduler) -> Callable[[], None]:
    """The store's maintenance job: a pass that postponed tables (another transaction held them
    past the lock wait, `partitions.maintain_partitions`) asks for another pass in
    MAINTENANCE_RETRY_SECONDS rather than at its next interval (an hour by default), so that a
    read that happened to hold a table does not leave it without its coming days for hours."""

    def run() -> None:
        if store.maintain():
            scheduler.run_later("store:maintenance", MAINTENANCE_RETRY_SECONDS)

    return run


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
    w.scheduler.every("store:maintenance", w.intervals["maintenance"], maintenance(w.store, w.scheduler),
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
