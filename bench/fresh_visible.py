"""Commit-to-visible through the HTTP API and the Burrow-compatible endpoint: how long after a
consumer's commit returns its committed offset shows in `/api/v1/clusters/{c}/groups/{g}/lag` and
in `/v3/kafka/{c}/consumer/{g}/lag`, with the evaluation standing still (the answers read the
commit stream's rows in the store, not a new evaluation).

    .venv/bin/python bench/fresh_visible.py                  # 100 groups x 100 partitions: 10k
    .venv/bin/python bench/fresh_visible.py --groups 1000    # 100k group-partitions
    .venv/bin/python bench/fresh_visible.py --quick          # 10 groups, 10 commits: under a minute

1. A private 1-node Kafka cluster under var/bench/kafka-fresh-visible (or $KAFKA_HEALTH_VAR/...),
   ports --kafka-port (59292) and 100 higher; one topic of 100 partitions with 5-20 records each;
   --groups simple groups each commit every partition (half caught up, half lagging).
2. A fresh database on a private PostgreSQL under var/bench/postgres-fresh-visible (--pg-port,
   55475), migrated to head.
3. The collector in this process, as the daemon runs it: the commits job (the commit stream's
   thread, supervised again every 15 s as the daemon does), one metadata and one offsets run; then
   an evaluation's rows for every group (the derived group, group-topic and group-partition rows
   of the offsets just collected), as an evaluation would have written them. No evaluation runs
   afterwards, and the offsets job does not run again: a commit can only show through the stream.
4. The web application as the daemon builds it, under uvicorn in another process (bench/web.py's,
   on --web-port, 27390).
5. --commits times, one after the other: a lagging group-partition's consumer commits the next
   offset (synchronously); from the moment the commit returns, one client polls the API and
   another the Burrow endpoint (each a request after the other, no pause) until the answer shows
   it (the committed offset, resp. the lag the commit leaves). Median, p95 and largest of each.

Prints a Markdown table and writes bench/results/fresh-visible.json and fresh-visible.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition
from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.collector import database_url
from bench.collector_load import (
    PARTITIONS_PER_TOPIC,
    TP,
    Workload,
    commit_groups,
    create_topics,
    plan_workload,
    produce,
)
from bench.fresh_metrics import GROUP_ROWS
from bench.summary import nearest_rank
from bench.web import ServerProcess
from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.settings import ClusterConfig, CollectConfig, DevKafkaConfig
from monitor.devtools import postgres
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.paths import cache_dir, var_dir
from monitor.store import migrate
from monitor.store.buffer import BufferedWriter
from monitor.store.engine import make_engine
from monitor.store.partitions import ensure_partitions
from monitor.store.runs import RunRecorder

CLUSTER = "bench"
RESULTS = Path(__file__).resolve().parent / "results"
SUPERVISE_EVERY_SECONDS = 15.0
"""The daemon's interval of the commits job, which supervises the stream."""
VISIBLE_WAIT_SECONDS = 30.0
"""Longest wait for a commit to show before it counts as not seen."""
TARGET_GROUP_PARTITIONS = 100_000
TARGET_MEDIAN_SECONDS = 1.0

EVALUATED = [
    """INSERT INTO derived_cluster (cluster, evaluated_at) VALUES (:c, :at)""",
    """INSERT INTO derived_group_partition (cluster, group_id, topic, partition, evaluated_at,
                                            committed_offset, end_offset, offset_lag, status)
       SELECT cluster, group_id, topic, partition, :at, committed_offset, end_offset, lag, 'OK'
       FROM latest_group_offsets WHERE cluster = :c""",
    *GROUP_ROWS,
]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def evaluated(engine: Engine) -> int:
    """An evaluation's rows of every group, from the offsets collected; the group-partitions."""
    at = datetime.now(UTC)
    with engine.begin() as conn:
        ensure_partitions(conn, at, ahead_days=1)
        for statement in EVALUATED:
            conn.execute(text(statement), {"c": CLUSTER, "at": at})
        return int(
            conn.execute(
                text("SELECT count(*) FROM derived_group_partition WHERE cluster = :c"), {"c": CLUSTER}
            ).scalar_one()
        )


