"""Latency of the web pages, the JSON API, the Burrow endpoints and /metrics under a bounded
local load.

    .venv/bin/python bench/web.py                                  # 100, 1,000 and 10,000 topics
    .venv/bin/python bench/web.py --sizes 100,1000 --requests 100 --concurrency 4,16
    .venv/bin/python bench/web.py --sizes 10000 --only metrics --concurrency 1,4 --output metrics
    .venv/bin/python bench/web.py --sizes 10000 --paths /clusters/bench,/api/v1/clusters/bench/topics

Without --url, a project-local PostgreSQL is started on 127.0.0.1:55493 (data under
var/bench/postgres-web, or $KAFKA_HEALTH_VAR/bench/postgres-web) and stopped at the end if this
script started it. For each size a fresh database is created, migrated and dropped afterwards.

For each size (topics), one cluster `bench` is written straight into the tables the read layer
reads, as the collector and the evaluation job leave them: `size` topics of 10 partitions with
3 replicas, a broker per 4,000 replicas (at least 3), size / 10 groups each reading 10 topics
(so 10 x size group-partitions), 4 configs per topic, 3 members per group, `--evaluations`
evaluations a minute apart (every derived table, so the history endpoints have points),
partition offsets and collection runs. About 2% of the group-partitions lag (WARN or ERR) with a
finding each, a few partitions are under-replicated; one real alert cycle (`run_cycle`, the
shipped routing) turns the findings into alerts and incidents.

Then the real application (`monitor.expose.web.app.create_app` over `make_engine`, as the daemon
builds it) is served by uvicorn in a separate process on 127.0.0.1 (port 27300 or the next free
one), and for each endpoint and each `--concurrency` level, that many clients (one httpx
connection pool, keep-alive) send `--requests` GETs in all, each client its next request as soon
as the previous one answered; `--max-seconds` bounds the time per endpoint and level (requests
still in flight then are abandoned, the row says "cut short", and the server process is
restarted so that their work does not load the next measurement). One request first warms the
endpoint up and is not counted; its latency is reported too. Reported per endpoint: requests/s,
p50/p95/p99 and max latency, errors (any status other than 200, or no answer).

Output: Markdown on stdout, progress on stderr, and bench/results/web.md and web.json (or the
`--output` name), rewritten after each size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.cycle import run_cycle
from monitor.devtools import postgres
from monitor.devtools.paths import var_dir
from monitor.store import migrate
from monitor.store.engine import make_engine, normalize_url
from monitor.store.partitions import ensure_partitions

BENCH_PORT = 55493
WEB_PORTS = range(27300, 27400)
RESULTS = Path(__file__).resolve().parent / "results"
CLUSTER = "bench"
PARTITIONS_PER_TOPIC = 10
TOPICS_PER_GROUP = 10
REPLICAS_PER_BROKER = 4_000
EVALUATION_SECONDS = 60


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- statistics ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of `values`, interpolated linearly between the two nearest
    ranks (numpy's default); NaN for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(latencies: Sequence[float], errors: int, seconds: float) -> dict[str, float | int]:
    """Requests/s and latency percentiles (ms) of one endpoint at one concurrency. `latencies`
    are the seconds of the successful requests; errors count toward requests/s but not latency."""
    done = len(latencies) + errors
    return {
        "requests": done,
        "errors": errors,
        "seconds": seconds,
        "rps": done / seconds if seconds > 0 else math.nan,
        "p50_ms": 1000 * percentile(latencies, 50),
        "p95_ms": 1000 * percentile(latencies, 95),
        "p99_ms": 1000 * percentile(latencies, 99),
        "max_ms": 1000 * max(latencies) if latencies else math.nan,
    }


# -- the read model -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    topics: int

    @property
    def partitions(self) -> int:
        return self.topics * PARTITIONS_PER_TOPIC

    @property
    def groups(self) -> int:
        return max(1, self.topics // TOPICS_PER_GROUP)

    @property
    def group_partitions(self) -> int:
        return self.groups * min(TOPICS_PER_GROUP, self.topics) * PARTITIONS_PER_TOPIC

    @property
    def brokers(self) -> int:
        return max(3, math.ceil(self.partitions * 3 / REPLICAS_PER_BROKER))


# Every statement gets :c (cluster), :t (topics), :p (partitions per topic), :n (partitions),
# :g (groups), :k (topics per group), :b (brokers), :now, :seen, and for the derived tables :at (one
# evaluation) and :e (its index, 0 the oldest). Topic n is `topic-n`, group n `group-n` reading topics
# k*n .. k*n + k - 1; a group-partition lags when (n + partition + topic) % 50 == 0.
_TOPIC = "'topic-' || lpad(tn::text, 5, '0')"
_GROUP = "'group-' || lpad(gn::text, 4, '0')"
_GP_ROWS = """
    FROM generate_series(0, :g - 1) AS gn, generate_series(0, :k - 1) AS j,
         generate_series(0, :p - 1) AS pn,
         LATERAL (SELECT gn * :k + j AS tn) AS t,
         LATERAL (SELECT (gn + pn + tn) % 50 = 0 AS lagging, (gn + tn) % 3 = 0 AS severe) AS s
    WHERE tn < :t"""

_STATIC = [
    "INSERT INTO clusters VALUES (:c, 'k1:9092,k2:9092,k3:9092', 'bench-id', 1, :seen, :now)",
    """INSERT INTO brokers SELECT :c, b, 'broker-' || b, 9092, 'rack-' || (b % 3), :seen, :now, true
       FROM generate_series(1, :b) AS b""",
    f"""INSERT INTO topics SELECT :c, {_TOPIC}, :p, 3, false, :seen, :now, NULL
        FROM generate_series(0, :t - 1) AS tn""",
    f"""INSERT INTO partitions
        SELECT :c, {_TOPIC}, pn, 1 + (tn * :p + pn) % :b,
               ARRAY[1 + (tn * :p + pn) % :b, 1 + (tn * :p + pn + 1) % :b, 1 + (tn * :p + pn + 2) % :b],
               CASE WHEN (tn + pn) % 97 = 0 THEN ARRAY[1 + (tn * :p + pn) % :b, 1 + (tn * :p + pn + 1) % :b]
                    ELSE ARRAY[1 + (tn * :p + pn) % :b, 1 + (tn * :p + pn + 1) % :b,
                               1 + (tn * :p + pn + 2) % :b] END,
               :now
        FROM generate_series(0, :t - 1) AS tn, generate_series(0, :p - 1) AS pn""",
    f"""INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive, valid_from, valid_to)
        SELECT :c, {_TOPIC}, cfg.name, cfg.value, 'topic', false, :seen, NULL
        FROM generate_series(0, :t - 1) AS tn,
             (VALUES ('retention.ms', '604800000'), ('retention.bytes', '-1'),
                     ('cleanup.policy', 'delete'), ('min.insync.replicas', '2')) AS cfg(name, value)""",
    f"""INSERT INTO group_members
        SELECT :c, {_GROUP}, {_GROUP} || '-member-' || m, 'client-' || m, '/10.0.' || (gn % 250) || '.' || m,
               NULL, ARRAY(SELECT 'topic-' || lpad((gn * :k + j)::text, 5, '0') || ':' || pn
                           FROM generate_series(0, :k - 1) AS j, generate_series(0, :p - 1) AS pn
                           WHERE gn * :k + j < :t AND (j * :p + pn) % 3 = m),
               :now
        FROM generate_series(0, :g - 1) AS gn, generate_series(0, 2) AS m""",
    f"""INSERT INTO partition_offsets (cluster, topic, partition, sampled_at, start_offset, end_offset,
                                      max_timestamp_offset, max_timestamp, start_timestamp,
                                      latest_timestamp, timestamp_type)
        SELECT :c, {_TOPIC}, pn, :now, 1000, 100000 + pn, 99999 + pn, :now - interval '5 seconds',
               :now - interval '3 days', :now - interval '5 seconds', 'CreateTime'
        FROM generate_series(0, :t - 1) AS tn, generate_series(0, :p - 1) AS pn""",
]

_EVALUATION = [
    """INSERT INTO derived_cluster
       VALUES (:c, :b, 0, :n, 0, :n / 97 + 1, 0, 1.1, 12.0, false, :at)""",
    f"""INSERT INTO derived_topic
        SELECT :c, {_TOPIC}, :p, 10.0 + tn % 7, 1000.0 * (1 + tn % 7), 1000000 * (1 + tn % 11) + 1000 * :e,
               0.1 * (tn % 9), 259200.0, 604800000, NULL, 0.0, CASE WHEN tn % 97 = 0 THEN 1 ELSE 0 END,
               CASE WHEN tn % 97 = 0 THEN 1 ELSE 0 END, 0, 0, NULL, :at
        FROM generate_series(0, :t - 1) AS tn""",
    """INSERT INTO derived_broker
        SELECT :c, b, 'rack-' || (b % 3), true, false, :n / :b, CAST(:n AS double precision) / :b, 1.0, 0,
               3 * :n / :b, 1000000000000, 400000000000, 0.6, :at
        FROM generate_series(1, :b) AS b""",
    f"""INSERT INTO derived_partition
        SELECT :c, {_TOPIC}, pn, 1000, 100000 + pn + 10 * :e, 1.0, 100.0, 100000 * (1 + tn % 11), NULL,
               604800000, NULL, 259200.0, 0.0, 1 + (tn * :p + pn) % :b, 3,
               CASE WHEN (tn + pn) % 97 = 0 THEN 2 ELSE 3 END, 2,
               CASE WHEN (tn + pn) % 97 = 0 THEN 1 ELSE 0 END,
               (tn + pn) % 97 = 0, false, false, false, 0, :at
        FROM generate_series(0, :t - 1) AS tn, generate_series(0, :p - 1) AS pn""",
    f"""INSERT INTO derived_group_partition
        SELECT :c, {_GROUP}, {_TOPIC}, pn,
               100000 + pn + 10 * :e - CASE WHEN lagging THEN 5000 + 100 * :e ELSE 0 END,
               100000 + pn + 10 * :e, CASE WHEN lagging THEN 5000 + 100 * :e ELSE 0 END,
               CASE WHEN lagging THEN 600.0 + 60 * :e ELSE 0.0 END, NULL, NULL, 20.0, 1.0, 1.0,
               CASE WHEN lagging THEN 5000.0 ELSE 0.0 END,
               CASE WHEN lagging AND severe THEN 1800.0 END, false, 'exact', NULL,
               CASE WHEN lagging AND severe THEN 'time' END,
               CASE WHEN lagging AND severe THEN 'ERR' WHEN lagging THEN 'WARN' ELSE 'OK' END,
               'Stable', 3, :at
        {_GP_ROWS}""",
    f"""INSERT INTO derived_group_topic
        SELECT :c, {_GROUP}, {_TOPIC}, :p, sum(CASE WHEN lagging THEN 5000 + 100 * :e ELSE 0 END),
               max(CASE WHEN lagging THEN 600.0 + 60 * :e ELSE 0.0 END), NULL, NULL, 20.0, 1.0, 1.0, NULL,
               min(CASE WHEN lagging AND severe THEN 1800.0 END), false,
               max(CASE WHEN lagging THEN 5000 + 100 * :e ELSE 0 END),
               max(CASE WHEN lagging THEN 600.0 + 60 * :e ELSE 0.0 END),
               CASE WHEN bool_or(lagging AND severe) THEN 'ERR' WHEN bool_or(lagging) THEN 'WARN'
                    ELSE 'OK' END,
               'Stable', 3, :at
        {_GP_ROWS}
        GROUP BY gn, tn""",
    f"""INSERT INTO derived_group
        SELECT :c, {_GROUP}, count(DISTINCT tn), count(*),
               sum(CASE WHEN lagging THEN 5000 + 100 * :e ELSE 0 END),
               max(CASE WHEN lagging THEN 600.0 + 60 * :e ELSE 0.0 END), NULL, NULL, 20.0, 10.0, 10.0, NULL,
               min(CASE WHEN lagging AND severe THEN 1800.0 END), false,
               max(CASE WHEN lagging THEN 5000 + 100 * :e ELSE 0 END),
               max(CASE WHEN lagging THEN 600.0 + 60 * :e ELSE 0.0 END),
               CASE WHEN bool_or(lagging AND severe) THEN 'ERR' WHEN bool_or(lagging) THEN 'WARN'
                    ELSE 'OK' END,
               'Stable', 3, bool_or(lagging), :at
        {_GP_ROWS}
        GROUP BY gn""",
    """INSERT INTO collection_runs (cluster, job, instance, started_at, finished_at, duration_ms, status,
                                   counts, error)
       SELECT :c, job, 'bench', :at - interval '2 seconds', :at - interval '1 second', 1000, 'ok',
              '{}'::jsonb, NULL
       FROM unnest(ARRAY['metadata', 'offsets', 'configs', 'log_dirs']) AS job""",
]

_FINDINGS = [
    f"""INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,
                             description, annotations, for_seconds, state, first_seen, last_seen,
                             evaluated_at)
        SELECT CASE WHEN severe THEN 'TimeUntilDataLoss' ELSE 'ConsumerLagHigh' END, 'group_partition',
               :c || '/' || {_GROUP} || '/' || {_TOPIC} || '/' || pn, :c,
               jsonb_build_object('cluster', :c, 'group_id', {_GROUP}, 'topic', {_TOPIC},
                                  'partition', pn::text),
               CASE WHEN severe THEN 'critical' ELSE 'warning' END, 600.0,
               {_GROUP} || ' lags on ' || {_TOPIC} || '[' || pn || ']', '', '{{}}'::jsonb, 0, 'firing', :seen,
               :at, :at
        {_GP_ROWS} AND lagging""",
    f"""INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,
                             description, annotations, for_seconds, state, first_seen, last_seen,
                             evaluated_at)
        SELECT 'PartitionReplicaLost', 'partition', :c || '/' || {_TOPIC} || '/' || pn, :c,
               jsonb_build_object('cluster', :c, 'topic', {_TOPIC}, 'partition', pn::text), 'warning', 1.0,
               {_TOPIC} || '[' || pn || '] lost a replica', '', '{{}}'::jsonb, 0, 'firing', :seen, :at, :at
        FROM generate_series(0, :t - 1) AS tn, generate_series(0, :p - 1) AS pn
        WHERE (tn + pn) % 97 = 0""",
]


def _params(shape: Shape, now: datetime) -> dict[str, Any]:
    # psycopg sends a small int as smallint: products of parameters would overflow, so :n is given.
    return {"c": CLUSTER, "t": shape.topics, "p": PARTITIONS_PER_TOPIC, "n": shape.partitions,
            "g": shape.groups, "k": TOPICS_PER_GROUP, "b": shape.brokers, "now": now,
            "seen": now - timedelta(days=3)}  # fmt: skip


def fill(engine: Engine, shape: Shape, evaluations: int, now: datetime) -> dict[str, int]:
    """Write the read model of one cluster of `shape` with `evaluations` evaluations ending at
    `now`, then one alert cycle; return the row count of each table written."""
    params = _params(shape, now)
    with engine.begin() as conn:
        ensure_partitions(conn, now, ahead_days=1)
        for statement in _STATIC:
            conn.execute(text(statement), params)
        for e in range(evaluations):
            write_evaluation(
                conn, shape, now, e, now - timedelta(seconds=EVALUATION_SECONDS * (evaluations - 1 - e))
            )
        for statement in _FINDINGS:
            conn.execute(text(statement), {**params, "at": now})
    with engine.begin() as conn:
        run_cycle(conn, load_routing(*default_routing_paths()), now, "http://kafka-health.bench")
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
        return _counts(conn)


def write_evaluation(conn: Connection, shape: Shape, now: datetime, index: int, at: datetime) -> None:
    """The derived rows of evaluation number `index` (0 the oldest; a lagging partition's lag grows
    by 100 per evaluation) at `at`, of the cluster `fill` writes with `now`."""
    params = _params(shape, now)
    for statement in _EVALUATION:
        conn.execute(text(statement), {**params, "at": at, "e": index})


def _counts(conn: Connection) -> dict[str, int]:
    tables = ["topics", "partitions", "group_members", "derived_partition", "derived_group_partition",
              "derived_group", "findings", "alerts", "alert_groups"]  # fmt: skip
    return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in tables}


def endpoints(topic: str, group: str) -> list[tuple[str, str]]:
    """(kind, path) of every endpoint measured, on cluster `bench`."""
    c = CLUSTER
    return [
        ("page", "/"),
        ("page", f"/clusters/{c}"),
        ("page", f"/clusters/{c}/topics"),
        ("page", f"/clusters/{c}/groups"),
        ("page", f"/clusters/{c}/topics/{topic}"),
        ("page", f"/clusters/{c}/groups/{group}"),
        ("page", "/alerts"),
        ("api", "/api/v1/clusters"),
        ("api", f"/api/v1/clusters/{c}/topics"),
        ("api", f"/api/v1/clusters/{c}/topics/{topic}"),
        ("api", f"/api/v1/clusters/{c}/groups"),
        ("api", f"/api/v1/clusters/{c}/groups/{group}"),
        ("api", f"/api/v1/clusters/{c}/groups/{group}/lag"),
        ("api", f"/api/v1/clusters/{c}/groups/{group}/history"),
        ("api", "/api/v1/findings"),
        ("api", "/api/v1/alerts"),
        ("burrow", "/v3/kafka"),
        ("burrow", f"/v3/kafka/{c}/topic"),
        ("burrow", f"/v3/kafka/{c}/consumer"),
        ("burrow", f"/v3/kafka/{c}/consumer/{group}/lag"),
        ("metrics", "/metrics"),
    ]


# -- the server and the load --------------------------------------------------------------------


def serve(url: str, port: int) -> None:
    """The web application as the daemon builds it, served by uvicorn in this process."""
    import uvicorn

    from monitor.expose.web.app import create_app

    app = create_app(make_engine(url), stale_after=timedelta(minutes=10))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    for port in WEB_PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {WEB_PORTS.start}-{WEB_PORTS.stop - 1}")


class ServerProcess:
    """The application under uvicorn in a child process, on `port` (None: the first free one of
    WEB_PORTS)."""

    def __init__(self, url: str, port: int | None = None) -> None:
        self.port = _free_port() if port is None else port
        self.base = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--serve",
            url,
            "--web-port",
            str(self.port),
        ]
        self._process = subprocess.Popen(command)
        deadline = time.monotonic() + 60
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"the web server exited with status {self._process.returncode}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the web server did not answer on {self.base} within 60 s")
            time.sleep(0.2)

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


async def _load(base: str, path: str, concurrency: int, requests: int, max_seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    sizes: list[int] = []
    remaining = requests
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, limits=limits, timeout=max(120.0, max_seconds + 30)
    ) as client:
        sent = time.perf_counter()
        try:
            await client.get(path)  # warm-up, not counted
        except httpx.HTTPError as exc:
            errors.append(f"warm-up {type(exc).__name__}")
        warmup = time.perf_counter() - sent

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                sent = time.perf_counter()
                try:
                    response = await client.get(path)
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                    continue
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - sent)
                    sizes.append(len(response.content))
                else:
                    errors.append(str(response.status_code))

        started = time.perf_counter()
        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        # A hard limit: requests still in flight at the deadline are abandoned, not counted.
        _, pending = await asyncio.wait(workers, timeout=max_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        seconds = time.perf_counter() - started
    result: dict[str, Any] = dict(summarize(latencies, len(errors), seconds))
    result["concurrency"] = concurrency
    result["warmup_ms"] = 1000 * warmup
    result["bytes"] = round(sum(sizes) / len(sizes)) if sizes else 0
    result["error_kinds"] = sorted(set(errors))
    result["cut_short"] = bool(pending)
    return result


def drive(
    base: str, kind: str, path: str, concurrency: int, requests: int, max_seconds: float
) -> dict[str, Any]:
    result = asyncio.run(_load(base, path, concurrency, requests, max_seconds))
    return {"kind": kind, "path": path, **result}


# -- the report ---------------------------------------------------------------------------------


def machine(pg_version: str) -> dict[str, Any]:
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    import fastapi
    import uvicorn

    return {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory": memory,
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "postgresql": pg_version,
        "fastapi": fastapi.__version__,
        "uvicorn": uvicorn.__version__,
        "httpx": httpx.__version__,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": os.getloadavg()[0],
    }


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


WHERE_THE_TIME_GOES = Path(__file__).resolve().parent / "web-time.md"
"""The report's last section: where a request's time went at 10,000 topics before the read model
cache, and what is left (measured apart from the load above; kept in every published report)."""


def report(info: dict[str, Any], sizes: list[dict[str, Any]], args: argparse.Namespace) -> str:
    m = info
    lines = [
        "## Web pages, JSON API, Burrow endpoints and /metrics under load",
        "",
        f"Machine: {m['cpus']} CPU (nproc), {m['memory']} RAM, {m['system']}; PostgreSQL {m['postgresql']}; "
        f"Python {m['python']}, FastAPI {m['fastapi']}, uvicorn {m['uvicorn']} (one process), "
        f"httpx {m['httpx']}; {m['date']}; load average (1 min) at start {m['loadavg_start']:.2f}.",
        "",
        f"Per endpoint and concurrency: up to {args.requests} requests (at most {args.max_seconds:g} s), "
        "clients and server on the same machine. Latency in ms of the answers with status 200.",
    ]
    for size in sizes:
        lines += [
            "",
            f"### {size['topics']:,} topics: {size['partitions']:,} partitions, {size['groups']:,} groups, "
            f"{size['group_partitions']:,} group-partitions, {size['brokers']} brokers",
            "",
            f"Filled in {size['fill_s']:.1f} s: {size['evaluations']} evaluations, "
            f"{size['table_rows']['findings']:,} findings, {size['table_rows']['alerts']:,} alerts. "
            f"Measured {size['measured_at']}, load average {size['loadavg_before']:.1f} -> "
            f"{size['loadavg_after']:.1f}.",
            "",
            "| kind | endpoint | clients | requests | errors | req/s | p50 ms | p95 ms | p99 ms | max ms "
            "| KB | warm-up ms |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in size["results"]:
            short = " (cut short)" if r["cut_short"] else ""
            lines.append(
                f"| {r['kind']} | `{r['path']}` | {r['concurrency']} | {r['requests']}{short} "
                f"| {r['errors']} "
                f"| {r['rps']:,.1f} | {_ms(r['p50_ms'])} | {_ms(r['p95_ms'])} | {_ms(r['p99_ms'])} "
                f"| {_ms(r['max_ms'])} | {r['bytes'] / 1024:,.1f} | {_ms(r['warmup_ms'])} |"
            )
    return "\n".join([*lines, "", WHERE_THE_TIME_GOES.read_text().rstrip("\n")])


def save(info: dict[str, Any], sizes: list[dict[str, Any]], args: argparse.Namespace) -> str:
    text_ = report(info, sizes, args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.output}.md").write_text(text_ + "\n")
    document = {"machine": info, "requests": args.requests, "max_seconds": args.max_seconds, "sizes": sizes}
    (RESULTS / f"{args.output}.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    return text_


# -- main ---------------------------------------------------------------------------------------


@contextmanager
def local_postgres(port: int) -> Iterator[str]:
    """The admin URL of the project-local PostgreSQL of the web benchmarks (`var/bench/postgres-web`
    on `port`), started for the block unless it was running already."""
    server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-web", port, log=_log)
    was_running = server.status()
    server.up()
    try:
        yield server.url("postgres")
    finally:
        if not was_running:
            server.down()


@contextmanager
def migrated_database(admin_url: str, prefix: str) -> Iterator[str]:
    """The URL of a new database on the server of `admin_url`, migrated to the head; dropped
    afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    postgres.create_database(admin_url, name)
    try:
        url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        yield url
    finally:
        postgres.drop_database(admin_url, name)


