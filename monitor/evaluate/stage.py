"""The evaluate stage as an app component: a warm SparkSession, the rules read every cycle
(operators change thresholds without a restart; validated again only when a file changed:
kept_rules; a bad rule file is reported and the other files still run), and one evaluation every
`intervals.evaluate_seconds`, recorded as a run: incremental (`evaluate.incremental`,
monitor.evaluate.job) but every `evaluate.full_every`-th, its kind and what it carried and
computed among the run's counts (the collection page shows them)."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from monitor.core.clock import Clock
from monitor.core.errors import ConfigError, MonitorError
from monitor.core.objectives import Objective, load_objectives
from monitor.core.scheduler import DueRun, Scheduler
from monitor.core.settings import AUTO_MEMORY, EvaluateConfig, SparkConfig
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.kept_rules import KeptRules
from monitor.evaluate.plan import Plans
from monitor.evaluate.spark import build_session, driver_memory, fleet_heap_mb, jdbc_target, outgrown
from monitor.store.evaluation import drop_clocks, fleet_rows
from monitor.store.findings import next_due
from monitor.store.runs import Run, RunRecorder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FLEET_CHECK_EVERY = 10
"""Evaluations between two counts of the fleet against the heap an `auto` driver was given."""


class EvaluationHalted(MonitorError):
    """An evaluation ended early because the daemon stops (`EvaluateStage.halt`)."""

    def __init__(self) -> None:
        super().__init__("cancelled: the daemon is stopping; the next start evaluates in full")


class EvaluateStage:
    name = "evaluate"

    def __init__(
        self,
        spark: SparkConfig,
        config: EvaluateConfig,
        interval_seconds: float,
        database_url: str,
        clusters: Sequence[str],
        engine: Callable[[], Engine],
        clock: Clock,
        scheduler: Scheduler,
        jdbc_jar: Callable[[], Path],
        on_findings_changed: Callable[[], object] | None = None,
        due: DueRun | None = None,
    ) -> None:
        """`jdbc_jar` finds the PostgreSQL JDBC driver's jar when the stage starts;
        `on_findings_changed` is called after an evaluation that opened, resolved or re-rated findings;
        `due` is set after each evaluation to when the first pending finding's `for:` runs out."""
        self._on_findings_changed = on_findings_changed
        self._due = due
        self._previous_states: tuple[int, int] | None = None
        self._good_objectives: tuple[Objective, ...] = ()
        self._spark_config = spark
        self._config = config
        self._interval = interval_seconds
        self._target = jdbc_target(database_url)
        self._clusters = list(clusters)
        self._engine = engine
        self._clock = clock
        self._scheduler = scheduler
        self._jdbc_jar = jdbc_jar
        self._session: SparkSession | None = None
        self._jar: Path | None = None
        self._session_rows = 0
        self._evaluations = 0
        self._told_heap_mb = 0
        self._plans = Plans()
        self._rules = KeptRules(config.rules_dir)
        self._recorder: RunRecorder | None = None
        self._halted = False
        self._evaluating = False

    def start(self) -> None:
        """Start the SparkSession (blocks a few seconds on local[*]) and schedule the job. With
        `spark.driver_memory: auto` and nothing collected yet (a first start), the session starts
        at the first evaluation instead, when the store knows how large the fleet is."""
        jar = self._jdbc_jar()
        if not jar.is_file():
            raise ConfigError(
                [
                    f"spark.jdbc_jar: no file at {jar}; install the PostgreSQL JDBC driver with "
                    "`kafka-health setup` (it fetches it once), or give its jar in spark.jdbc_jar"
                ]
            )
        self._jar = jar
        rows = self._fleet_rows()
        if rows or self._spark_config.driver_memory != AUTO_MEMORY:
            self._start_session(rows)
        else:
            log.info(
                "the store holds no partition yet: the Spark session starts at the first evaluation, "
                "its heap sized to what the collectors have found by then"
            )
        self._recorder = RunRecorder(self._engine(), self._clock)
        self._scheduler.every("evaluate", self._interval, self.evaluate, first_run_in=self._interval)

    def _fleet_rows(self) -> int:
        with self._engine().connect() as conn:
            return fleet_rows(conn, self._clusters)

    def _start_session(self, rows: int) -> SparkSession:
        assert self._jar is not None
        self._session = build_session(self._spark_config, self._jar, rows)
        self._session_rows = rows
        log.info(
            "Spark driver heap %s (%d group-partitions and partitions in the store)",
            driver_memory(self._spark_config, rows),
            rows,
        )
        return self._session

    def _check_fleet(self, run: Run) -> None:
        """Every few evaluations, whether the fleet has outgrown an `auto` heap: a problem on the
        run (shown with the evaluations) and a warning in the log each time it needs more."""
        self._evaluations += 1
        if self._spark_config.driver_memory != AUTO_MEMORY or self._evaluations % FLEET_CHECK_EVERY:
            return
        rows = self._fleet_rows()
        problem = outgrown(self._spark_config, self._session_rows, rows)
        if problem is not None:
            run.problem(problem)
            if fleet_heap_mb(rows) > self._told_heap_mb:
                log.warning(problem)
                self._told_heap_mb = fleet_heap_mb(rows)

    def evaluate(self) -> None:
        assert self._recorder is not None
        if self._halted:  # the daemon stops: no evaluation starts, nor a JVM for one
            return
        try:
            with self._recorder.run(None, "evaluate") as run:
                session = self._session or self._start_session(self._fleet_rows())
                self._evaluating = True
                try:
                    if self._halted:  # halted while the session started (`stop` stops it)
                        raise EvaluationHalted()
                    self._evaluate(run, session)
                except Exception as exc:
                    if self._halted and not isinstance(exc, EvaluationHalted):
                        raise EvaluationHalted() from exc
                    raise
                finally:
                    self._evaluating = False
                self._check_fleet(run)
        finally:
            # An evaluation's DataFrames reach Python's cycle collector only, and until it runs
            # the JVM keeps their plans (about 170 MB per evaluation here): collected now, the
            # driver's heap stays flat; left to chance, a 1g driver runs out of memory.
            gc.collect()

    def _evaluate(self, run: Run, session: SparkSession) -> None:
        ruleset = self._rules.load()
        for problem in ruleset.problems:
            run.problem(problem)
        objectives = self._objectives(run)
        evaluated_at = self._clock.now()
        result = run_evaluation(
            session,
            self._target,
            self._engine(),
            ruleset.rules,
            self._clusters,
            evaluated_at,
            JobSettings(
                timedelta(seconds=self._config.window_seconds), self._config.window_commits, objectives
            ),
            self._plans,
            full=not self._config.incremental or self._evaluations % self._config.full_every == 0,
        )
        run.count(result.kind, 1)
        if result.carried_groups is not None:
            run.count("carried_groups", result.carried_groups)
            run.count("carried_rows", sum(result.carried_rows.values()))
        for entity, rows in result.rows.items():
            run.count(f"rows_{entity}", rows)
        for key, value in result.findings.items():
            run.count(f"findings_{key}", value)
        self._after(result.findings)
        if self._due is not None:
            with self._engine().connect() as conn:
                self._due.set(next_due(conn, self._clusters, evaluated_at))
        for step, seconds in result.seconds.items():
            run.count(f"ms_{step}", int(seconds * 1000))
        run.count("rules", len(ruleset.rules))

    def _objectives(self, run: Run) -> tuple[Objective, ...]:
        """The lag objectives of `evaluate.objectives_file` (reloaded every evaluation, like the
        rules); none without a file. While the file has a problem (recorded on the run, as a rule
        file's are), the last good version stays in force."""
        if self._config.objectives_file is None:
            return ()
        try:
            self._good_objectives = load_objectives(self._config.objectives_file)
        except ConfigError as exc:
            for line in exc.lines():
                run.problem(line)
        return self._good_objectives

    def _after(self, findings: dict[str, int]) -> None:
        """Run the alert cycle now when findings were opened, resolved, or moved between pending
        and firing: a page does not wait for the alert stage's next tick."""
        states = (findings.get("pending", 0), findings.get("firing", 0))
        changed = bool(findings.get("new") or findings.get("resolved")) or states != self._previous_states
        self._previous_states = states
        if changed and self._on_findings_changed is not None:
            self._on_findings_changed()

    def halt(self) -> None:
        """The daemon stops: end a running evaluation now rather than wait for it (at 1,000,000
        group-partitions it runs for minutes). Its Spark session stops, which fails the Spark job
        it runs, and no evaluation starts after. What it had written is what a Spark driver that
        died there would leave (the small plan writes its rows in one transaction); the run is
        recorded as failed with `EvaluationHalted`'s reason, and the next start evaluates in
        full."""
        self._halted = True
        session = self._session
        if session is not None:
            if self._evaluating:
                log.info("the daemon stops: an evaluation running now is cancelled")
            session.stop()

    def stop(self) -> None:
        plans = self._plans.clear()
        if plans:
            try:
                with self._engine().begin() as conn:
                    drop_clocks(conn, [plan.plan_id for plan in plans])
            except SQLAlchemyError as exc:  # left for the next evaluation's clean-up
                log.warning("the evaluation plans' clocks were not removed: %s", exc)
        if self._session is not None:
            self._session.stop()
            self._session = None
