"""What keeping the `/metrics` offset lag series fresh costs (`monitor/expose/metrics/fresh.py`) at
a fleet's size: the fill of `bench/fresh_lag_plan.py` (GROUPS x PARTITIONS group-partitions, an
evaluation's rows) plus the evaluation's group and group-topic rows and an hour of commit
observations (one commit of each group-partition every 5 minutes), on a scratch database.

It measures, each the median of REPEATS:
- a scrape's fresh read with no commit since the last one (the probe of `changed_since` only);
- a fresh read after CHANGED groups committed (the probe, their read, the snapshot re-encoded);
- the first fresh read after a build, which reads every group committed in the 5 minutes before the
  evaluation (here all of them: the whole fleet, once per evaluation);
- the build itself (the evaluation's state read and encoded), for scale;
and prints the probe's plan.

    python bench/fresh_metrics.py [--url ADMIN_URL] [--port PORT] [GROUPS] [PARTITIONS] [CHANGED]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.alerts import BENCH_PORT, on_server, scratch_database, server_parser
from bench.fresh_lag_plan import fill
from monitor.core.settings import MetricsConfig
from monitor.expose.metrics import snapshot as snapshot_module
from monitor.expose.metrics.snapshot import MetricsSnapshot
from monitor.store.fresh_lag import COMMITTED_SINCE
from monitor.store.partitions import ensure_partitions

REPEATS = 10
PORT = BENCH_PORT

GROUP_ROWS = [
    """INSERT INTO derived_group (cluster, group_id, evaluated_at, offset_lag, max_offset_lag, status,
                                  partitions, topics)
       SELECT cluster, group_id, evaluated_at, sum(offset_lag), max(offset_lag), 'OK', count(*),
              count(DISTINCT topic)
       FROM derived_group_partition WHERE cluster = 'bench' GROUP BY cluster, group_id, evaluated_at""",
    """INSERT INTO derived_group_topic (cluster, group_id, topic, evaluated_at, offset_lag, max_offset_lag,
                                        status, partitions)
       SELECT cluster, group_id, topic, evaluated_at, sum(offset_lag), max(offset_lag), 'OK', count(*)
       FROM derived_group_partition WHERE cluster = 'bench'
       GROUP BY cluster, group_id, topic, evaluated_at""",
]
"""The evaluation's group and group-topic rows of cluster 'bench', from its group-partition rows."""

MORE = [
    """INSERT INTO clusters (name, bootstrap, first_seen, last_seen)
       VALUES ('bench', 'bench:9092', :at, :at)""",
    *GROUP_ROWS,
    """INSERT INTO commit_observations (cluster, group_id, topic, partition, observed_at, committed_offset)
       SELECT o.cluster, o.group_id, o.topic, o.partition,
              :at - make_interval(secs => 300 * k + (hashtext(o.group_id) & 255)), 90000 + k
       FROM latest_group_offsets o, generate_series(0, 11) k WHERE o.cluster = 'bench'""",
]


def commit(engine: Engine, groups: int, changed: int, round_: int) -> None:
    """`changed` groups commit each partition now (observations and the newest commits)."""
    picked = [f"g{(round_ * changed + i) % groups}" for i in range(changed)]
    with engine.begin() as conn:
        conn.execute(
            text(
                """INSERT INTO commit_observations (cluster, group_id, topic, partition, observed_at,
                                                    committed_offset)
                   SELECT cluster, group_id, topic, partition, now(), 96000 + :r
                   FROM latest_group_offsets WHERE cluster = 'bench' AND group_id = ANY(:g)"""
            ),
            {"g": picked, "r": round_},
        )
        conn.execute(
            text(
                """INSERT INTO latest_commits AS l (cluster, group_id, topic, partition, committed_offset,
                                                   observed_at)
                   SELECT cluster, group_id, topic, partition, 96000 + :r, now()
                   FROM latest_group_offsets WHERE cluster = 'bench' AND group_id = ANY(:g)
                   ON CONFLICT (cluster, group_id, topic, partition) DO UPDATE SET
                       committed_offset = excluded.committed_offset, observed_at = excluded.observed_at"""
            ),
            {"g": picked, "r": round_},
        )


def timed(run: Callable[[], object], before: Callable[[int], object] = lambda _: None) -> list[float]:
    times = []
    for i in range(REPEATS):
        before(i)
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return times


def line(what: str, times: list[float]) -> str:
    return f"| {what} | {statistics.median(times):.1f} ms | {max(times):.1f} ms |"


def bench(admin_url: str, groups: int, per_group: int, changed: int) -> None:
    with scratch_database(admin_url) as engine:
        at = datetime.now(UTC).replace(microsecond=0)
        with engine.begin() as conn:
            fill(conn, groups, per_group)
            ensure_partitions(conn, at, ahead_days=1)  # the rows move to today's partitions
            conn.execute(text("UPDATE derived_cluster SET evaluated_at = :at"), {"at": at})
            for table in ("derived_group_partition",):
                conn.execute(text(f"UPDATE {table} SET evaluated_at = :at"), {"at": at})
            for statement in MORE:
                conn.execute(text(statement), {"at": at})
            for table in ("derived_group", "derived_group_topic", "commit_observations"):
                conn.execute(text(f"ANALYZE {table}"))
        snapshot_module.FRESH_FOR_SECONDS = 0.0  # every fresh read is measured, none served from the last
        settings = MetricsConfig(max_partition_series=10 * groups * per_group, build_timeout_seconds=120)
        snapshot = MetricsSnapshot(lambda: engine, settings)
        builds = timed(lambda: snapshot._build(snapshot._marker()))
        after_build: list[float] = []
        for _ in range(REPEATS):
            snapshot._fresh_since = None
            started = time.perf_counter()
            snapshot._freshen()
            after_build.append((time.perf_counter() - started) * 1000)
        quiet = timed(snapshot.refresh)  # (the check finds no new evaluation: the fresh read only)
        busy = timed(snapshot.refresh, lambda i: commit(engine, groups, changed, i))
        with engine.connect() as conn:
            since = datetime.now(UTC) - timedelta(seconds=10)
            plan = conn.execute(text(f"EXPLAIN (ANALYZE, BUFFERS) {COMMITTED_SINCE}"), {"since": since})
            plan_text = "\n".join(str(r[0]) for r in plan)
        size = groups * per_group
        print(f"\n{size:,} group-partitions ({groups:,} groups of {per_group}), load {os.getloadavg()}\n")
        print(f"| step (median and largest of {REPEATS}) | median | largest |\n|---|---:|---:|")
        print(line("fresh read, no commit since the last (the probe)", quiet))
        print(line(f"fresh read after {changed} groups committed ({changed * per_group} partitions)", busy))
        print(line("first fresh read after a build (every group committed in the look-back)", after_build))
        print(line("build (the evaluation's state read and encoded), for scale", builds))
        print(f"\nthe probe's plan, the last 10 s:\n\n```\n{plan_text}\n```")


def main() -> None:
    parser = server_parser(__doc__, PORT)
    parser.add_argument("groups", nargs="?", type=int, default=1000)
    parser.add_argument("partitions", nargs="?", type=int, default=100)
    parser.add_argument("changed", nargs="?", type=int, default=10)
    args = parser.parse_args()
    on_server(
        args.url,
        args.port,
        "fresh-metrics",
        lambda url: bench(url, args.groups, args.partitions, args.changed),
    )


if __name__ == "__main__":
    main()
