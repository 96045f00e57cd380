"""How long building an evaluation plan takes: the driver time before the first evaluation after a
start, and again after each change of the rules, clusters or window (monitor.evaluate.plan).

    .venv/bin/python bench/plan_build.py                  # the shipped rules, 1 + 5 builds
    .venv/bin/python bench/plan_build.py --builds 3 --conf spark.python.sql.dataFrameDebugging.enabled=true

A plan does not depend on the data (its clock and inputs are read when it runs), so the builds
run against an empty database migrated to head on a private PostgreSQL (var/bench/postgres-plan
on 127.0.0.1:55484, or --url). One SparkSession as the daemon builds it (local[2], the daemon's
settings, then --conf), the small-cluster settings an evaluation of one partition runs under
(`monitor.evaluate.job.SINGLE_PARTITION`), the shipped rule pack (alert_rules/*.yaml): one build
to warm the JVM, then --builds timed builds, each of another cluster (a new plan, as a test or a
changed configuration makes). Reports each build's seconds and the round trips from Python to
Spark's JVM it made, and the median, as Markdown on stdout."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy.engine import make_url

from monitor.core.settings import SparkConfig
from monitor.devtools import postgres
from monitor.devtools.jdbc import ensure_jdbc_driver
from monitor.devtools.paths import var_dir
from monitor.evaluate.job import SINGLE_PARTITION
from monitor.evaluate.plan import build_plan, plan_key
from monitor.evaluate.rules import default_rule_paths, load_rules
from monitor.evaluate.spark import build_session, jdbc_target
from monitor.store import migrate
from monitor.store.engine import normalize_url

BENCH_PG_PORT = 55484
DATABASE = "kh_bench_plan"


def _round_trips() -> dict[str, int]:
    """A counter of the commands py4j sends to the JVM (every call, attribute and object)."""
    from py4j import clientserver

    counted = {"calls": 0}
    send = clientserver.ClientServerConnection.send_command

    def counting(self: object, command: str, *args: object, **kwargs: object) -> object:
        counted["calls"] += 1
        return send(self, command, *args, **kwargs)

    clientserver.ClientServerConnection.send_command = counting
    return counted


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--builds", type=int, default=5, help="timed builds after the warm-up (default 5)")
    parser.add_argument("--url", help="an existing server (its admin database); default: a local one")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="an extra Spark setting (repeatable)"
    )
    args = parser.parse_args()
    if args.builds < 1:
        parser.error("--builds must be at least 1")
    server = (
        None if args.url else postgres.LocalPostgres(var_dir() / "bench" / "postgres-plan", BENCH_PG_PORT)
    )
    started = server is not None and not server.status()
    if server is None:
        admin_url = normalize_url(args.url)
    else:
        server.up()
        admin_url = server.url("postgres")
    postgres.drop_database(admin_url, DATABASE)
    postgres.create_database(admin_url, DATABASE)
    url = make_url(admin_url).set(database=DATABASE).render_as_string(hide_password=False)
    migrate.upgrade(url, "head")
    extra = dict(item.split("=", 1) for item in args.conf)
    spark = build_session(SparkConfig(master="local[2]", conf=extra), ensure_jdbc_driver())
    for name, value in SINGLE_PARTITION.items():
        spark.conf.set(name, value)
    rules, target = list(load_rules(default_rule_paths()).rules), jdbc_target(url)
    counted = _round_trips()
    rows: list[tuple[int, float, int]] = []
    for build in range(args.builds + 1):
        key = plan_key(spark, target, [f"plan-{build}"], rules, timedelta(minutes=15), 10, 1, True)
        before, started = counted["calls"], time.monotonic()
        build_plan(spark, target, rules, key, datetime.now(UTC))
        rows.append((build, time.monotonic() - started, counted["calls"] - before))
        print(f"build {build}: {rows[-1][1]:.2f} s", file=sys.stderr)
    spark.stop()
    postgres.drop_database(admin_url, DATABASE)
    if server is not None and started:
        server.down()
    timed = rows[1:]
    print(
        f"{len(rules)} rules; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; settings: {extra or 'as the daemon'}\n"
    )
    print("| build | seconds | round trips to the JVM |\n|---|---:|---:|")
    for build, seconds, calls in rows:
        print(f"| {build}{' (warm-up)' if build == 0 else ''} | {seconds:.2f} | {calls:,} |")
    print(f"\nmedian of the timed builds: {statistics.median(s for _, s, _ in timed):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
