"""The evaluation job: extract -> transform -> evaluate -> load.

1. extract: the sample window it needs, read from PostgreSQL over JDBC (`extract.py`);
2. transform: pure DataFrame functions derive each entity's metrics (`transforms/`);
3. evaluate: the YAML rules become matches with a severity (`engine.py`);
4. load: the derived tables get this evaluation's rows (replacing any earlier attempt at the same
   `evaluated_at`), and the matches are merged into the findings.

The same job runs inside the daemon on a warm session, or through spark-submit:

    spark-submit --jars postgresql.jar -m monitor.evaluate.job --config monitor.yaml
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, delete

from monitor.derived import ENTITIES, table_of
from monitor.evaluate import extract
from monitor.evaluate.engine import evaluate_rules, render
from monitor.evaluate.io import write_table
from monitor.evaluate.rules import Rule
from monitor.evaluate.spark import JdbcTarget
from monitor.evaluate.transforms import derive
from monitor.store.evaluation import DERIVED_TABLES
from monitor.store.findings import Match, merge_findings
from monitor.store.partitions import create_day_partitions, day_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class EvaluationResult:
    evaluated_at: datetime
    rows: dict[str, int] = field(default_factory=dict)
    findings: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSettings:
    window: timedelta = timedelta(minutes=15)
    window_commits: int = 10


def run_evaluation(
    spark: SparkSession,
    target: JdbcTarget,
    engine: Engine,
    rules: Sequence[Rule],
    clusters: Sequence[str],
    evaluated_at: datetime,
    settings: JobSettings = JobSettings(),
) -> EvaluationResult:
    """One evaluation of `clusters` at `evaluated_at`. Idempotent for a given `evaluated_at`."""
    result = EvaluationResult(evaluated_at)
    t0 = time.monotonic()
    inputs = extract.read_inputs(spark, target, clusters, evaluated_at, settings.window)
    result.seconds["read"] = time.monotonic() - t0

    t1 = time.monotonic()
    frames = {entity: df.cache() for entity, df in derive(inputs, settings.window_commits).items()}
    for entity, df in frames.items():
        result.rows[entity] = df.count()
    matches_df = evaluate_rules(frames, rules, evaluated_at)
    matches = [row.asDict(recursive=True) for row in matches_df.collect()]
    result.seconds["compute"] = time.monotonic() - t1

    t2 = time.monotonic()
    _write_derived(target, engine, frames, clusters, evaluated_at)
    by_name = {rule.name: rule for rule in rules}
    with engine.begin() as conn:
        result.findings = merge_findings(
            conn,
            [_match(row, by_name[row["rule"]]) for row in matches],
            evaluated_at,
            clusters=clusters,
            rules=list(by_name),
        )
    result.seconds["write"] = time.monotonic() - t2
    for df in frames.values():
        df.unpersist()
    extract.release(inputs)
    return result


def _write_derived(
    target: JdbcTarget,
    engine: Engine,
    frames: dict[str, Any],
    clusters: Sequence[str],
    evaluated_at: datetime,
) -> None:
    """Replace this evaluation's rows: delete any earlier attempt at `evaluated_at`, then append."""
    with engine.begin() as conn:
        for entity in ENTITIES:
            table = DERIVED_TABLES[entity]
            create_day_partitions(conn, table.name, [day_of(evaluated_at)])
            conn.execute(
                delete(table).where(table.c.evaluated_at == evaluated_at, table.c.cluster.in_(list(clusters)))
            )
    for entity, df in frames.items():
        write_table(df, target, table_of(entity), mode="append")


def _match(row: dict[str, Any], rule: Rule) -> Match:
    summary, description = render(row, rule)
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
        runbook=rule.runbook,
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point for spark-submit: one evaluation at the current time."""
    from pyspark.sql import SparkSession

    from monitor.config import load_settings
    from monitor.evaluate.rules import default_rule_paths, load_rules
    from monitor.evaluate.spark import jdbc_target
    from monitor.store.engine import make_engine

    parser = argparse.ArgumentParser(description="One evaluation of the configured clusters.")
    parser.add_argument("--config", help="monitor.yaml (the database comes from database.url / DATABASE_URL)")
    parser.add_argument("--rules", nargs="*", help="rule files (default: alert_rules/*.yaml)")
    args = parser.parse_args(argv)
    from pathlib import Path

    settings = load_settings(Path(args.config) if args.config else None)
    if settings.database.url is None:
        parser.error("set database.url or DATABASE_URL: spark-submit does not start a local PostgreSQL")
    url = settings.database.url.get_secret_value()
    paths = [Path(p) for p in args.rules] if args.rules else default_rule_paths()
    ruleset = load_rules(paths)
    for problem in ruleset.problems:
        log.error("%s", problem)
    spark = SparkSession.builder.appName(settings.spark.app_name).getOrCreate()
    result = run_evaluation(
        spark,
        jdbc_target(url),
        make_engine(url),
        ruleset.rules,
        [c.name for c in settings.clusters],
        datetime.now(UTC),
    )
    print(f"evaluated at {result.evaluated_at.isoformat()}: rows {result.rows}, findings {result.findings}")


if __name__ == "__main__":
    main()