def _api_shows(client: httpx.Client, group: str, tp: TP, offset: int, end: int) -> bool:
    answer = client.get(f"/api/v1/clusters/{CLUSTER}/groups/{group}/lag", params={"limit": 1000})
    answer.raise_for_status()
    return any(
        (p["topic"], p["partition"]) == tp and p["committed_offset"] == offset for p in answer.json()["items"]
    )


def _burrow_shows(client: httpx.Client, group: str, tp: TP, offset: int, end: int) -> bool:
    answer = client.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
    answer.raise_for_status()
    return any(
        (p["topic"], p["partition"]) == tp and p["current_lag"] == end - offset
        for p in answer.json()["status"]["partitions"]
    )


def _until(shows: Any, client: httpx.Client, args: tuple[Any, ...], since: float) -> float | None:
    """Seconds from `since` to the first answer that shows the commit; None past the wait."""
    while time.monotonic() < since + VISIBLE_WAIT_SECONDS:
        if shows(client, *args):
            return time.monotonic() - since
    return None


def probe(bootstrap: str, base: str, workload: Workload, count: int, supervise: Any) -> dict[str, Any]:
    """`count` commits, one after the other; the seconds each took to show in each answer."""
    rng = random.Random(7)
    lagging = [
        (group, tp) for group, offsets in sorted(workload.commits.items()) for tp, o in offsets.items()
    ]
    seen: dict[str, list[float]] = {"api": [], "burrow": []}
    unseen = {"api": 0, "burrow": 0}
    consumers: dict[str, Consumer] = {}
    supervised = time.monotonic()
    with (
        httpx.Client(base_url=base, timeout=10) as api,
        httpx.Client(base_url=base, timeout=10) as burrow,
        ThreadPoolExecutor(max_workers=2) as pool,
    ):
        for _ in range(count):
            if time.monotonic() - supervised > SUPERVISE_EVERY_SECONDS:
                supervise()
                supervised = time.monotonic()
            candidates = [(g, tp) for g, tp in lagging if workload.commits[g][tp] < workload.records[tp]]
            group, tp = rng.choice(candidates)
            offset, end = workload.commits[group][tp] + 1, workload.records[tp]
            consumer = consumers.get(group)
            if consumer is None:
                consumer = Consumer(
                    {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
                )
                consumers[group] = consumer
            consumer.commit(offsets=[TopicPartition(tp[0], tp[1], offset)], asynchronous=False)
            returned = time.monotonic()
            workload.commits[group][tp] = offset
            values = (group, tp, offset, end)
            futures = {
                "api": pool.submit(_until, _api_shows, api, values, returned),
                "burrow": pool.submit(_until, _burrow_shows, burrow, values, returned),
            }
            for name, future in futures.items():
                seconds = future.result()
                if seconds is None:
                    unseen[name] += 1
                else:
                    seen[name].append(seconds)
    for consumer in consumers.values():
        consumer.close()
    return {"seconds": seen, "unseen": unseen}


def collected(url: str, bootstrap: str) -> tuple[ClusterCollector, Engine]:
    """The collector with its commit stream live and one metadata and one offsets run behind it."""
    engine = make_engine(url)
    clock = SystemClock()
    config = CollectConfig()
    writer = BufferedWriter(engine, config.buffer_max_rows, clock)
    cluster = ClusterConfig(name=CLUSTER, bootstrap_servers=bootstrap.split(","), request_timeout_seconds=30)
    collector = ClusterCollector(
        cluster, engine, clock, RunRecorder(engine, clock, writer=writer), writer, config
    )
    collector.start()
    commits = collector.context.commits
    collector.run("commits")
    deadline = time.monotonic() + 120
    while not commits.positioned:
        if time.monotonic() > deadline:
            raise RuntimeError("the commit stream was not positioned within 120 s")
        time.sleep(0.2)
    for job in ("metadata", "offsets"):
        collector.run(job)
    if not commits.live:
        raise RuntimeError("the commit stream is not live after the offsets run")
    return collector, engine


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    home = var_dir() / "bench" / "kafka-fresh-visible"
    cluster = DevKafkaCluster(
        DevKafkaConfig(nodes=1, base_port=args.kafka_port, heap_mb=1024), home, cache_dir()
    )
    server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-fresh-visible", args.pg_port, log=_log)
    result: dict[str, Any] = {"loadavg_before": os.getloadavg()}
    cluster.down(purge=True)
    server.up()
    try:
        cluster.up(report=lambda m: _log(f"  {m}"))
        admin_url = server.url("postgres")
        name = "kh_bench_fresh_visible"
        postgres.drop_database(admin_url, name)
        postgres.create_database(admin_url, name)
        url = database_url(admin_url, name)
        migrate.upgrade(url)
        workload = plan_workload(PARTITIONS_PER_TOPIC, args.groups, rng, PARTITIONS_PER_TOPIC)
        bootstrap = cluster.bootstrap_servers
        started = time.monotonic()
        create_topics(bootstrap, workload.topics)
        produce(bootstrap, workload, [(tp, 0, n) for tp, n in workload.records.items()])
        commit_groups(bootstrap, workload.commits, 16)
        result["setup_seconds"] = time.monotonic() - started
        collector, engine = collected(url, bootstrap)
        try:
            result["group_partitions"] = evaluated(engine)
            _log(f"  {result['group_partitions']:,} group-partitions evaluated; the web application starts")
            web = ServerProcess(url, args.web_port)
            try:
                result.update(
                    probe(bootstrap, web.base, workload, args.commits, lambda: collector.run("commits"))
                )
            finally:
                web.stop()
            with engine.connect() as conn:
                runs = conn.execute(
                    text("SELECT count(*) FROM derived_cluster WHERE cluster = :c"), {"c": CLUSTER}
                ).scalar_one()
            result["evaluations"] = int(runs)
        finally:
            collector.stop()
            engine.dispose()
        postgres.drop_database(admin_url, name)
    finally:
        cluster.down(purge=True)
        server.down()
    result.update(groups=args.groups, commits=args.commits, loadavg_after=os.getloadavg())
    result["measured_at"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return result


ANSWERS = (("api", "API `…/groups/{group}/lag`"), ("burrow", "Burrow `/v3/kafka/…/consumer/{group}/lag`"))


def report(result: dict[str, Any]) -> str:
    lines = [
        f"# Commit-to-visible through the API and the Burrow endpoint, {result['group_partitions']:,} "
        f"group-partitions\n",
        f"{result['measured_at']}; {result['commits']} commits; load average (1/5/15 min) "
        f"{' / '.join(f'{v:.1f}' for v in result['loadavg_before'])} before, "
        f"{' / '.join(f'{v:.1f}' for v in result['loadavg_after'])} after, on {os.cpu_count()} CPUs; "
        f"evaluations in the store: {result['evaluations']} (the one written before the commits).\n",
        "| answer | median | p95 | largest | not seen within 30 s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, label in (
        ("api", "API `…/groups/{group}/lag`"),
        ("burrow", "Burrow `/v3/kafka/…/consumer/{group}/lag`"),
    ):
        values = result["seconds"][name]
        cells = [median(values) if values else None, nearest_rank(values, 0.95), max(values, default=None)]
        shown = " | ".join("-" if v is None else f"{v:.3f} s" for v in cells)
        lines.append(f"| {label} | {shown} | {result['unseen'][name]} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=100, help="groups of 100 partitions each (100)")
    parser.add_argument("--commits", type=int, default=30, help="commits measured, one after the other (30)")
    parser.add_argument("--quick", action="store_true", help="10 groups and 10 commits")
    parser.add_argument("--kafka-port", type=int, default=59292, help="the broker's port (59292)")
    parser.add_argument("--pg-port", type=int, default=55475, help="PostgreSQL's port (55475)")
    parser.add_argument("--web-port", type=int, default=27390, help="the web application's port (27390)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.quick:
        args.groups, args.commits = 10, 10
    result = run(args)
    text_report = report(result)
    print(text_report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fresh-visible.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "fresh-visible.md").write_text(text_report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
