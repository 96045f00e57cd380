"""What a day of lag history costs on disk, raw and rolled up, and how fast 90 days of one group
read back (`monitor/store/rollups.py`, migrations 0029 and 0030).

For each size (group-partitions; the collector benchmark's shape: 200 partitions per group),
EVALUATIONS evaluations 30 s apart are written into `derived_group_partition` and `derived_group`
with every column the evaluation fills and the collector benchmark's churn (each evaluation moves
every committed and end offset and every lag), then that day's 24 hours are rolled up by the
maintenance's own statements (`roll_up_hours`). Bytes per row (heap, indexes and TOAST of the
day's partitions) times rows per day gives a day: raw at one evaluation per 30 s (2,880 a day),
96 fifteen-minute rows and 24 hourly rows per key.

At 100,000 group-partitions it then gives one group 90 days of history the way maintenance leaves
it (raw evaluations every 30 s rolled up hour by hour, raw kept 7 days and 15-minute rows 30, the
hourly partitions of 400 days present) and times the group history read of the API and the group
page (`read.history.group_history`, 500 points) over 90 days: the median of REPEATS.

    python bench/storage.py [--url ADMIN_URL] [--port PORT] [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.alerts import on_server, scratch_database, server_parser
from monitor.expose.read.history import group_history
from monitor.store.partitions import create_day_partitions, drop_expired_partitions, partition_name
from monitor.store.rollups import (
    COARSE,
    FINE,
    RESOLUTIONS,
    SOURCES,
    day_hours,
    roll_up_hours,
    rollup_table_name,
)

PORT = 27640
RESULTS = Path(__file__).resolve().parent / "results"
READ_AT = 100_000
PER_GROUP = 200
EVALUATIONS = {10_000: 30, 100_000: 10, 1_000_000: 2}
"""Evaluations written per size: enough rows to weigh one, few enough to write in minutes."""
PER_DAY = {"raw": 2880, FINE.suffix: 96, COARSE.suffix: 24}
REPEATS = 20
DAY = date(2031, 6, 1)
NOW = datetime(2031, 6, 2, 1, tzinfo=UTC)
RETENTION = {"raw": 7, FINE.suffix: 30, COARSE.suffix: 400}

_PARTITION_ROWS = """
INSERT INTO derived_group_partition (
    cluster, group_id, topic, partition, evaluated_at, committed_offset, end_offset, offset_lag,
    lag_seconds, append_lag_seconds, commit_lag_seconds, time_since_last_commit_seconds, consume_rate,
    produce_rate, time_to_catch_up_seconds, catch_up_low_seconds, catch_up_high_seconds, catching_up,
    time_until_data_loss_seconds, data_loss_margin_seconds, data_loss_occurred, lag_seconds_method,
    lag_seconds_error, time_to_read_seconds, data_loss_limit, status, group_state, members, sampled,
    committed_beyond_end)
SELECT 'bench', 'g' || (k / :per_group), 'topic-' || (k % :per_group / 20), k % 20, :at,
       1000000 + :e * 600 + k, 1000000 + :e * 620 + k, 20 * :e + k % 97,
       (20 * :e + k % 97) / 20.0, 2.5 + k % 7, 1.0 + k % 5, 3.0 + k % 11, 20.0 + k % 13, 20.5 + k % 13,
       40.0 + k % 17, 35.0, 45.0, k % 3 = 0, 86400.0 - :e, 80000.0 - :e, false, 'exact', 0.5, 4.0,
       'time', CASE WHEN k % 50 = 0 THEN 'WARN' ELSE 'OK' END, 'Stable', 4, true, false
FROM generate_series(0, :n - 1) k
"""

_GROUP_ROWS = """
INSERT INTO derived_group (
    cluster, group_id, evaluated_at, topics, partitions, offset_lag, lag_seconds, append_lag_seconds,
    commit_lag_seconds, time_since_last_commit_seconds, consume_rate, produce_rate,
    time_to_catch_up_seconds, catch_up_low_seconds, catch_up_high_seconds, catching_up,
    time_until_data_loss_seconds, data_loss_margin_seconds, data_loss_occurred, max_offset_lag,
    max_lag_seconds, status, group_state, members, lag_growing, sampled, partitions_beyond_end,
    consumers_needed, advice_limited_by, hot_topic, hot_partition)
