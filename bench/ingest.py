"""Throughput of `write_offsets_batch`: sample rows per second into PostgreSQL.

    .venv/bin/python bench/ingest.py                 # a private server under var/bench/postgres
    .venv/bin/python bench/ingest.py --url postgresql+psycopg://user@host/db --cycles 10

Without --url, a project-local PostgreSQL is started on 127.0.0.1:55463 (data under
var/bench/postgres, or $KAFKA_HEALTH_VAR/bench/postgres) and stopped at the end if this script
started it. A scratch database is created, migrated, and dropped afterwards.

Each batch is one offsets cycle of one cluster: P partitions, 4 groups reading all of them (4P
group offsets) and a commit observed on a quarter of those (P), i.e. about 6P rows. The first cycle
of each size fills the latest tables and is not timed; the timed cycles that follow update them in
place, as every cycle does in production. Each timed cycle is one transaction, commit included.
The last column replays the last batch in idempotent mode (what the buffered writer does after
an outage). Prints a Markdown table on stdout (and to bench/results/ingest.md, with everything
measured in ingest.json); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from monitor.core.clock import to_millis
from monitor.core.records import (
    METHOD_EXACT,
    CommitObservation,
    CommittedOffset,
    GroupDescription,
    GroupMember,
    GroupOffsetSample,
    OffsetsBatch,
    PartitionOffsets,
    PartitionSample,
)
from monitor.devtools import postgres
from monitor.devtools.paths import var_dir
from monitor.store import migrate
from monitor.store.engine import make_engine, normalize_url
from monitor.store.samples import write_offsets_batch

BENCH_PORT = 55463
TARGET_ROWS = (10_000, 50_000, 100_000)
GROUPS = 4
PARTITIONS_PER_TOPIC = 50
START = datetime(2031, 1, 1, tzinfo=UTC)
RESULTS = Path(__file__).resolve().parent / "results"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_batch(cluster: str, partitions: int, cycle: int) -> OffsetsBatch:
    """Cycle `cycle` (15 s apart) of a cluster with `partitions` partitions; about 6 rows each."""
    at = START + timedelta(seconds=15 * cycle)
    at_ms = to_millis(at)
    keys = [(f"topic-{n // PARTITIONS_PER_TOPIC}", n % PARTITIONS_PER_TOPIC) for n in range(partitions)]
    samples = [
        PartitionSample(
            PartitionOffsets(
                topic, p, 1_000 * cycle, 1_000 * (cycle + 1) + p, 1_000 * (cycle + 1) + p - 1, at_ms - 5
            ),
            at_ms - 3_600_000,
            at_ms - 5,
            "CreateTime",
        )
        for topic, p in keys
    ]
    offsets = []
    observations = []
    for g in range(GROUPS):
        group = f"group-{g}"
        for i, (topic, p) in enumerate(keys):
            end = 1_000 * (cycle + 1) + p
            committed = end - 10 * (g + 1)
            offsets.append(
                GroupOffsetSample(
                    CommittedOffset(group, topic, p, committed),
                    end,
                    1_000 * cycle,
                    end - committed,
                    False,
                    at_ms - 20_000,
                    at_ms - 21_000,
                    METHOD_EXACT,
                )
            )
            if i % GROUPS == g:
                observations.append(CommitObservation(group, topic, p, committed, committed - 7, at_ms))
    groups = [
        GroupDescription(
            f"group-{g}",
            "Stable",
            "consumer",
            "range",
            1,
            tuple(GroupMember(f"member-{g}-{m}", f"client-{m}", "/10.1.0.7", ()) for m in range(3)),
        )
        for g in range(GROUPS)
    ]
    return OffsetsBatch(
        cluster,
        at,
        partitions=samples,
        groups=groups,
        group_offsets=offsets,
        commit_observations=observations,
    )


def _write(engine: Engine, batch: OffsetsBatch, *, idempotent: bool = False) -> float:
    started = time.perf_counter()
    with engine.begin() as conn:
        write_offsets_batch(conn, batch, idempotent=idempotent)
    return time.perf_counter() - started


def run_size(engine: Engine, target_rows: int, cycles: int) -> dict[str, float]:
    partitions = max(1, round(target_rows / (2 + GROUPS)))
    cluster = f"bench-{target_rows}"
    _write(engine, make_batch(cluster, partitions, 0))  # fills the latest tables
    seconds = []
    for cycle in range(1, cycles + 1):
        batch = make_batch(cluster, partitions, cycle)
        seconds.append(_write(engine, batch))
        _log(
            f"  {batch.row_count:>7} rows: {seconds[-1]:.3f} s ({batch.row_count / seconds[-1]:,.0f} rows/s)"
        )
    replay = _write(engine, batch, idempotent=True)
    median = statistics.median(seconds)
    return {
        "rows": batch.row_count,
        "partitions": len(batch.partitions),
        "group_offsets": len(batch.group_offsets),
        "observations": len(batch.commit_observations),
        "median_s": median,
        "median_rate": batch.row_count / median,
        "best_rate": batch.row_count / min(seconds),
        "replay_rate": batch.row_count / replay,
    }


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 0


def report(results: list[dict[str, float]], server_version: str, cycles: int) -> str:
    lines = [
        "## write_offsets_batch throughput",
        "",
        f"Machine: {_cpus()} CPU (nproc), {_memory()} RAM, {platform.system()} {platform.machine()}; "
        f"PostgreSQL {server_version}; Python {platform.python_version()}. "
        f"Median of {cycles} cycles per size, each one transaction including its commit.",
        "",
        "| batch rows | partitions | group offsets | commits observed | median s | rows/s (median) "
        "| rows/s (best) | replay rows/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        counts = (r["rows"], r["partitions"], r["group_offsets"], r["observations"])
        rates = (r["median_rate"], r["best_rate"], r["replay_rate"])
        cells = [f"{n:,.0f}" for n in counts] + [f"{r['median_s']:.3f}"] + [f"{n:,.0f}" for n in rates]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _save(results: list[dict[str, float]], server_version: str, cycles: int, loadavg_start: float) -> str:
    text_ = report(results, server_version, cycles)
    machine = {
        "cpus": _cpus(), "memory": _memory(), "system": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(), "postgresql": server_version,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "loadavg_start": loadavg_start,
        "loadavg_end": os.getloadavg()[0],
    }  # fmt: skip
    text_ += (f"\n\nMeasured {machine['date']}; load average (1 min) {loadavg_start:.1f} at the start, "
              f"{machine['loadavg_end']:.1f} at the end.")  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ingest.md").write_text(text_ + "\n")
    document = {"machine": machine, "cycles": cycles, "sizes": results}
    (RESULTS / "ingest.json").write_text(json.dumps(document, indent=2) + "\n")
    return text_


def bench(admin_url: str, cycles: int) -> str:
    loadavg_start = os.getloadavg()[0]
    name = f"kh_bench_{uuid.uuid4().hex[:8]}"
    postgres.create_database(admin_url, name)
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        try:
            with engine.connect() as conn:
                version = str(conn.execute(text("SHOW server_version")).scalar_one())
            results = []
            for target in TARGET_ROWS:
                _log(f"batches of about {target:,} rows")
                results.append(run_size(engine, target, cycles))
        finally:
            engine.dispose()
    finally:
        postgres.drop_database(admin_url, name)
    return _save(results, version, cycles, loadavg_start)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="an existing server (its admin database); default: a local one")
    parser.add_argument("--cycles", type=int, default=5, help="timed cycles per batch size (default 5)")
    parser.add_argument(
        "--port", type=int, default=BENCH_PORT, help=f"the local server's port ({BENCH_PORT})"
    )
    args = parser.parse_args()
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    if args.url:
        print(bench(normalize_url(args.url), args.cycles))
        return 0
    server = postgres.LocalPostgres(var_dir() / "bench" / "postgres", args.port, log=_log)
    was_running = server.status()
    server.up()
    try:
        print(bench(server.url("postgres"), args.cycles))
    finally:
        if not was_running:
            server.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
