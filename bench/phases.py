"""Where one evaluation of a kept benchmark database spends its time, step by step on the driver.

    .venv/bin/python bench/phases.py \\
        --url postgresql+psycopg://kafka_health@127.0.0.1:55477/kh_bench_footprint \\
        --cluster bench --at 2026-12-01T22:09:30Z --runs 3

A benchmark that keeps its database (bench/footprint.py always does; bench/evaluate.py with
--keep) leaves the samples of a whole fleet behind. This runs the daemon's evaluation
(`monitor.evaluate.job.run_evaluation`, the shipped rules, the default window) on them --runs
times on one warm SparkSession (local[2]), the first full and the others incremental, one second
apart from --at (later than the database's own evaluations: an evaluation older than a finding's
last sighting changes nothing of it). Per run it prints the job's phases (compute, write) and the
seconds of each step inside them: building the plan, the carry decision, the action that brings
the matches (Spark's share is what compute leaves to the others), rendering the matches' texts,
dating them, merging the findings, writing the derived rows. The database's derived rows and
findings are changed as the daemon would change them.

Then --alert-cycles alert cycles (`monitor.alert.cycle.run_cycle`, routing everything to one
console receiver) over the findings the evaluations left (--runs 0: the database's own), in one
transaction rolled back, with a memory kept between them as the daemon's alert stage keeps one:
the first brings the alerts up to the findings, the others find nothing changed, as the daemon's
cycles between two evaluations do.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sqlalchemy import Engine

from monitor.alert.config import load_routing
from monitor.alert.cycle import run_cycle
from monitor.alert.memory import CycleMemory
from monitor.core.settings import SparkConfig
from monitor.devtools.jdbc import ensure_jdbc_driver
from monitor.evaluate import job
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import default_rule_paths, load_rules
from monitor.evaluate.spark import build_session, jdbc_target
from monitor.store.engine import make_engine

STEPS = (
    "_sized_plan", "choose", "_sorted", "_match", "_observed", "merge_findings", "_write_derived",
    "_copy_derived", "record_minutes", "mark_completed",
)  # fmt: skip
"""The functions of monitor.evaluate.job timed (`_match` renders one match's texts, inside `_sorted`)."""


def timed(spent: dict[str, float], name: str) -> None:
    """Wrap job.`name` so that its calls add their seconds to spent[name]."""
    original = getattr(job, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - started

    setattr(job, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the kept database (SQLAlchemy URL)")
    parser.add_argument("--cluster", default="bench", help="the cluster evaluated (bench)")
    parser.add_argument(
        "--at", required=True, type=datetime.fromisoformat, help="the first evaluation's time (ISO 8601)"
    )
    parser.add_argument("--runs", type=int, default=3, help="evaluations, the first full (3)")
    parser.add_argument("--alert-cycles", type=int, default=0, help="alert cycles afterwards (0)")
    args = parser.parse_args()
    engine = make_engine(args.url)
    if args.runs:
        evaluations(engine, args.url, args.cluster, args.at, args.runs)
    if args.alert_cycles:
        alert_cycles(engine, args.at + timedelta(seconds=args.runs), args.alert_cycles)


def evaluations(engine: Engine, url: str, cluster: str, at: datetime, runs: int) -> None:
    """`runs` evaluations from `at`, one second apart, each step timed (printed)."""
    spent: dict[str, float] = collections.defaultdict(float)
    for name in STEPS:
        timed(spent, name)
    spark = build_session(SparkConfig(master="local[2]"), ensure_jdbc_driver(), 1_000_000)
    rules = load_rules(default_rule_paths()).rules
    plans = Plans()
    for n in range(runs):
        spent.clear()
        started = time.perf_counter()
        result = run_evaluation(
            spark, jdbc_target(url), engine, rules, [cluster], at + timedelta(seconds=n),
            JobSettings(), plans, full=n == 0,
        )  # fmt: skip
        wall = time.perf_counter() - started
        phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in result.seconds.items())
        print(f"run {n} ({result.kind}): {wall:.2f} s ({phases}); findings {result.findings}", flush=True)
        steps = sorted(spent.items(), key=lambda item: -item[1])
        print("    " + ", ".join(f"{name.lstrip('_')} {seconds:.2f}" for name, seconds in steps), flush=True)
    spark.stop()


def alert_cycles(engine: Engine, at: datetime, cycles: int) -> None:
    """`cycles` alert cycles at `at` in one transaction, rolled back; prints each one's seconds."""
    with tempfile.TemporaryDirectory() as work:
        routing_file = Path(work) / "routing.yaml"
        inbox = Path(work) / "alerts.jsonl"
        routing_file.write_text(
            f"receivers:\n  - name: file\n    console:\n      path: {inbox}\nroute:\n  receiver: file\n"
        )
        routing = load_routing(routing_file, None)
        memory = CycleMemory()  # as the daemon's alert stage keeps one (monitor.alert.memory)
        with engine.connect() as conn, conn.begin() as transaction:
            for n in range(cycles):
                started = time.perf_counter()
                result = run_cycle(conn, routing, at, "http://localhost:8080", memory)
                memory.committed(result.alerts_version)  # the next cycle reads in the same transaction
                seconds = time.perf_counter() - started
                read = "every finding" if result.full_read else f"{result.findings_read} findings"
                print(f"alert cycle {n}: {seconds:.2f} s, read {read}; {result.alerts}", flush=True)
            transaction.rollback()


if __name__ == "__main__":
    main()
