"""The evaluation job: extract -> transform -> evaluate -> load.

1. extract: the sample window it needs, read from PostgreSQL over JDBC (`extract.py`);
2. transform: pure DataFrame functions derive each entity's metrics (`transforms/`);
3. evaluate: the YAML rules become matches with a severity (`engine.py`);
4. load: the derived tables get this evaluation's rows (replacing any earlier attempt at the same
   `evaluated_at`), and the matches are merged into the findings; the findings of entities this
   evaluation did not sample keep their state for up to the window (store.findings).

Incremental: a kept plan's evaluation (the daemon's) carries the consumer groups that stood still
since its previous one, caught up (monitor.store.carry decides which, in PostgreSQL): their
inputs are not read, their rows are copied from the previous evaluation (the time since their
last commit moved on), and nothing about them is matched or resolved (nothing is open on them).
Every other entity and group is evaluated as in a full evaluation, which runs instead when asked
(`full`), for a plan's first evaluation, and when a rule's condition reads the time since the
last commit of a group (it moves with the clock).

`EvaluationResult.seconds` times the phases on the driver's clock: `compute` (extract, transform
and evaluate, the findings' texts included) and `write` (load); the daemon records them in its
evaluation run row. The JDBC reads run lazily inside the compute jobs, alongside the transforms, so
their time is part of `compute`: Spark has no public interface that gives a job's scan metrics
(only its physical plan, through the JVM objects behind a DataFrame, or its UI's REST API).

Sized to the data: the number of group-partitions and partitions (one count before the job)
sets the shuffle partitions, the read slices and the writers (`ROWS_PER_SHUFFLE_PARTITION`); a
small cluster is evaluated in one partition without adaptive re-planning, in a dozen Spark jobs,
where Spark's defaults made it 70 (docs/bench/evaluation-profile.md). An incremental evaluation is
sized by what it computes, its carried groups left out: a mostly still fleet runs on a smaller plan.

The same job runs inside the daemon on a warm session, or through spark-submit, whose entry file
(spark-submit runs a file, not a module) calls `monitor.evaluate.submit.main` (README: "Running
the evaluation on a Spark cluster"):

    spark-submit --master spark://host:7077 --jars postgresql.jar \
        deploy/spark_evaluate.py --config monitor.yaml
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, delete, text

from monitor.core.derived import ENTITIES, table_of
from monitor.core.objectives import Objective
from monitor.core.vocabulary import FULL_EVALUATION, INCREMENTAL_EVALUATION
from monitor.evaluate.engine import render, render_annotations, template_context
from monitor.evaluate.incremental import Carry, choose
from monitor.evaluate.io import write_table
from monitor.evaluate.observed import dated
from monitor.evaluate.plan import (
    MATCHES,
    PART,
    UNSAMPLED,
    EntityRows,
    Plan,
    Plans,
    build_plan,
    fresh,
    plan_key,
    row_column,
)
from monitor.evaluate.rules import Rule
from monitor.evaluate.spark import JdbcTarget
from monitor.store.carry import carried_partitions, carry_rows, copy_carried, mark_completed
from monitor.store.evaluation import DERIVED_TABLES, drop_clocks, set_clock
from monitor.store.findings import Match, merge_findings
from monitor.store.ingest import copy_rows
from monitor.store.objectives import record_minutes, set_objective_groups
from monitor.store.partitions import day_of, ensure_days

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

log = logging.getLogger(__name__)


@dataclass
class EvaluationResult:
    """What one evaluation did: derived rows per entity, findings counts (merge_findings), and
    the seconds of each phase (see the module docstring)."""

    evaluated_at: datetime
    rows: dict[str, int] = field(default_factory=dict)
    findings: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    carried_groups: int | None = None
    """Groups carried from the previous evaluation (an incremental evaluation); None: a full one."""
    carried_rows: dict[str, int] = field(default_factory=dict)
    """The rows copied per group entity (`rows` are the rows computed)."""

    @property
    def kind(self) -> str:
        return FULL_EVALUATION if self.carried_groups is None else INCREMENTAL_EVALUATION


@dataclass(frozen=True)
class JobSettings:
    window: timedelta = timedelta(minutes=15)
    window_commits: int = 10
    objectives: tuple[Objective, ...] = ()
    """The lag objectives (monitor.core.objectives): each evaluation records their minute
    (store.objectives) after writing its rows."""


@contextmanager
def _phase(result: EvaluationResult, name: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        result.seconds[name] = time.monotonic() - started


def run_evaluation(
    spark: SparkSession,
    target: JdbcTarget,
    engine: Engine,
    rules: Sequence[Rule],
    clusters: Sequence[str],
    evaluated_at: datetime,
    settings: JobSettings = JobSettings(),
    plans: Plans | None = None,
    full: bool = False,
) -> EvaluationResult:
    """One evaluation of `clusters` at `evaluated_at`. Idempotent for a given `evaluated_at`.

    Incremental (see the module's docstring) with `plans` unless `full`; a one-off plan has no
    previous evaluation, so without `plans` it is always full.

    With `plans` (a long-lived evaluator's), the plan built for the same clusters, rules and
    settings by an earlier evaluation runs again (monitor.evaluate.plan); without, one is built
    for this evaluation and its clock removed after it.

    What is computed once and used several times is kept in Spark's cache (see `derive`) until
    it is written, and released when the job ends, failed or not. Up to ONE_ACTION_ROWS, one
    action brings the verdicts and the entities' rows to the driver, which writes the rows;
    above, an action brings the verdicts and Spark writes each entity.
    """
    result = EvaluationResult(evaluated_at)
    began = time.monotonic()
    size = _input_rows(engine, clusters)
    started = time.monotonic()
    sized = partial(_sized_plan, spark, target, engine, rules, clusters, settings, evaluated_at, plans)
    plan = decided = sized(size)
    built = time.monotonic() - started
    with engine.begin() as conn:
        set_clock(conn, plan.plan_id, evaluated_at)
        set_objective_groups(conn, plan.plan_id, clusters, settings.objectives)
        kept_plan = plans is not None and not full
        carry, result.carried_groups = choose(
            conn, plan.plan_id, clusters, rules, kept_plan, evaluated_at, settings.window
        )
        computed = size if carry is None else size - carried_partitions(conn, plan.plan_id)
    if carry is not None and _size_class(spark, computed) != _size_class(spark, size):
        # The rows computed fit a smaller plan (one action, fewer slices): it runs the carry.
        started, size = time.monotonic(), computed
        plan = sized(size)
        built += time.monotonic() - started
        with engine.begin() as conn:
            set_clock(conn, plan.plan_id, evaluated_at)
            set_objective_groups(conn, plan.plan_id, clusters, settings.objectives)
            copy_carried(conn, decided.plan_id, plan.plan_id)
        carry = (plan.plan_id, carry[1])
    kept: list[DataFrame] = []
    try:
        with _phase(result, "compute"), _sized_to(spark, size):
            for frame in plan.kept:  # in the order built: each is computed from those before it
                kept.append(frame.persist())
            # The rules read every entity: this reads the inputs and computes (and keeps) them all.
            ran = fresh(plan.action).collect()
            read_by = evaluated_at + timedelta(seconds=time.monotonic() - began)
            matches, unsampled, rows = _sorted(ran, rules, gathered=plan.gathered is not None)
        result.seconds["compute"] += built
        with _phase(result, "write"), _sized_to(spark, size):
            if plan.gathered is not None:
                result.rows, result.carried_rows = _copy_derived(engine, rows, clusters, evaluated_at, carry)
            else:
                result.rows, result.carried_rows = _write_derived(
                    target, engine, plan.frames, clusters, evaluated_at, carry
                )
            with engine.begin() as conn:
                record_minutes(conn, clusters, evaluated_at)
                result.findings = merge_findings(
                    conn,
                    dated(conn, matches, rules, clusters, evaluated_at, settings.window, read_by=read_by),
                    evaluated_at,
                    read_by=read_by,
                    clusters=clusters,
                    rules=[rule.name for rule in rules],
                    unsampled=unsampled,
                    stale_before=evaluated_at - settings.window,
                )
                mark_completed(conn, {decided.plan_id, plan.plan_id}, evaluated_at)
    finally:
        for frame in reversed(kept):  # the frames read from others first
            frame.unpersist()
        if plans is None:
            with engine.begin() as conn:
                drop_clocks(conn, [plan.plan_id])
    return result


ONE_ACTION_ROWS = 20_000
"""Up to this many group-partitions and partitions, the driver writes the entities' rows, brought
by the action that brings the verdicts (plan.gather), with COPY in one transaction: no Spark job
and JDBC connection per entity. Above, Spark writes each entity (`_write_derived`)."""


def _sorted(
    collected: list[Row], rules: Sequence[Rule], gathered: bool
) -> tuple[list[Match], list[tuple[str, str]], dict[str, EntityRows]]:
    """The rows an evaluation's action brought: the rules' matches, with their texts rendered (on
    the driver: they are few), the (entity, entity_key) of the entities this evaluation did not
    sample (engine.unsampled_keys: few, except while a broker is gone), and, from a plan for one
    action (plan.gather: each entity row with the verdicts on it), each entity's rows. Empties
    `collected`: each Row is freed once sorted, never held whole beside the rows made of them."""
    by_name = {rule.name: rule for rule in rules}
    matches: list[Match] = []
    unsampled: list[tuple[str, str]] = []
    rows: dict[str, EntityRows] = {}
    collected.reverse()
    while collected:
        row = collected.pop()
        if not gathered:
            if row["rule"] is None:
                unsampled.append((row["entity"], row["entity_key"]))
            else:
                matches.append(_match(row.asDict(recursive=True), by_name[row["rule"]]))
            continue
        entity = row[PART]
        struct = row[row_column(entity)]
        if (kept := rows.get(entity)) is None:
            kept = rows[entity] = EntityRows(entity, struct)
        kept.add(struct)
        for found in row[MATCHES] or ():
            matches.append(_match(found.asDict(recursive=True), by_name[found["rule"]]))
        if row[UNSAMPLED] is not None:
            unsampled.append((entity, row[UNSAMPLED]))
    return matches, unsampled, rows


def _copy_derived(
    engine: Engine,
    rows: dict[str, EntityRows],
    clusters: Sequence[str],
    evaluated_at: datetime,
    carry: Carry,
) -> tuple[dict[str, int], dict[str, int]]:
    """Replace this evaluation's rows with `rows` (entity -> rows, emptied as they are sent) and the
    carried ones, in one transaction. Returns the rows written and the rows carried per entity."""
    written = {entity: len(rows[entity].rows) if entity in rows else 0 for entity in ENTITIES}
    with engine.begin() as conn:
        carried = _replace_derived(conn, clusters, evaluated_at, carry)
        while rows:
            entity, entity_rows = rows.popitem()
            copy_rows(conn, table_of(entity), entity_rows.columns, entity_rows.rows)
    return written, carried


def _sized_plan(
    spark: SparkSession,
    target: JdbcTarget,
    engine: Engine,
    rules: Sequence[Rule],
    clusters: Sequence[str],
    settings: JobSettings,
    evaluated_at: datetime,
    plans: Plans | None,
    size: int,
) -> Plan:
    """The plan for an evaluation that computes `size` group-partitions and partitions: the one in
    `plans` built from the same things, or a new one (kept in `plans`, whose dropped plans'
    clocks are removed)."""
    readers, one_action = _size_class(spark, size)
    key = plan_key(
        spark, target, clusters, rules, settings.window, settings.window_commits, readers, one_action,
        settings.objectives,
    )  # fmt: skip
    plan = plans.get(key) if plans is not None else None
    if plan is not None:
        return plan
    with _sized_to(spark, size):
        plan = build_plan(spark, target, rules, key, evaluated_at)
    if plans is not None:
        dropped = plans.put(key, plan)
        if dropped:
            with engine.begin() as conn:
                drop_clocks(conn, [old.plan_id for old in dropped])
    return plan


def _size_class(spark: SparkSession, size: int) -> tuple[int, bool]:
    """(read slices, one action) of an evaluation that computes `size` rows: what its plan is
    built for."""
    readers = _partitions_for(spark, size)
    return readers, readers == 1 and size <= ONE_ACTION_ROWS


ROWS_PER_SHUFFLE_PARTITION = 100_000
"""Group-partitions and partitions per shuffle partition (and per JDBC writer). A small cluster's
evaluation runs in one: at Spark's fixed count each shuffle would cost a task per partition,
each a few milliseconds of scheduling for a handful of rows, and each write a connection per
writer. `spark.sql.shuffle.partitions` stays the most it uses (the daemon's `spark.shuffle_partitions`
or spark-submit's `--conf`)."""

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SINGLE_PARTITION = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.optimizer.disableHints": "true",
    "spark.sql.maxSinglePartitionBytes": str(2**63 - 1),
    "spark.sql.defaultSizeInBytes": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""The settings of an evaluation in one partition (see `_sized_to`). Hints are dropped when the
plan is analysed, so a plan is built under the settings it runs with (plan.PlanKey.readers).

No generated code: Spark writes the clock's value (a scalar subquery, `extract.clock`) into the
Java source it generates as a literal, so every evaluation generated and compiled its classes
anew (about 50), and the JVM's JIT compilers then compiled those: half of the CPU of a warm
small evaluation, and never warm. Interpreted, the same classes serve every run (the setting is
Spark's own switch between its generated and interpreted paths, both kept by Spark).

`defaultSizeInBytes` is the size Spark assumes for a relation it has no statistics of, the JDBC
reads: by default the largest long, which a projection that adds a column or a join (the
product of its sides) pushes past `maxSinglePartitionBytes`, and Spark then shuffles a
single-partition side into one partition again before each such join (15 of a small cluster's
61 stages, docs/bench/evaluation-profile.md). Broadcasts are off, so nothing else reads it."""


def _input_rows(engine: Engine, clusters: Sequence[str]) -> int:
    """The group-partitions, share-group partitions and partitions of `clusters`: what the
    evaluation's size grows with (three counts in one statement, milliseconds at a million rows)."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM latest_group_offsets WHERE cluster = ANY(:c))"
                    " + (SELECT count(*) FROM share_group_lag WHERE cluster = ANY(:c))"
                    " + (SELECT count(*) FROM partitions WHERE cluster = ANY(:c))"
                ),
                {"c": list(clusters)},
            ).scalar_one()
        )


def _partitions_for(spark: SparkSession, rows: int) -> int:
    """One partition per ROWS_PER_SHUFFLE_PARTITION rows, at least one, at most the session's
    `spark.sql.shuffle.partitions`."""
    configured = int(spark.conf.get(_SHUFFLE_PARTITIONS) or 1)
    return max(1, min(configured, -(-rows // ROWS_PER_SHUFFLE_PARTITION)))


@contextmanager
def _sized_to(spark: SparkSession, rows: int) -> Iterator[int]:
    """Within the block, shuffles (and writes) use `_partitions_for(rows)` partitions (restored
    after). With one, the evaluation runs in one partition from its reads to its writes
    (`SINGLE_PARTITION`): adaptive execution plans each stage once the stages before it have run,
    as a job of its own (a small cluster's evaluation ran 70 jobs with it and 12 without), a
    broadcast is a job of its own too, and a join of two single-partition sides needs no shuffle
    when Spark is told not to mind their size."""
    sized = _partitions_for(spark, rows)
    changes = {_SHUFFLE_PARTITIONS: str(sized)}
    if sized == 1:
        changes.update(SINGLE_PARTITION)
    before: dict[str, str | None] = {key: spark.conf.get(key) for key in changes}
    for key, value in changes.items():
        spark.conf.set(key, value)
    try:
        yield sized
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _write_derived(
    target: JdbcTarget,
    engine: Engine,
    frames: dict[str, DataFrame],
    clusters: Sequence[str],
    evaluated_at: datetime,
    carry: Carry,
) -> tuple[dict[str, int], dict[str, int]]:
    """Replace this evaluation's rows: delete any earlier attempt at `evaluated_at` and copy the
    carried rows, then append each entity's rows, one connection per writer (one per core, at
    most one per shuffle partition: a small cluster's rows go through one). Returns the rows
    written per entity (counted by the writes themselves, not by another pass) and the rows carried."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    with engine.begin() as conn:
        carried = _replace_derived(conn, clusters, evaluated_at, carry)
    rows = {}
    for entity, planned in frames.items():
        frame = fresh(planned)
        counted = Observation(f"rows_{entity}")
        cores = frame.sparkSession.sparkContext.defaultParallelism
        writers = max(1, min(cores, int(frame.sparkSession.conf.get(_SHUFFLE_PARTITIONS) or 1)))
        written = frame.coalesce(writers).observe(counted, F.count(F.lit(1)).alias("rows"))
        write_table(written, target, table_of(entity), mode="append")
        rows[entity] = int(counted.get["rows"])
    return rows, carried


def _replace_derived(
    conn: Connection, clusters: Sequence[str], evaluated_at: datetime, carry: Carry
) -> dict[str, int]:
    """Make room for this evaluation's rows: the day's partitions, and no rows of an earlier
    attempt at the same `evaluated_at`; then copy the carried groups' rows (returns how many).
    A missing day is created beside this transaction (`ensure_days`), not while it holds the
    tables it has cleared: readers of two derived tables would deadlock with it."""
    ensure_days(conn, {DERIVED_TABLES[entity].name: {day_of(evaluated_at)} for entity in ENTITIES})
    for entity in ENTITIES:
        table = DERIVED_TABLES[entity]
        conn.execute(
            delete(table).where(table.c.evaluated_at == evaluated_at, table.c.cluster.in_(list(clusters)))
        )
    if carry is None:
        return {}
    plan_id, previous = carry
    return carry_rows(conn, plan_id, previous, evaluated_at)


def _match(row: dict[str, Any], rule: Rule) -> Match:
    context = template_context(row, rule)
    summary, description = render(row, rule, context)
    return Match(
        rule=row["rule"],
        entity=row["entity"],
        entity_key=row["entity_key"],
        cluster=row["cluster"],
        severity=row["severity"],
        value=row["value"],
        summary=summary,
        description=description,
        for_seconds=int(row["for_seconds"]),
        labels=dict(row["labels"] or {}),
        annotations=render_annotations(row, rule, context),
    )
