"""The evaluate stage as an app component: a warm SparkSession, the rules reloaded every cycle
(operators change thresholds without a restart; a bad rule file is reported and the other files
still run), and one evaluation every `intervals.evaluate_seconds`, recorded as a run."""

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
from monitor.core.errors import ConfigError
from monitor.core.objectives import Objective, load_objectives
from monitor.core.scheduler import DueRun, Scheduler
from monitor.core.settings import EvaluateConfig, SparkConfig
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import load_rules, rule_files
from monitor.evaluate.spark import build_session, jdbc_target
from monitor.store.evaluation import drop_clocks
from monitor.store.findings import next_due
from monitor.store.runs import Run, RunRecorder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


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
        self._plans = Plans()
        self._recorder: RunRecorder | None = None

    def start(self) -> None:
        """Start the SparkSession (blocks a few seconds on local[*]) and schedule the job."""
        jar = self._jdbc_jar()
        if not jar.is_file():
            raise ConfigError(
                [
                    f"spark.jdbc_jar: no file at {jar}; install the PostgreSQL JDBC driver with "
                    "`kafka-health setup` (it fetches it once), or give its jar in spark.jdbc_jar"
                ]
            )
        self._session = build_session(self._spark_config, jar)
        self._recorder = RunRecorder(self._engine(), self._clock)
        self._scheduler.every("evaluate", self._interval, self.evaluate, first_run_in=self._interval)

    def evaluate(self) -> None:
        assert self._recorder is not None and self._session is not None
        try:
            with self._recorder.run(None, "evaluate") as run:
                self._evaluate(run, self._session)
        finally:
            # An evaluation's DataFrames reach Python's cycle collector only, and until it runs
            # the JVM keeps their plans (about 170 MB per evaluation here): collected now, the
            # driver's heap stays flat; left to chance, a 1g driver runs out of memory.
            gc.collect()

    def _evaluate(self, run: Run, session: SparkSession) -> None:
        ruleset = load_rules(rule_files(self._config.rules_dir))
        for problem in ruleset.problems:
            run.problem(problem)
        objectives = self._objectives(run)
        result = run_evaluation(
            session,
            self._target,
            self._engine(),
            ruleset.rules,
            self._clusters,
            self._clock.now(),
            JobSettings(
                timedelta(seconds=self._config.window_seconds), self._config.window_commits, objectives
            ),
            self._plans,
        )
        for entity, rows in result.rows.items():
            run.count(f"rows_{entity}", rows)
        for key, value in result.findings.items():
            run.count(f"findings_{key}", value)
        self._after(result.findings)
        if self._due is not None:
            with self._engine().connect() as conn:
                self._due.set(next_due(conn, self._clusters))
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