def run_size(admin_url: str, topics: int, args: argparse.Namespace) -> dict[str, Any]:
    shape = Shape(topics)
    with migrated_database(admin_url, "kh_bench_web") as url:
        engine = make_engine(url)
        try:
            _log(f"{topics:,} topics: filling")
            started = time.perf_counter()
            counts = fill(engine, shape, args.evaluations, datetime.now(UTC))
            fill_s = time.perf_counter() - started
        finally:
            engine.dispose()
        size: dict[str, Any] = {
            "topics": topics, "partitions": shape.partitions, "groups": shape.groups,
            "group_partitions": shape.group_partitions, "brokers": shape.brokers,
            "evaluations": args.evaluations, "table_rows": counts, "fill_s": fill_s,
            "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg_before": os.getloadavg()[0], "results": [],
        }  # fmt: skip
        server = ServerProcess(url)
        try:
            for kind, path in endpoints("topic-00000", "group-0000"):
                if (args.only and kind not in args.only) or (args.paths and path not in args.paths):
                    continue
                for concurrency in args.concurrency:
                    result = drive(server.base, kind, path, concurrency, args.requests, args.max_seconds)
                    _log(f"  {path} x{concurrency}: {result['rps']:.1f} req/s, "
                         f"p95 {result['p95_ms']:.1f} ms, {result['errors']} errors")  # fmt: skip
                    size["results"].append(result)
                    if result["cut_short"]:  # the abandoned requests would load the next measurement
                        server.stop()
                        server = ServerProcess(url)
        finally:
            server.stop()
        size["loadavg_after"] = os.getloadavg()[0]
        return size


