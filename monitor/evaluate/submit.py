"""One evaluation from the command line: the entry point spark-submit runs (through
deploy/spark_evaluate.py, a file), with the daemon's configuration and rules. A one-off
evaluation has no previous one of its plan to carry from: it is always a full one."""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime, timedelta

from monitor.evaluate.job import JobSettings, run_evaluation

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    """Entry point for spark-submit: one evaluation, at the current time unless --evaluated-at."""
    from monitor.core.objectives import load_objectives
    from monitor.core.settings import load_settings
    from monitor.evaluate.rules import default_rule_paths, load_rules, rule_files_in
    from monitor.evaluate.spark import jdbc_target, submitted_session
    from monitor.store.engine import make_engine

    parser = argparse.ArgumentParser(description="One evaluation of the configured clusters.")
    parser.add_argument("--config", help="monitor.yaml (the database comes from database.url / DATABASE_URL)")
    parser.add_argument("--rules", nargs="*", help="rule files (default: as the daemon, evaluate.rules_dir)")
    parser.add_argument("--evaluated-at", type=_aware, help="ISO time (default: now); a re-run replaces it")
    args = parser.parse_args(argv)
    from pathlib import Path

    settings = load_settings(Path(args.config) if args.config else None)
    if settings.database.url is None:
        parser.error("set database.url or DATABASE_URL: spark-submit does not start a local PostgreSQL")
    url = settings.database.url.get_secret_value()
    if args.rules:
        paths = [Path(p) for p in args.rules]
    else:  # as the daemon's evaluate stage chooses them
        rules_dir = settings.evaluate.rules_dir
        paths = rule_files_in(rules_dir) if rules_dir is not None else default_rule_paths()
    if not paths:  # e.g. the package shipped as a zip: no alert_rules/ beside it
        parser.error("no rule files found: set evaluate.rules_dir in the configuration or pass --rules")
    ruleset = load_rules(paths)
    for problem in ruleset.problems:
        log.error("%s", problem)
    spark = submitted_session(settings.spark)
    result = run_evaluation(
        spark,
        jdbc_target(url),
        make_engine(url),
        ruleset.rules,
        [c.name for c in settings.clusters],
        args.evaluated_at or datetime.now(UTC),
        JobSettings(
            timedelta(seconds=settings.evaluate.window_seconds),
            settings.evaluate.window_commits,
            load_objectives(settings.evaluate.objectives_file) if settings.evaluate.objectives_file else (),
        ),
    )
    seconds = ", ".join(f"{phase} {value:.1f} s" for phase, value in result.seconds.items())
    print(
        f"evaluated at {result.evaluated_at.isoformat()}: rows {result.rows}, findings {result.findings}, "
        f"{seconds}"
    )


def _aware(value: str) -> datetime:
    """An ISO time; without an offset it is UTC."""
    at = datetime.fromisoformat(value)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


if __name__ == "__main__":
    main()
