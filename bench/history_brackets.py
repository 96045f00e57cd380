"""The end-offset history read of the offsets job (`monitor.store.history.end_offset_brackets`)
after a day and after a week of samples: it must not grow with the days the store keeps.

    .venv/bin/python bench/history_brackets.py                  # 50 partitions, 1 and 7 days
    .venv/bin/python bench/history_brackets.py --partitions 200 --days 1,3,7

The offsets job asks for the samples around the committed offsets of lagging groups whose
append times it does not hold (the new commits of every cycle at a fleet that commits), over a
window of `monitor.collect.recall.HISTORY_WINDOW` (7 days). For each `--days`, a new database
on a project-local PostgreSQL (bench/web.py's, 127.0.0.1:55493) gets `--partitions` partitions'
samples every 15 s (the offsets cycle) for that many days, each cycle 10 records further, and
ANALYZE; then the read of four targets per partition (3, 25, 400 and 4,000 records behind the
end: groups keeping up, and lagging by one, ten and a hundred cycles) is timed `--reads` times,
its median reported.

Output: Markdown on stdout, progress on stderr, bench/results/history-brackets.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import web
from bench.summary import code_commit
from monitor.collect.recall import HISTORY_WINDOW
from monitor.store.engine import make_engine
from monitor.store.history import end_offset_brackets
from monitor.store.ingest import copy_rows
from monitor.store.partitions import ensure_partitions

RESULTS = Path(__file__).resolve().parent / "results"
CLUSTER, TOPIC = "bench", "history"
EVERY = timedelta(seconds=15)
STEP = 10
"""Records appended to each partition between two samples."""
BEHIND = (3, 25, 400, 4_000)
COLUMNS = ["cluster", "topic", "partition", "sampled_at", "start_offset", "end_offset", "run_id"]
NOW = datetime(2030, 5, 8, tzinfo=UTC)


def _samples(partitions: int, days: int) -> Iterator[tuple[Any, ...]]:
    count = int(timedelta(days=days) / EVERY)
    start = NOW - count * EVERY
    for partition in range(partitions):
        for n in range(1, count + 1):
            yield (CLUSTER, TOPIC, partition, start + n * EVERY, 0, n * STEP, None)


def measure(admin_url: str, partitions: int, days: int, reads: int) -> dict[str, Any]:
    with web.migrated_database(admin_url, "kh_bench_history") as url:
        engine = make_engine(url)
        try:
            began = time.monotonic()
            with engine.begin() as conn:
                ensure_partitions(conn, NOW - timedelta(days=days + 1), days + 2)
                rows = copy_rows(conn, "partition_offsets", COLUMNS, _samples(partitions, days))
            with engine.connect() as conn:
                conn.execute(text("ANALYZE partition_offsets"))
                conn.commit()
            web._log(f"  {days} day(s): {rows:,} samples written in {time.monotonic() - began:.0f} s")
            end = int(timedelta(days=days) / EVERY) * STEP
            targets = [(TOPIC, p, end - behind) for p in range(partitions) for behind in BEHIND]
            seconds = []
            with engine.connect() as conn:
                for _ in range(reads + 1):  # the first warms the caches
                    began = time.perf_counter()
                    found = end_offset_brackets(conn, CLUSTER, targets, NOW - HISTORY_WINDOW)
                    seconds.append(time.perf_counter() - began)
            return {
                "days": days,
                "samples": rows,
                "targets": len(targets),
                "rows_read": sum(map(len, found.values())),
                "median_seconds": round(statistics.median(seconds[1:]), 4),
                "max_seconds": round(max(seconds[1:]), 4),
            }
        finally:
            engine.dispose()


def report(result: dict[str, Any]) -> str:
    lines = [
        f"## The end-offset history read after days of samples ({result['measured_at']}, "
        f"load {result['loadavg_before']} -> {result['loadavg_after']})",
        "",
        f"{result['partitions']} partitions sampled every 15 s, {len(BEHIND)} targets a partition "
        f"({', '.join(map(str, BEHIND))} records behind the end), {result['reads']} reads each; "
        f"`{result['commit']}`.",
        "",
        "| days of samples | samples | targets | rows read | median s | max s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["runs"]:
        lines.append(
            f"| {row['days']} | {row['samples']:,} | {row['targets']:,} | {row['rows_read']:,} | "
            f"{row['median_seconds']} | {row['max_seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=50, help="partitions sampled (50)")
    parser.add_argument("--days", default="1,7", help="days of samples, comma-separated (1,7)")
    parser.add_argument("--reads", type=int, default=5, help="timed reads at each size (5)")
    parser.add_argument("--port", type=int, default=web.BENCH_PORT, help="the local PostgreSQL's port")
    args = parser.parse_args()
    try:
        days = [int(d) for d in args.days.split(",")]
    except ValueError:
        parser.error(f"--days must be whole numbers separated by commas, not {args.days!r}")
    if min([args.partitions, args.reads, *days]) < 1:
        parser.error("--partitions, --reads and --days must be positive")
    result: dict[str, Any] = {
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_before": round(os.getloadavg()[0], 1),
        "commit": code_commit(),
        "partitions": args.partitions,
        "reads": args.reads,
    }
    with web.local_postgres(args.port) as admin_url:
        result["runs"] = [measure(admin_url, args.partitions, d, args.reads) for d in days]
    result["loadavg_after"] = round(os.getloadavg()[0], 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "history-brackets.json").write_text(json.dumps(result, indent=2) + "\n")
    text_ = report(result)
    (RESULTS / "history-brackets.md").write_text(text_)
    print(text_)
    return 0


if __name__ == "__main__":
    sys.exit(main())