def _ints(value: str) -> list[int]:
    try:
        numbers = [int(v) for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from exc
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {value!r}")
    return numbers


KINDS = ("page", "api", "burrow", "metrics")


def _kinds(value: str) -> list[str]:
    kinds = [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if not kinds or unknown:
        raise argparse.ArgumentTypeError(f"expected some of {', '.join(KINDS)}, got {value!r}")
    return kinds


def bench(admin_url: str, args: argparse.Namespace) -> int:
    with make_engine(admin_url).connect() as conn:
        version = str(conn.execute(text("SHOW server_version")).scalar_one())
    info = machine(version)
    kept: list[dict[str, Any]] = []
    if args.merge and (RESULTS / f"{args.output}.json").exists():
        previous = json.loads((RESULTS / f"{args.output}.json").read_text())["sizes"]
        kept = [s for s in previous if s["topics"] not in args.sizes]
    measured: list[dict[str, Any]] = []
    for topics in args.sizes:
        measured.append(run_size(admin_url, topics, args))
        sizes = sorted([*kept, *measured], key=lambda s: int(s["topics"]))
        save(info, sizes, args)
    print(save(info, sizes, args))
    _log(f"wrote {RESULTS / args.output}.md and .json")
    return 0


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C: the web server and PostgreSQL are stopped."""
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="an existing server (its admin database); default: a local one")
    parser.add_argument(
        "--port", type=int, default=BENCH_PORT, help=f"the local PostgreSQL's port ({BENCH_PORT})"
    )
    parser.add_argument("--sizes", type=_ints, default=[100, 1_000, 10_000],
                        help="topics per size, comma-separated (default 100,1000,10000)")  # fmt: skip
    parser.add_argument("--concurrency", type=_ints, default=[4, 16], help="clients at once (default 4,16)")
    parser.add_argument("--requests", type=int, default=200, help="requests per endpoint and level (200)")
    parser.add_argument("--max-seconds", type=float, default=20.0,
                        help="time limit per endpoint and level (default 20)")  # fmt: skip
    parser.add_argument("--evaluations", type=int, default=6, help="evaluations a minute apart (default 6)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other sizes of the last web.json (each with its date)")  # fmt: skip
    parser.add_argument(
        "--only",
        type=_kinds,
        default=[],
        help=f"endpoint kinds measured, comma-separated ({', '.join(KINDS)}; default all)",
    )
    parser.add_argument(
        "--paths",
        type=lambda value: [p.strip() for p in value.split(",") if p.strip()],
        default=[],
        metavar="PATH,...",
        help="only these endpoints, comma-separated, as the report writes them (default all)",
    )
    parser.add_argument(
        "--output",
        default="web",
        metavar="NAME",
        help="results file name in bench/results/ (default web: NAME.md and NAME.json)",
    )
    parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--web-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.web_port)
        return 0
    if args.requests < 1 or args.evaluations < 1 or args.max_seconds <= 0:
        parser.error("--requests, --evaluations and --max-seconds must be positive")
    known = [path for _, path in endpoints("topic-00000", "group-0000")]
    unknown = [path for path in args.paths if path not in known]
    if unknown:
        parser.error(f"--paths: no endpoint {', '.join(unknown)}; the endpoints are {', '.join(known)}")
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    if args.url:
        return bench(normalize_url(args.url), args)
    with local_postgres(args.port) as admin_url:
        return bench(admin_url, args)


if __name__ == "__main__":
    sys.exit(main())
