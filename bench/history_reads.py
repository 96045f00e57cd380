"""The reads of one group, one topic and of "now" once the store keeps many evaluations, at two
schema revisions of the same database, alternated.

    .venv/bin/python bench/history_reads.py                       # 1,000 evaluations, 2 rounds
    .venv/bin/python bench/history_reads.py --evaluations 300 --rounds 3 --requests 30

Each evaluation writes a row per group-partition, so the derived tables hold a group's rows once
per evaluation kept (2,880 a day at the default interval of 30 s, for the raw days kept). A read
of one group's rows of the newest evaluation, or of its last hour, must not grow with them.

One database on a project-local PostgreSQL (bench/web.py's, 127.0.0.1:55493) is filled with
bench/web.py's read model of 1,000 topics (10,000 partitions, 100 groups of 100 partitions, 10,000
group-partitions) and `--evaluations` evaluations a minute apart. Then, `--rounds` times: the
schema is moved to `--before` (alembic downgrade) and to the head (upgrade), each followed by
ANALYZE and a fresh web server (bench/web.py's, the application as the daemon builds it), which
answers each endpoint once to warm up and then `--requests` times, one request at a time. Each
row gives the median latency of each round at each revision, so that the machine's drift shows.

Output: Markdown on stdout, progress on stderr, bench/results/history-reads.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import web
from monitor.store import migrate
from monitor.store.engine import make_engine

RESULTS = Path(__file__).resolve().parent / "results"
TOPICS = 1_000
GROUP, TOPIC = "group-0000", "topic-00000"
ENDPOINTS = [
    "/api/v1/clusters",
    f"/api/v1/clusters/bench/groups/{GROUP}",
    f"/api/v1/clusters/bench/groups/{GROUP}/lag",
    f"/api/v1/clusters/bench/topics/{TOPIC}",
    f"/v3/kafka/bench/consumer/{GROUP}/lag",
    f"/clusters/bench/groups/{GROUP}",
    f"/clusters/bench/topics/{TOPIC}",
    "/clusters/bench",
]
"""A read of no derived table first (the machine's own drift), then one group's, one topic's and
the cluster's."""


def _measure(url: str, requests: int) -> dict[str, float]:
    """Median ms of `requests` sequential answers of each endpoint, from a fresh server."""
    server = web.ServerProcess(url)
    try:
        medians: dict[str, float] = {}
        with httpx.Client(base_url=server.base, timeout=120) as client:
            for path in ENDPOINTS:
                if client.get(path).status_code != 200:
                    raise SystemExit(f"{path} did not answer 200")
                times = []
                for _ in range(requests):
                    started = time.perf_counter()
                    answer = client.get(path)
                    times.append(time.perf_counter() - started)
                    if answer.status_code != 200:
                        raise SystemExit(f"{path} answered {answer.status_code}")
                medians[path] = round(1000 * statistics.median(times), 1)
        return medians
    finally:
        server.stop()


def _at(url: str, revision: str) -> None:
    if revision == "head":
        migrate.upgrade(url)
    else:
        migrate.downgrade(url, revision)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    finally:
        engine.dispose()


def run(admin_url: str, args: argparse.Namespace) -> dict[str, Any]:
    with web.migrated_database(admin_url, "kh_bench_history") as url:
        engine = make_engine(url)
        try:
            web._log(f"filling {args.evaluations} evaluations of {TOPICS:,} topics")
            started = time.perf_counter()
            web.fill(engine, web.Shape(TOPICS), args.evaluations, datetime.now(UTC))
            fill_s = round(time.perf_counter() - started, 1)
        finally:
            engine.dispose()
        rounds: list[dict[str, Any]] = []
        for number in range(1, args.rounds + 1):
            done: dict[str, Any] = {"round": number, "loadavg": os.getloadavg()[0]}
            for revision in (args.before, "head"):
                _at(url, revision)
                done[revision] = _measure(url, args.requests)
                web._log(f"round {number}, {revision}: {done[revision]}")
            rounds.append(done)
        return {
            "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "topics": TOPICS,
            "group_partitions": web.Shape(TOPICS).group_partitions,
            "evaluations": args.evaluations,
            "fill_s": fill_s,
            "before": args.before,
            "head": migrate.declared_head(),
            "requests": args.requests,
            "rounds": rounds,
        }


def report(result: dict[str, Any]) -> str:
    rounds = result["rounds"]
    before, head = result["before"], result["head"]
    lines = [
        '## Reads of one group, one topic and of "now" with many evaluations kept',
        "",
        f"{result['measured_at']}: bench/web.py's read model of {result['topics']:,} topics "
        f"({result['group_partitions']:,} group-partitions, groups of 100 partitions) with "
        f"{result['evaluations']:,} evaluations a minute apart (filled in {result['fill_s']} s); "
        f"the schema at revision {before} and at the head ({head}), alternated; median ms of "
        f"{result['requests']} requests one at a time after a warm-up, from a fresh server each time. "
        "Load average (1 min) at each round's start: "
        + ", ".join(f"{r['loadavg']:.1f}" for r in rounds)
        + ".",
        "",
        "| endpoint | " + " | ".join(f"round {r['round']}: {before} / {head}" for r in rounds) + " |",
        "|---|" + "---:|" * len(rounds),
    ]
    for path in ENDPOINTS:
        cells = [f"{r[before][path]} / {r['head'][path]}" for r in rounds]
        lines.append(f"| `{path}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--evaluations", type=int, default=1000, help="evaluations kept (1000)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two revisions (2)")
    parser.add_argument("--requests", type=int, default=20, help="requests per endpoint (20)")
    parser.add_argument("--before", default="0034", help="the revision compared with the head (0034)")
    parser.add_argument("--port", type=int, default=web.BENCH_PORT, help="the local PostgreSQL's port")
    args = parser.parse_args()
    if min(args.evaluations, args.rounds, args.requests) < 1:
        parser.error("--evaluations, --rounds and --requests must be positive")
    with web.local_postgres(args.port) as admin_url:
        result = run(admin_url, args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "history-reads.json").write_text(json.dumps(result, indent=2) + "\n")
    text_ = report(result)
    (RESULTS / "history-reads.md").write_text(text_)
    print(text_)
    return 0


if __name__ == "__main__":
    sys.exit(main())
