"""Where a warm evaluation of a small cluster spends its time: Spark jobs, stages and tasks, the
statements PostgreSQL ran, and the job's own phase durations, per evaluation.

    .venv/bin/python bench/evaluate_profile.py                  # 2,000 group-partitions, 10 runs
    .venv/bin/python bench/evaluate_profile.py --rows 1000 --runs 20 --port 55483
    .venv/bin/python bench/evaluate_profile.py --rows 10000 --samples 60 --interval 15  # 60 samples

The cluster is bench/evaluate.py's synthetic one at a small size (`--rows` group-partitions, a
tenth as many partitions, `--samples` offsets samples of each `--interval` seconds apart in the
window: 5 by default, 60 as the daemon takes them), in a fresh database on a private PostgreSQL under
var/bench/postgres-profile (or `--url`). One warm SparkSession (local[2], the daemon's defaults)
evaluates it once to warm up, then `--runs` times, 30 s of evaluation time apart, as the daemon
does. For each run it counts:

- the Spark jobs of the evaluation (each action is at least one), their stages and tasks (the
  status tracker, with the evaluation's runs tagged by a job group; it keeps the daemon's
  `spark.ui.retainedJobs` and `retainedStages`, 100 each, which a warm run's 6 jobs and 17
  stages stay well under);
- the JDBC scans Spark ran (`monitor.evaluate.metrics`);
- the transactions PostgreSQL committed in the database (`pg_stat_database.xact_commit`: every
  JDBC read or write and every statement of the job's own connection counts);
- the CPU seconds this process and Spark's JVM used (PostgreSQL's own not counted): on a shared
  machine the wall time follows the load, the CPU time much less;
- the JVM's CPU seconds by its threads' kind (THREAD_KINDS): planning (the py4j threads), the JIT
  compilers, the garbage collector, the tasks;

and reports the median wall time, CPU time and phase durations with the load average. Prints
Markdown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from bench.detect import spark_jvm_pid
from bench.evaluate import CLUSTER, RUN_SPACING, T0, cpu_seconds, fill
from monitor.core.settings import SparkConfig
from monitor.devtools import postgres
from monitor.devtools.jdbc import ensure_jdbc_driver
from monitor.devtools.paths import var_dir
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import default_rule_paths, load_rules
from monitor.evaluate.spark import build_session, jdbc_target
from monitor.store import migrate
from monitor.store.engine import make_engine, normalize_url

DATABASE = "kh_bench_evaluate_profile"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _transactions(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = :d"),
                {"d": DATABASE},
            ).scalar_one()
        )


def _cpu_seconds(pids: list[int | str]) -> float:
    """User + system CPU seconds of the processes so far (/proc/<pid>/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat
    return total / ticks


THREAD_KINDS = (
    ("planning", ("Thread-",)),
    ("JIT compilers", ("C1 CompilerThre", "C2 CompilerThre")),
    ("garbage collector", ("GC Thread", "G1 ", "VM Periodic Tas", "VM Thread")),
    ("tasks", ("Executor task", "shuffle-exchang")),
)
"""The Spark JVM's threads by what they do, from their names (/proc/<pid>/task/<tid>/comm, 15
characters at most): the py4j threads that answer the Python driver's calls (building and
planning every query, Spark's own work on the driver), the JIT compilers, the collector's
threads and the tasks that process the rows; the rest is "other"."""


def _jvm_threads(pid: int) -> dict[str, float]:
    """CPU seconds so far of the JVM's threads per THREAD_KINDS kind (threads that ended are not
    counted: a difference of two readings undercounts a kind whose threads come and go)."""
    seconds: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue  # the thread ended
        used = cpu_seconds(f"{pid}/task/{task.name}")  # a thread's stat reads as a process's
        if used is not None:
            kind = next((k for k, prefixes in THREAD_KINDS if name.startswith(prefixes)), "other")
            seconds[kind] = seconds.get(kind, 0.0) + used
    return seconds


def _spark_work(spark: Any, group: str) -> dict[str, int]:
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    stages = tasks = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else []:
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None:
                stages += 1
                tasks += stage_info.numTasks
    return {"jobs": len(jobs), "stages": stages, "tasks": tasks}


def evaluate_once(spark: Any, engine: Engine, url: str, n: int, plans: Plans) -> dict[str, Any]:
    rules = load_rules(default_rule_paths()).rules
    group = f"profile-{n}"
    spark.sparkContext.setJobGroup(group, f"evaluation {n}")
    # statistics collector lag: the counters are flushed at most every 500 ms (PostgreSQL <= 14)
    # or at transaction end (15+); a pause makes them settle either way
    time.sleep(0.6)
    before = _transactions(engine)
    load = os.getloadavg()[0]
    jvm = spark_jvm_pid()
    pids: list[int | str] = ["self", jvm]
    cpu = _cpu_seconds(pids)
    threads = _jvm_threads(jvm)
    started = time.perf_counter()
    result = run_evaluation(
        spark, jdbc_target(url), engine, rules, [CLUSTER], T0 + n * RUN_SPACING, JobSettings(), plans
    )
    wall = time.perf_counter() - started
    cpu = _cpu_seconds(pids) - cpu
    after = _jvm_threads(jvm)
    kinds = {k: max(0.0, after.get(k, 0.0) - threads.get(k, 0.0)) for k in (*dict(THREAD_KINDS), "other")}
    time.sleep(0.6)
    statements = _transactions(engine) - before - 1  # the count's own transaction
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "jvm_threads": kinds,
        "seconds": dict(result.seconds),
        "transactions": statements,
        "findings": dict(result.findings),
        "load": load,
        **_spark_work(spark, group),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2000, help="group-partitions (default 2000)")
    parser.add_argument(
        "--samples",
        type=int,
        default=5,
        help="offsets samples of each group-partition in the window (default 5)",
    )
    parser.add_argument(
        "--interval",
        type=int,
        default=180,
        help="seconds between two samples (default 180; the daemon's: 15)",
    )
    parser.add_argument("--runs", type=int, default=10, help="timed runs after the warm-up (default 10)")
    parser.add_argument("--url", help="an existing server (its admin database); default: a local one")
    parser.add_argument("--port", type=int, default=55483, help="the local server's port (default 55483)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    args = parser.parse_args()
    if args.rows < 200 or args.rows % 200:
        parser.error("--rows must be a multiple of 200")
    server = None
    if args.url:
        admin_url = normalize_url(args.url)
    else:
        server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-profile", args.port, log=_log)
        server.up()
        admin_url = server.url("postgres")
    # The daemon's settings (RETAINED_STATUS included: keeping 1,000 jobs' and 2,000 stages' status
    # instead grew the heap a full collection walks and made the warm runs 0.1-0.2 s slower than
    # the daemon's); a run's jobs, a few dozen at most, are counted right after it.
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = build_session(SparkConfig(master="local[2]", conf=conf), ensure_jdbc_driver())
    postgres.drop_database(admin_url, DATABASE)
    postgres.create_database(admin_url, DATABASE)
    url = make_url(admin_url).set(database=DATABASE).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        shape = fill(engine, args.rows, samples=args.samples, interval=args.interval)
        _log(f"{args.rows} group-partitions, {shape['partitions']} partitions, {shape['groups']} groups")
        plans = Plans()  # as the daemon's evaluate stage: the plan is built once, then reused
        warm = evaluate_once(spark, engine, url, 0, plans)
        _log(f"warm-up: {warm['wall_s']:.1f} s")
        runs = []
        for n in range(1, args.runs + 1):
            run = evaluate_once(spark, engine, url, n, plans)
            _log(
                f"run {n}: {run['wall_s']:.2f} s, cpu {run['cpu_s']:.2f} s, jobs {run['jobs']}, "
                f"stages {run['stages']}, tasks {run['tasks']}, transactions {run['transactions']}, "
                f"load {run['load']:.1f}, "
                + ", ".join(f"{k} {v:.2f}" for k, v in run["seconds"].items())
                + "; JVM CPU s: "
                + ", ".join(f"{k} {v:.2f}" for k, v in run["jvm_threads"].items())
            )
            runs.append(run)
        engine.dispose()
    finally:
        spark.stop()
        postgres.drop_database(admin_url, DATABASE)
        if server is not None:
            server.down()
    print(report(args, shape, warm, runs))
    return 0


def report(
    args: argparse.Namespace, shape: dict[str, Any], warm: dict[str, Any], runs: list[dict[str, Any]]
) -> str:
    def median(key: str) -> float:
        return statistics.median(float(r[key]) for r in runs)

    walls = sorted(r["wall_s"] for r in runs)
    p95 = walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))]
    phases = sorted({k for r in runs for k in r["seconds"]})
    lines = [
        f"{args.rows} group-partitions, {shape['partitions']} partitions, {shape['groups']} groups; "
        f"{len(runs)} warm runs after a warm-up of {warm['wall_s']:.1f} s; "
        f"load average {min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f}",
        "",
        "| median wall s | p95 wall s | median CPU s | "
        + " | ".join(f"{p} s" for p in phases)
        + " | Spark jobs | stages | tasks | PostgreSQL transactions |",
        "|---:|---:|---:|" + "---:|" * len(phases) + "---:|---:|---:|---:|",
        f"| {median('wall_s'):.2f} | {p95:.2f} | {median('cpu_s'):.2f} | "
        + " | ".join(f"{statistics.median(r['seconds'].get(p, 0.0) for r in runs):.2f}" for p in phases)
        + f" | {median('jobs'):.0f} | {median('stages'):.0f} | {median('tasks'):.0f}"
        + f" | {median('transactions'):.0f} |",
        "",
        "The Spark JVM's CPU seconds per run by its threads' kind (median; first and last run):",
        "",
        "| threads | median | run 1 | run " + str(len(runs)) + " |",
        "|---|---:|---:|---:|",
    ]
    for kind in runs[0]["jvm_threads"]:
        values = [r["jvm_threads"][kind] for r in runs]
        lines.append(f"| {kind} | {statistics.median(values):.2f} | {values[0]:.2f} | {values[-1]:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