SELECT cluster, group_id, evaluated_at, 10, count(*), sum(offset_lag), max(lag_seconds),
       max(append_lag_seconds), max(commit_lag_seconds), max(time_since_last_commit_seconds),
       sum(consume_rate), sum(produce_rate), max(time_to_catch_up_seconds), 35.0, 45.0, true,
       min(time_until_data_loss_seconds), min(data_loss_margin_seconds), false, max(offset_lag),
       max(lag_seconds), max(status), 'Stable', 4, false, true, 0, 4, 'members', 'topic-0', 0
FROM derived_group_partition WHERE cluster = 'bench' AND evaluated_at = :at
GROUP BY cluster, group_id, evaluated_at
"""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _day_bytes_and_rows(conn: Connection, table: str, day: date) -> tuple[int, int]:
    name = partition_name(table, day)
    size = conn.execute(text("SELECT pg_total_relation_size(CAST(:t AS regclass))"), {"t": name}).scalar_one()
    rows = conn.execute(text(f'SELECT count(*) FROM "{name}"')).scalar_one()
    return int(size), int(rows)


def weigh(engine: Engine, size: int) -> dict[str, float]:
    """Bytes per day of raw evaluations and of each rollup at `size` group-partitions."""
    evaluations = EVALUATIONS.get(size, 2)
    start = datetime.combine(DAY, datetime.min.time(), tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM rollup_hours"))
        for source in SOURCES:
            tables = [source, *(rollup_table_name(source, r) for r in RESOLUTIONS)]
            for table in tables:
                conn.execute(text(f'DROP TABLE IF EXISTS "{partition_name(table, DAY)}"'))
                create_day_partitions(conn, table, [DAY])
    began = time.monotonic()
    for e in range(evaluations):
        at = start + timedelta(seconds=30 * e)
        with engine.begin() as conn:
            conn.execute(text(_PARTITION_ROWS), {"per_group": PER_GROUP, "at": at, "e": e, "n": size})
            conn.execute(text(_GROUP_ROWS), {"at": at})
    _log(f"{size:,}: {evaluations} evaluations written in {time.monotonic() - began:.1f} s")
    began = time.monotonic()
    with engine.begin() as conn:
        for source in SOURCES:
            roll_up_hours(conn, source, day_hours(DAY), NOW)
    rolled = time.monotonic() - began
    _log(f"{size:,}: rolled up in {rolled:.1f} s")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    result: dict[str, float] = {"rollup_seconds": rolled, "evaluations": evaluations}
    with engine.connect() as conn:
        for level in PER_DAY:
            total = 0.0
            for source in SOURCES:
                table = source if level == "raw" else f"{source}_{level}"
                size_bytes, rows = _day_bytes_and_rows(conn, table, DAY)
                keys = rows / (evaluations if level == "raw" else 1)
                total += size_bytes / rows * keys * PER_DAY[level]
            result[level] = total
    return result


def read_90_days(engine: Engine) -> tuple[float, float, int]:
    """Give group g0 90 days of history as maintenance leaves it; time its 90-day read."""
    first = DAY - timedelta(days=89)
    days = [first + timedelta(days=n) for n in range(90)]
    with engine.begin() as conn:
        for source in SOURCES:
            tables = [source, *(rollup_table_name(source, r) for r in RESOLUTIONS)]
            for table in tables:
                create_day_partitions(conn, table, days)
        create_day_partitions(conn, rollup_table_name("derived_group", COARSE), [
            DAY - timedelta(days=n) for n in range(RETENTION[COARSE.suffix])
        ])  # fmt: skip
    for day in days[:-1]:
        with engine.begin() as conn:
            conn.execute(
                text(
                    """INSERT INTO derived_group (cluster, group_id, evaluated_at, offset_lag, max_offset_lag,
                                                   lag_seconds, max_lag_seconds, status, members)
                       SELECT 'bench', 'g0', CAST(:d AS timestamptz) + make_interval(secs => 30 * s),
                              (s * 7919) % 1000, (s * 7919) % 100, s % 60, s % 90, 'OK', 4
                       FROM generate_series(0, 2879) s"""
                ),
                {"d": datetime.combine(day, datetime.min.time(), tzinfo=UTC)},
            )
            roll_up_hours(conn, "derived_group", day_hours(day), NOW)
    with engine.begin() as conn:
        longer = {rollup_table_name(s, r): RETENTION[r.suffix] for s in SOURCES for r in RESOLUTIONS}
        drop_expired_partitions(conn, NOW, RETENTION["raw"], longer)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    timings = []
    points = 0
    with engine.connect() as conn:
        for _ in range(REPEATS):
            began = time.perf_counter()
            history = group_history(conn, "bench", "g0", NOW - timedelta(days=90), NOW, 500)
            timings.append(time.perf_counter() - began)
            points = len(history.points)
    return statistics.median(timings), max(timings), points


def bench(admin_url: str, sizes: list[int]) -> dict[str, Any]:
    result: dict[str, Any] = {"loadavg_before": os.getloadavg(), "sizes": []}
    with scratch_database(admin_url) as engine:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO clusters (name, bootstrap, first_seen, last_seen)"
                    " VALUES ('bench', 'b:9092', :t, :t)"
                ),
                {"t": NOW},
            )
        for size in sizes:
            day = weigh(engine, size)
            result["sizes"].append({"group_partitions": size, **day})
            if size == READ_AT:
                median, slowest, points = read_90_days(engine)
                result["read"] = {
                    "median_s": median,
                    "slowest_s": slowest,
                    "points": points,
                    "repeats": REPEATS,
                }
    result["loadavg_after"] = os.getloadavg()
    result["measured_at"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return result


def report(result: dict[str, Any]) -> str:
    lines = [
        f"# Lag history on disk: raw and rolled up ({result['measured_at']})",
        "",
        "Bytes per day of the evaluations (`derived_group_partition` and `derived_group`, one evaluation"
        " per 30 s) and of their rollups (`bench/storage.py`). The rollup time is for the evaluations"
        " written, not a whole day.",
        "",
        "| group-partitions | evaluations written | raw MB/day | 15-minute MB/day | hourly MB/day |"
        " rollups / raw | rollup of the rows written, s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["sizes"]:
        rollups = row[FINE.suffix] + row[COARSE.suffix]
        lines.append(
            f"| {row['group_partitions']:,} | {int(row['evaluations'])} | {row['raw'] / 1e6:,.0f}"
            f" | {row[FINE.suffix] / 1e6:,.1f} | {row[COARSE.suffix] / 1e6:,.1f}"
            f" | {100 * rollups / row['raw']:.1f} % | {row['rollup_seconds']:.1f} |"
        )
    read = result.get("read")
    if read:
        lines += [
            "",
            f"90-day history read of one group at {READ_AT:,} group-partitions ({read['points']} points):"
            f" median {1000 * read['median_s']:.0f} ms, slowest {1000 * read['slowest_s']:.0f} ms of"
            f" {read['repeats']}.",
        ]
    before, after = result["loadavg_before"][0], result["loadavg_after"][0]
    lines += ["", f"Load average (1 min) {before:.1f} before, {after:.1f} after."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = server_parser(__doc__, PORT)
    parser.add_argument("--sizes", default="10000,100000", help="group-partitions, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    result = on_server(args.url, args.port, "postgres-storage", lambda url: bench(url, sizes))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "storage.json").write_text(json.dumps(result, indent=2) + "\n")
    text_report = report(result)
    (RESULTS / "storage.md").write_text(text_report)
    print(text_report)


if __name__ == "__main__":
    main()
