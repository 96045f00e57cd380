"""The evaluation job's speed: compute (with its JDBC reads) and write of one evaluation, by size.

    .venv/bin/python bench/evaluate.py                       # 100k, 1M and 3M group-partitions
    .venv/bin/python bench/evaluate.py --sizes 1000000 --runs 3
    .venv/bin/python bench/evaluate.py --url postgresql+psycopg://user@host/postgres --sizes 100000

Target (issue 16): on a 2-core machine, `local[2]` with a warm session, one evaluation of
1,000,000 group-partitions and 100,000 partitions with the full default rule pack
(alert_rules/*.yaml), from PostgreSQL and back, in at most 30 s (the earlier target was 60 s).

For each size (a number of group-partitions, a multiple of 2,000):

1. A fresh database kh_bench_evaluate_<size>, migrated to head, on a private PostgreSQL under
   var/bench/postgres-evaluate (or $KAFKA_HEALTH_VAR/bench/...) on 127.0.0.1:55483, unless --url.
2. One cluster with size / 10 partitions (topics of 100 partitions; 3 replicas on enough brokers
   for about 4,000 replicas each, in 3 racks) and 10 consumer groups on every topic (each group
   reads 2 topics), filled by INSERT ... SELECT in the server (the fastest way in: no row crosses
   a connection) with everything `monitor/evaluate/extract.py` reads for the sample window:
   latest and history of partition and group offsets, commit observations, group states,
   partition metadata, brokers, open topic configs, log dir sizes of every replica, broker disks
   and collection runs. `--samples` offsets cycles (default 5) every `--interval` seconds (default
   180) lie in the 15-minute window: at 100k partitions one collector cycle takes minutes (see
   bench/collector.py), so a cycle every 3 minutes is what such a cluster gets. Each group
   behaves alike on all partitions of a topic, as consumers do: of the group-topics, 90% keep up
   (half their partitions caught up at any sample), 5% are behind at the producers' pace, 2.5%
   fall behind, 1.5% stopped 40 minutes ago, 0.8% are idle and caught up and 0.2% fell off the
   log. 2% of the topics keep 8 hours, 10% are capped by retention.bytes, the others keep 3
   days; a few partitions are under-replicated, under min ISR or offline.
3. The evaluation the daemon runs (`monitor.evaluate.job.run_evaluation`, default rule pack,
   default window), on one warm SparkSession (master local[2] unless --master, the daemon's
   other defaults unless --driver-memory or --conf): once to warm up, then --runs timed runs,
   each 30 s later than the one before (new derived rows, findings updated), as the daemon's
   cycles are. The warm-up builds the evaluation plan and the timed runs reuse it, as the
   daemon's evaluate stage keeps its plans (monitor.evaluate.plan; spark-submit builds one per
   run, a few seconds more).

Per timed run it reports the job's own phase durations (compute, the lazy JDBC reads of the
inputs included, and write of the derived tables and findings), the derived rows and findings
written, the peak resident memory of the driver (this Python process) plus Spark's JVM and, on a
standalone cluster, the executors' JVMs (reset before each run through /proc/<pid>/clear_refs),
and the load average. Prints Markdown on stdout (progress on stderr) and writes
bench/results/evaluate.md and evaluate.json after each size."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import signal
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.detect import spark_jvm_pid
from monitor.core.settings import SparkConfig
from monitor.devtools import postgres
from monitor.devtools.jdbc import ensure_jdbc_driver
from monitor.devtools.paths import var_dir
from monitor.devtools.spark_cluster import DRIVER_CONF
from monitor.evaluate.extract import SLOW_WINDOW, WINDOWED
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import default_rule_paths, load_rules
from monitor.evaluate.spark import build_session, jdbc_target
from monitor.store import migrate, models  # noqa: F401 (the tables' columns, for move_groups)
from monitor.store.base import Base
from monitor.store.engine import make_engine, normalize_url
from monitor.store.partitions import PARTITIONED_TABLES, create_day_partitions, day_of

BENCH_PG_PORT = 55483
RESULTS = Path(__file__).resolve().parent / "results"
CLUSTER = "bench"
T0 = datetime(2031, 3, 1, 12, 0, tzinfo=UTC)
"""When the warm-up evaluation runs; the newest samples are taken at this time."""
RUN_SPACING = timedelta(seconds=30)
GP_PER_PARTITION = 10
PARTITIONS_PER_TOPIC = 100
REPLICAS_PER_BROKER = 4_000
SIZE_STEP = GP_PER_PARTITION * PARTITIONS_PER_TOPIC * 2
TARGET_SIZE, TARGET_SECONDS = 1_000_000, 30.0


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The synthetic cluster, generated inside PostgreSQL


def _functions(interval: int) -> list[str]:
    """Deterministic pseudo-random numbers and the offsets of a consumer of each kind at sample j
    (j = 0 is the newest; sample j is taken `j * interval` seconds before it)."""
    return [
        """CREATE FUNCTION bench_hash(x bigint, salt int) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE
           AS $$ SELECT (hashint8(x * 1000003 + salt) & 2147483647) % 1000 $$""",
        f"""CREATE FUNCTION bench_committed(kind int, jitter int, e0 bigint, s0 bigint, rate bigint, j int)
           RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT greatest(0, CASE
             WHEN kind < 900 THEN e0 - rate * j * {interval} - rate * (jitter % 2) * (jitter % 10)
             WHEN kind < 950 THEN e0 - rate * j * {interval} - rate * 600 - 1000
             WHEN kind < 975 THEN e0 - rate * 1200 - 500 - (rate / 2) * j * {interval}
             WHEN kind < 990 THEN e0 - rate * 2400 - 100
             WHEN kind < 998 THEN e0 - rate * j * {interval}
             ELSE s0 - 5000 END) $$""",
        """CREATE FUNCTION bench_append(o bigint, e0 bigint, rate bigint, t0 timestamptz)
           RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT CASE
             WHEN rate > 0 THEN t0 - make_interval(secs => (e0 - o)::float8 / rate)
             ELSE t0 - interval '6 hours' - make_interval(secs => (e0 - o) / 1000.0) END $$""",
    ]


_PARTITIONS = """
CREATE UNLOGGED TABLE bench_p AS
SELECT pi, topic, partition, ph, rate, e0, retention_ms, retention_bytes,
       greatest(e0 - least(rate * coverage_s,
                           coalesce(retention_bytes * 97 / 100 / 200, rate * coverage_s)), 0) AS s0
FROM (SELECT pi, 'topic-' || lpad((pi / 100)::text, 5, '0') AS topic, (pi % 100)::int AS partition,
             bench_hash(pi, 1) AS ph, bench_hash(pi / 100, 2) AS th,
             50000000 + bench_hash(pi, 3)::bigint * 1000 AS e0
      FROM generate_series(0, :partitions - 1) AS pi) AS x,
LATERAL (SELECT CASE WHEN :still OR ph < 50 THEN 0 WHEN ph < 150 THEN 2000 WHEN ph < 500 THEN 100
                     ELSE 5 END::bigint AS rate,
                CASE WHEN th < 20 THEN 28800000 ELSE 259200000 END::bigint AS retention_ms,
                CASE WHEN th BETWEEN 100 AND 199 THEN 1073741824 END::bigint AS retention_bytes,
                CASE WHEN th < 20 THEN 28000 ELSE 172800 END AS coverage_s) AS r
"""

_GROUP_PARTITIONS = """
CREATE UNLOGGED TABLE bench_gp AS
SELECT n, p.topic, p.partition, p.rate, p.e0, p.s0,
       'group-' || (n / :partitions) || '-' || lpad((p.pi / 200)::text, 4, '0') AS group_id,
       CASE WHEN :still THEN 995 ELSE bench_hash((n / :partitions) * 100000 + p.pi / 100, 4) END AS kind,
       bench_hash(n, 5) AS gh
FROM generate_series(0, :rows - 1) AS n JOIN bench_p AS p ON p.pi = n % :partitions
"""

_AT = "(CAST(:t0 AS timestamptz) - make_interval(secs => j * :interval))"
_LOG_AT = "(CAST(:t0 AS timestamptz) - make_interval(secs => m * :log_interval))"
_REPLICAS = "ARRAY[pi % :brokers, (pi + 1) % :brokers, (pi + 2) % :brokers]::int[]"

_GROUP_OFFSETS = f"""
INSERT INTO {{table}} (cluster, group_id, topic, partition, sampled_at, committed_offset, leader_epoch,
    end_offset, start_offset, lag, lag_clamped, committed_timestamp, consumed_timestamp,
    timestamp_method, timestamp_error_ms{{last}})
SELECT :cluster, group_id, topic, partition, {_AT}, c, 7, e, s0, greatest(e - c, 0), false,
       CASE WHEN c < e AND c >= s0 THEN bench_append(c, e0, rate, :t0) END,
       CASE WHEN c > s0 THEN bench_append(c - 1, e0, rate, :t0) END,
       CASE WHEN c < s0 THEN 'none' WHEN gh < 50 AND c < e THEN 'interpolated' ELSE 'exact' END,
       CASE WHEN gh < 50 AND c < e AND c >= s0 THEN 1500 END{{last_value}}
FROM bench_gp, {{samples}},
LATERAL (SELECT bench_committed(kind, gh, e0, s0, rate, j) AS c, e0 - rate * j * :interval AS e) AS v
"""
_LAST_COMMIT = """CASE WHEN c <> bench_committed(kind, gh, e0, s0, rate, 1) THEN CAST(:t0 AS timestamptz)
       ELSE CAST(:t0 AS timestamptz) - interval '1 hour' - make_interval(mins => gh % 100) END"""

_LATEST_COMMITS = f"""
INSERT INTO latest_commits (cluster, group_id, topic, partition, committed_offset, observed_at)
SELECT :cluster, group_id, topic, partition, c, {_LAST_COMMIT}
FROM bench_gp, LATERAL (SELECT bench_committed(kind, gh, e0, s0, rate, 0) AS c) AS v
"""

_COMMITS = f"""
INSERT INTO commit_observations (cluster, group_id, topic, partition, observed_at, committed_offset,
    previous_offset)
SELECT :cluster, group_id, topic, partition, {_AT}, c, cp
FROM bench_gp, generate_series(0, :samples - 2) AS j,
LATERAL (SELECT bench_committed(kind, gh, e0, s0, rate, j) AS c,
                bench_committed(kind, gh, e0, s0, rate, j + 1) AS cp) AS v
WHERE c <> cp
"""

_PARTITION_OFFSETS = f"""
INSERT INTO {{table}} (cluster, topic, partition, sampled_at, start_offset, end_offset,
    max_timestamp_offset, max_timestamp, start_timestamp, latest_timestamp, timestamp_type{{run}})
SELECT :cluster, topic, partition, {_AT}, s0, e, e - 1, bench_append(e - 1, e0, rate, :t0),
       CASE WHEN s0 < e THEN bench_append(s0, e0, rate, :t0) END, bench_append(e - 1, e0, rate, :t0),
       'CreateTime'{{run_value}}
FROM bench_p, {{samples}}, LATERAL (SELECT e0 - rate * j * :interval AS e) AS v
"""

_GROUP_STATES = f"""
INSERT INTO group_states (cluster, group_id, sampled_at, state, protocol_type, protocol, members,
    coordinator, is_simple, run_id)
SELECT :cluster, 'group-' || k || '-' || lpad(tp::text, 4, '0'), {_AT},
       CASE WHEN :still THEN 'Stable' WHEN gh < 30 THEN 'Empty' WHEN gh < 40 THEN 'PreparingRebalance'
            ELSE 'Stable' END,
       'consumer', 'range', CASE WHEN gh < 30 AND NOT :still THEN 0 ELSE 1 + gh % 12 END, gh % :brokers,
       false, j + 1
FROM generate_series(0, 9) AS k, generate_series(0, :partitions / 200 - 1) AS tp,
     generate_series(0, :samples - 1) AS j, LATERAL (SELECT bench_hash(k * 100000 + tp, 7) AS gh) AS h
"""

_PARTITION_METADATA = f"""
INSERT INTO partitions (cluster, topic, partition, leader, replicas, isr, updated_at)
SELECT :cluster, topic, partition, CASE WHEN q < 1 THEN -1 WHEN q < 20 THEN r[3] ELSE r[1] END, r,
       CASE WHEN q < 1 THEN ARRAY[]::int[] WHEN q < 4 THEN r[1:1] WHEN q < 30 THEN r[1:2] ELSE r END, :t0
FROM bench_p, LATERAL (SELECT {_REPLICAS} AS r, bench_hash(pi, 6) AS q) AS x
"""

_BROKERS = """
INSERT INTO brokers (cluster, broker_id, host, port, rack, first_seen, last_seen, up)
SELECT :cluster, b, 'broker-' || b || '.bench.internal', 9092, 'rack-' || b % 3,
       CAST(:t0 AS timestamptz) - interval '30 days', :t0, true
FROM generate_series(0, :brokers - 1) AS b
"""

_TOPIC_CONFIGS = """
INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive, valid_from)
SELECT :cluster, topic, c.name, c.value, 'DYNAMIC_TOPIC_CONFIG', false,
       CAST(:t0 AS timestamptz) - interval '30 days'
FROM (SELECT DISTINCT ON (topic) topic, retention_ms, retention_bytes FROM bench_p ORDER BY topic) AS t,
LATERAL (VALUES ('retention.ms', retention_ms::text),
                ('retention.bytes', coalesce(retention_bytes, -1)::text), ('cleanup.policy', 'delete'),
                ('min.insync.replicas', '2'), ('segment.bytes', '1073741824')) AS c(name, value)
"""

_LOG_DIR_SIZES = f"""
INSERT INTO log_dir_sizes (cluster, broker_id, log_dir, topic, partition, sampled_at, size_bytes,
    offset_lag, is_future, run_id)
SELECT :cluster, b, '/var/lib/kafka/data', topic, partition, {_LOG_AT},
       least((e0 - rate * m * :log_interval - s0) * 200,
             coalesce(retention_bytes * 97 / 100, 9e18::bigint)), 0, false, m + 1
FROM bench_p, unnest({_REPLICAS}) AS b, generate_series(0, :log_samples - 1) AS m
"""

_BROKER_DISKS = f"""
INSERT INTO broker_disks (cluster, broker_id, log_dir, sampled_at, total_bytes, usable_bytes, run_id)
SELECT :cluster, b, '/var/lib/kafka/data', {_LOG_AT}, 4000000000000,
       4000000000000 * (20 + bench_hash(b, 8) % 70) / 100, m + 1
FROM generate_series(0, :brokers - 1) AS b, generate_series(0, :log_samples - 1) AS m
"""

_RUNS = f"""
INSERT INTO collection_runs (cluster, job, instance, started_at, finished_at, duration_ms, status)
SELECT :cluster, job, 'bench', {_AT} - interval '40 seconds', {_AT} - interval '1 second', 39000, 'ok'
FROM generate_series(0, :samples - 1) AS j, unnest(ARRAY['offsets', 'metadata', 'log_dirs']) AS job
"""

_HISTORY, _LATEST = "generate_series(0, :samples - 1) AS j", "(VALUES (0)) AS s(j)"
FILL: list[tuple[str, str]] = [
    ("group_offsets", _GROUP_OFFSETS.format(table="group_offsets", last=", run_id", last_value=", j + 1",
                                            samples=_HISTORY)),
    ("latest_group_offsets", _GROUP_OFFSETS.format(table="latest_group_offsets", last="", last_value="",
                                                   samples=_LATEST)),
    ("commit_observations", _COMMITS),
    ("latest_commits", _LATEST_COMMITS),
    ("partition_offsets", _PARTITION_OFFSETS.format(table="partition_offsets", run=", run_id",
                                                    run_value=", j + 1", samples=_HISTORY)),
    ("latest_partition_offsets", _PARTITION_OFFSETS.format(table="latest_partition_offsets", run="",
                                                           run_value="", samples=_LATEST)),
    ("group_states", _GROUP_STATES),
    ("partitions", _PARTITION_METADATA),
    ("brokers", _BROKERS),
    ("topic_configs", _TOPIC_CONFIGS),
    ("log_dir_sizes", _LOG_DIR_SIZES),
    ("broker_disks", _BROKER_DISKS),
    ("collection_runs", _RUNS),
]  # fmt: skip
"""(table, statement) in fill order; the statements read bench_p and bench_gp."""


def fill(engine: Engine, rows: int, samples: int, interval: int, still: bool = False) -> dict[str, Any]:
    """Generate one cluster of `rows` group-partitions (`still`: no partition written to, every
    group caught up and stable); return its shape and the fill time."""
    partitions = rows // GP_PER_PARTITION
    brokers = max(3, -(-partitions * 3 // REPLICAS_PER_BROKER))
    log_interval = max(120, interval)
    log_samples = max(1, int(max(timedelta(minutes=15), SLOW_WINDOW).total_seconds()) // log_interval)
    params = {
        "cluster": CLUSTER, "t0": T0, "rows": rows, "partitions": partitions, "brokers": brokers,
        "samples": samples, "interval": interval, "log_interval": log_interval, "log_samples": log_samples,
        "still": still,
    }  # fmt: skip
    started = time.perf_counter()
    with engine.begin() as conn:
        days = {day_of(T0 - timedelta(days=1)), day_of(T0)}
        for table in PARTITIONED_TABLES:
            create_day_partitions(conn, table, days)
        for statement in _functions(interval):
            conn.execute(text(statement))
        conn.execute(text(_PARTITIONS), params)
        conn.execute(text(_GROUP_PARTITIONS), params)
    counts: dict[str, int] = {}
    for table, statement in FILL:
        step = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL synchronous_commit = off"))
            counts[table] = conn.execute(text(statement), params).rowcount
        _log(f"  {table}: {counts[table]:,} rows in {time.perf_counter() - step:.1f} s")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("DROP TABLE bench_gp, bench_p"))
        conn.execute(text("VACUUM (ANALYZE)"))
    return {"partitions": partitions, "brokers": brokers, "topics": partitions // PARTITIONS_PER_TOPIC,
            "groups": rows // (GP_PER_PARTITION * PARTITIONS_PER_TOPIC * 2) * GP_PER_PARTITION,
            "table_rows": counts, "fill_s": time.perf_counter() - started}  # fmt: skip


MOVED_RECORDS = 100
"""Records each partition of a moved group's topics gets, and the group consumes, before a run."""

_PAIR = "substring({topic} FROM 7)::int / 2"
"""A topic's pair: each group reads the two topics of a pair (bench_gp), so moving whole pairs
moves their ten groups and no other."""


def _copied(table: str, source: str, values: dict[str, str]) -> str:
    """INSERT INTO `table` SELECT each of its columns from `source` (aliased s), but `values`."""
    columns = [column.name for column in Base.metadata.tables[table].columns]
    chosen = ", ".join(values.get(c, f's."{c}"') for c in columns)
    named = ", ".join(f'"{c}"' for c in columns)
    return f"INSERT INTO {table} ({named}) SELECT {chosen} FROM {source}"


def move_groups(engine: Engine, run: int, at: datetime, percent: float) -> int:
    """Before timed run `run` (at `at`) on a still fleet: the groups of `percent` % of the topic
    pairs (at least one pair), picked anew for each run, consume the MOVED_RECORDS records just
    written to each of their partitions. As the collectors would store it 5 s before the run: the
    partitions' new end offsets, the groups' samples and their commits (observed, and in the
    latest rows). Returns the groups moved."""
    params = {
        "cluster": CLUSTER, "at": at - timedelta(seconds=5), "salt": 100 + run, "step": MOVED_RECORDS,
        "run_id": 1000 + run,
    }  # fmt: skip
    with engine.connect() as conn:
        pairs = [
            row[0]
            for row in conn.execute(
                text(f"SELECT DISTINCT {_PAIR.format(topic='topic')} FROM latest_partition_offsets "
                     "WHERE cluster = :cluster"), params,
            )
        ]  # fmt: skip
    params["pairs"] = random.Random(run).sample(sorted(pairs), max(1, round(len(pairs) * percent / 100)))
    moved_ends = f"s.cluster = :cluster AND {_PAIR.format(topic='s.topic')} = ANY(:pairs)"
    ends = {
        "sampled_at": ":at", "end_offset": "s.end_offset + :step",
        "max_timestamp_offset": "s.end_offset + :step - 1", "max_timestamp": ":at", "latest_timestamp": ":at",
        "run_id": ":run_id",
        "end_offset_listed_at": "CASE WHEN s.end_offset_listed_at IS NOT NULL THEN CAST(:at AS timestamptz)"
                                " END",
    }  # fmt: skip
    joined = (
        "latest_group_offsets s JOIN latest_partition_offsets p USING (cluster, topic, partition) "
        f"WHERE {moved_ends}"
    )
    consumed = {
        "sampled_at": ":at", "committed_offset": "p.end_offset", "end_offset": "p.end_offset", "lag": "0",
        "committed_timestamp": "NULL", "consumed_timestamp": "CAST(:at AS timestamptz) - interval '1 second'",
        "run_id": ":run_id",
    }  # fmt: skip
    statements = [
        _copied("partition_offsets", f"latest_partition_offsets s WHERE {moved_ends}", ends),
        f"UPDATE latest_partition_offsets AS s SET end_offset = s.end_offset + :step, "
        f"max_timestamp_offset = s.end_offset + :step - 1, max_timestamp = :at, latest_timestamp = :at, "
        f"sampled_at = :at WHERE {moved_ends}",
        "INSERT INTO commit_observations (cluster, group_id, topic, partition, observed_at, "
        "committed_offset, previous_offset) "
        f"SELECT s.cluster, s.group_id, s.topic, s.partition, :at, p.end_offset, s.committed_offset "
        f"FROM {joined}",
        "INSERT INTO latest_commits (cluster, group_id, topic, partition, committed_offset, observed_at) "
        f"SELECT s.cluster, s.group_id, s.topic, s.partition, p.end_offset, :at FROM {joined} "
        "ON CONFLICT (cluster, group_id, topic, partition) DO UPDATE SET "
        "committed_offset = excluded.committed_offset, observed_at = excluded.observed_at",
        _copied("group_offsets", joined, consumed),
        "UPDATE latest_group_offsets AS s SET committed_offset = p.end_offset, end_offset = p.end_offset, "
        "lag = 0, committed_timestamp = NULL, "
        "consumed_timestamp = CAST(:at AS timestamptz) - interval '1 second', "
        f"sampled_at = :at FROM latest_partition_offsets p "
        f"WHERE p.cluster = s.cluster AND p.topic = s.topic AND p.partition = s.partition AND {moved_ends}",
    ]
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement), params)
        return int(conn.execute(
            text("SELECT count(DISTINCT s.group_id) FROM latest_group_offsets s JOIN latest_commits c "
                 f"USING (cluster, group_id, topic, partition) WHERE {moved_ends} AND c.observed_at = :at"),
            params,
        ).scalar_one())  # fmt: skip


def sample_cycle(engine: Engine, run: int, at: datetime) -> None:
    """Before timed run `run` (at `at`) on a still fleet: an offsets cycle 10 s before it that finds
    every group and partition as they were, as the collectors sample whether anything moved or
    not (every 15 s by default): a sample of each beside its latest row, the groups' states, and
    the run."""
    params = {"cluster": CLUSTER, "at": at - timedelta(seconds=10), "run_id": 2000 + run}
    again = {"sampled_at": ":at", "run_id": ":run_id"}
    statements = [
        _copied("partition_offsets", "latest_partition_offsets s WHERE s.cluster = :cluster", again),
        "UPDATE latest_partition_offsets SET sampled_at = :at WHERE cluster = :cluster",
        _copied("group_offsets", "latest_group_offsets s WHERE s.cluster = :cluster", again),
        "UPDATE latest_group_offsets SET sampled_at = :at WHERE cluster = :cluster",
        _copied(
            "group_states",
            "(SELECT DISTINCT ON (group_id) * FROM group_states WHERE cluster = :cluster "
            "ORDER BY group_id, sampled_at DESC) s",
            again,
        ),
        "INSERT INTO collection_runs (cluster, job, instance, started_at, finished_at, duration_ms, status) "
        "VALUES (:cluster, 'offsets', 'bench', CAST(:at AS timestamptz) - interval '1 second', :at, 1000,"
        " 'ok')",
    ]
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement), params)


def input_rows(engine: Engine, evaluated_at: datetime, window: timedelta) -> int:
    """Rows of the evaluation's inputs (the extract's windows) at `evaluated_at`."""
    total = 0
    with engine.connect() as conn:
        for table, column in WINDOWED.items():
            where = "valid_to IS NULL" if table == "topic_configs" else "true"
            params: dict[str, Any] = {}
            if column is not None:
                span = max(window, SLOW_WINDOW) if table in ("log_dir_sizes", "broker_disks") else window
                where = f"{column} > :start AND {column} <= :end"
                params = {"start": evaluated_at - span, "end": evaluated_at}
            total += int(
                conn.execute(text(f"SELECT count(*) FROM {table} WHERE {where}"), params).scalar_one()
            )
    return total


# ---------------------------------------------------------------------------------------------
# Measuring


def _status_kb(pid: int | str) -> dict[str, int]:
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    except OSError:
        pass
    return values


def executor_pids(app_id: str) -> list[int]:
    """The executor JVMs a standalone cluster's workers started for the application `app_id`
    (none in local mode, where the driver's JVM runs the tasks). They start when the application
    registers, so they are looked for again until one shows, for at most a minute."""
    if not app_id.startswith("app-"):
        return []
    deadline = time.monotonic() + 60
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in command
                and app_id.encode() in command
            ):
                found.append(int(entry.name))
        if found or time.monotonic() > deadline:
            return sorted(found)
        time.sleep(0.5)


def executor_tasks(spark: Any) -> list[dict[str, Any]] | None:
    """Each executor's tasks and task time so far, from the driver's REST API (the "driver" entry
    is the local mode's one executor); None without the API."""
    import httpx

    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    try:
        answer = httpx.get(
            f"{url}/api/v1/applications/{spark.sparkContext.applicationId}/executors", timeout=10
        )
        answer.raise_for_status()
        return [
            {"id": e["id"], "host": e["hostPort"], "cores": e["totalCores"], "tasks": e["totalTasks"],
             "task_s": round(e["totalDuration"] / 1000, 1), "gc_s": round(e["totalGCTime"] / 1000, 1)}
            for e in answer.json()
        ]  # fmt: skip
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        _log(f"executors' tasks not read: {exc}")
        return None


def reset_peaks(pids: list[int | str]) -> None:
    """Reset the peak RSS (VmHWM) of each process (Linux 4.0+; ignored where refused)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_mb(pids: list[int | str]) -> float | None:
    peaks = [_status_kb(pid).get("VmHWM") for pid in pids]
    return None if any(p is None for p in peaks) else sum(p or 0 for p in peaks) / 1024


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str, reaped: bool = False) -> float | None:
    """The CPU time (user + system) of a process, with its reaped children's when `reaped` (a
    PostgreSQL postmaster reaps each backend whose connection closed); None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / CLOCK_TICKS


def postgres_cpu_seconds(postmaster: int | None) -> float | None:
    """The CPU time of a local PostgreSQL server: the postmaster with every backend it reaped, plus
    the backends alive now."""
    if postmaster is None:
        return None
    total = cpu_seconds(postmaster, reaped=True)
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children")
    for child in children.read_text().split() if children.exists() else []:
        total = (total or 0.0) + (cpu_seconds(child) or 0.0)
    return total


def _cpu(pids: list[int | str], postmaster: int | None) -> dict[str, float | None]:
    """The CPU seconds so far of Spark's JVM (pids[1]) and the bench's PostgreSQL server."""
    return {"jvm": cpu_seconds(pids[1]), "postgresql": postgres_cpu_seconds(postmaster)}


def _used(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float | None]:
    """The CPU seconds spent between two `_cpu` readings (None where either is unknown)."""
    used: dict[str, float | None] = {}
    for key, start in before.items():
        end = after[key]
        used[key] = None if start is None or end is None else end - start
    return used


def measure(
    spark: Any,
    engine: Engine,
    url: str,
    evaluated_at: datetime,
    pids: list[int | str],
    plans: Plans,
    full: bool = False,
    postmaster: int | None = None,
) -> dict[str, Any]:
    """One evaluation at `evaluated_at`: its phases, rows, findings, peak memory, load and the CPU
    seconds of Spark's JVM and of the local PostgreSQL server (`postmaster`; None: not measured)."""
    ruleset = load_rules(default_rule_paths())
    for problem in ruleset.problems:  # as the daemon does: report a bad file, run the other rules
        _log(f"rule problem: {problem}")
    reset_peaks(pids)
    load_before = os.getloadavg()[0]
    cpu_before = _cpu(pids, postmaster)
    started = time.perf_counter()
    result = run_evaluation(
        spark, jdbc_target(url), engine, ruleset.rules, [CLUSTER], evaluated_at, JobSettings(), plans,
        full=full,
    )  # fmt: skip
    wall = time.perf_counter() - started
    cpu = _used(cpu_before, _cpu(pids, postmaster))
    findings = result.findings
    return {
        "evaluated_at": evaluated_at.isoformat(), "wall_s": wall, "seconds": dict(result.seconds),
        "rows": dict(result.rows), "findings": dict(findings),
        "findings_written": findings.get("new", 0) + findings.get("updated", 0), "rules": len(ruleset.rules),
        "peak_mb": peak_mb(pids), "loadavg_before": load_before, "loadavg_after": os.getloadavg()[0],
        "kind": result.kind, "carried_groups": result.carried_groups,
        "carried_rows": sum(result.carried_rows.values()), "cpu_s": cpu,
    }  # fmt: skip


def run_size(
    spark: Any, admin_url: str, rows: int, args: argparse.Namespace, pids: list[int | str]
) -> dict[str, Any]:
    name = f"kh_bench_evaluate_{rows}"
    postgres.drop_database(admin_url, name)
    postgres.create_database(admin_url, name)
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    result: dict[str, Any] = {"rows": rows, "still": args.still}
    plans = Plans()  # as the daemon's evaluate stage keeps them: the warm-up builds, the runs reuse
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        try:
            _log(f"[{rows:,} group-partitions] filling")
            result.update(fill(engine, rows, args.samples, args.interval, still=args.still is not None))
            result["input_rows"] = input_rows(engine, T0 + RUN_SPACING, JobSettings().window)
            _log(f"[{rows:,}] {result['partitions']:,} partitions, {result['input_rows']:,} input rows, "
                 f"filled in {result['fill_s']:.0f} s; warm-up evaluation")  # fmt: skip
            result["warmup"] = measure(spark, engine, url, T0, pids, plans, postmaster=args.postmaster)
            _log(f"[{rows:,}] warm-up {result['warmup']['wall_s']:.1f} s {_split(result['warmup'])}")
            # Every executor has registered by now: count each one's memory in the runs' peak.
            pids[2:] = executor_pids(spark.sparkContext.applicationId)
            result["runs"] = []
            for n in range(1, args.runs + 1):
                at = T0 + n * RUN_SPACING
                moved = None
                if args.still is not None:
                    sample_cycle(engine, n, at)
                    moved = move_groups(engine, n, at, args.still)
                run = measure(spark, engine, url, at, pids, plans, full=args.full, postmaster=args.postmaster)
                run["moved_groups"] = moved
                result["runs"].append(run)
                _log(f"[{rows:,}] run {n}: {run['wall_s']:.1f} s {_split(run)}, "
                     f"peak {run['peak_mb'] or 0:.0f} MB, load {run['loadavg_after']:.1f}")  # fmt: skip
            result["executors"] = executor_tasks(spark)
        finally:
            engine.dispose()
    finally:
        plans.clear()
        if not args.keep:
            postgres.drop_database(admin_url, name)
    return result


def _kind(run: dict[str, Any]) -> str:
    """A run's kind and the groups it carried (a run recorded before the kinds existed was full)."""
    if run.get("kind", "full") == "full":
        return "full"
    moved = "" if run.get("moved_groups") is None else f", {run['moved_groups']:,} moved before it"
    return f"incremental, {run.get('carried_groups') or 0:,} ({run.get('carried_rows', 0):,} rows){moved}"


def _split(run: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k} {v:.1f} s" for k, v in run["seconds"].items()) + ")"


# ---------------------------------------------------------------------------------------------
# Report


def machine(pg_version: str, spark_conf: dict[str, str]) -> dict[str, Any]:
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    import pyspark

    return {"cpus": cpus, "memory": memory, "system": f"{platform.system()} {platform.machine()}",
            "python": platform.python_version(), "pyspark": pyspark.__version__, "postgresql": pg_version,
            "spark_conf": spark_conf, "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg_start": os.getloadavg()[0]}  # fmt: skip


def _rows_read(run: dict[str, Any]) -> str:
    """The JDBC rows read, measured by releases that read them from Spark's plans (n/a since)."""
    rows = run.get("rows_read")
    return "n/a" if rows is None else f"{rows:,}"


def _read_seconds(run: dict[str, Any]) -> str:
    """The JDBC read time split out of compute by those releases (since, part of compute)."""
    read = run["seconds"].get("read")
    return "n/a" if read is None else f"{read:.1f}"


def _cpu_text(run: dict[str, Any]) -> str:
    """A run's CPU seconds of Spark's JVM and of PostgreSQL (n/a: not measured)."""
    cpu = run.get("cpu_s") or {}
    return ", ".join("n/a" if cpu.get(k) is None else f"{cpu[k]:.1f}" for k in ("jvm", "postgresql"))


def _size_label(size: dict[str, Any], args: argparse.Namespace) -> str:
    """A report's first column: the group-partitions, and a still fleet's percentage moved."""
    still = size.get("still", args.still)
    return f"{size['rows']:,}" + ("" if still is None else f", {still:g} % moved")


def _median_run(size: dict[str, Any]) -> dict[str, Any]:
    runs = sorted(size["runs"], key=lambda r: r["wall_s"])
    return runs[len(runs) // 2]


def report(info: dict[str, Any], args: argparse.Namespace, sizes: list[dict[str, Any]]) -> str:
    conf = ", ".join(f"{k}={v}" for k, v in sorted(info["spark_conf"].items()))
    lines = [
        "## Evaluation job",
        "",
        f"Machine: {info['cpus']} CPU, {info['memory']} RAM, {info['system']}, Python {info['python']}, "
        f"PySpark {info['pyspark']}, PostgreSQL {info['postgresql']}; {info['date']}. Spark: {conf}.",
        f"Samples: {args.samples} offsets cycles {args.interval} s apart in the 15-minute window. "
        f"Median of {args.runs} timed run(s) after a warm-up run, "
        + ("full." if args.full else "as the daemon runs them (incremental: still groups carried).")
        + (
            ""
            if args.still is None
            else f" A still fleet: no partition written to, every group caught up and stable, but "
            f"the ten groups of each of a percentage of the topic pairs (at least one pair; 'moved') that "
            f"consume {MOVED_RECORDS} new records per partition before each timed run, after an offsets "
            f"cycle that samples every group and partition again (sample_cycle; rows measured before "
            f"2026-12-01 20:30 UTC had no such cycle)."
        ),
        "",
        "| group-partitions | partitions | rows read | JDBC read s | compute s | write s | total s "
        "| CPU s: Spark JVM, PostgreSQL | derived rows written | findings written "
        "| peak RSS MB (driver + JVMs) | load avg | kind, groups carried | measured, driver memory |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for size in sizes:
        measured = size.get("measured", {})
        when = f"{measured.get('date', '?')}, {measured.get('driver_memory', '?')}"
        if "error" in size:
            lines.append(f"| {size['rows']:,} | | | | | | failed: {size['error']} | | | | | | | {when} |")
            continue
        run = _median_run(size)
        s = run["seconds"]
        peak = f"{run['peak_mb']:,.0f}" if run["peak_mb"] else "n/a"
        lines.append(
            f"| {_size_label(size, args)} | {size['partitions']:,} | {_rows_read(run)} "
            f"| {_read_seconds(run)} | {s.get('compute', 0):.1f} | {s.get('write', 0):.1f} "
            f"| {run['wall_s']:.1f} | {_cpu_text(run)} "
            f"| {sum(run['rows'].values()):,} | {run['findings_written']:,} | {peak} "
            f"| {run['loadavg_before']:.1f} -> {run['loadavg_after']:.1f} | {_kind(run)} | {when} |"
        )
    target = [s for s in sizes if s["rows"] == TARGET_SIZE and s.get("runs")]
    if target and args.still is None:  # a full evaluation's target (a still fleet's are in summary.py)
        total = statistics.median(r["wall_s"] for r in target[0]["runs"])
        verdict = "met" if total <= TARGET_SECONDS else "NOT met"
        lines += ["", f"Target (1M group-partitions, 100k partitions, <= {TARGET_SECONDS:g} s): {verdict}, "
                  f"{total:.1f} s."]  # fmt: skip
    lines += ["", "Fill (not timed above): " + "; ".join(
        f"{s['rows']:,}: {s['fill_s']:.0f} s, {s.get('brokers', 0)} brokers, {s.get('groups', 0):,} groups"
        for s in sizes if "fill_s" in s)]  # fmt: skip
    return "\n".join(lines) + "\n"


def save(info: dict[str, Any], args: argparse.Namespace, sizes: list[dict[str, Any]]) -> str:
    markdown = report(info, args, sizes)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{_stem(args)}.md").write_text(markdown)
    document = {
        "machine": info, "samples": args.samples, "interval": args.interval, "still": args.still,
        "sizes": sizes,
    }  # fmt: skip
    (RESULTS / f"{_stem(args)}.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    return markdown


def _stem(args: argparse.Namespace) -> str:
    """The results' file name: a still fleet's (--still) are kept apart from the default fleet's."""
    return "evaluate" if args.still is None else "evaluate-still"


def earlier_sizes(measuring: list[int], stem: str, still: float | None = None) -> list[dict[str, Any]]:
    """The sizes of the last report that this run does not measure again (--merge), each with
    when and with how much driver memory it was measured. A still fleet's size is measured again
    only at the same percentage moved (each size keeps its own, `still`)."""
    path = RESULTS / f"{stem}.json"
    if not path.exists():
        return []
    document = json.loads(path.read_text())
    machine_info = document.get("machine", {})
    default = {
        "date": machine_info.get("date", "?"),
        "driver_memory": machine_info.get("spark_conf", {}).get("spark.driver.memory", "?"),
    }
    return [
        {"measured": default, **size}
        for size in document.get("sizes", [])
        if size["rows"] not in measuring or size.get("still", document.get("still")) != still
    ]


def _order(size: dict[str, Any]) -> tuple[int, float]:
    """A report's rows: by size, then by the percentage moved of a still fleet."""
    return int(size["rows"]), float(size.get("still") or 0)


def _sizes(value: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes takes comma-separated integers, got {value!r}") from exc
    if not sizes or any(s < SIZE_STEP or s % SIZE_STEP for s in sizes):
        raise argparse.ArgumentTypeError(f"every size must be a positive multiple of {SIZE_STEP:,}")
    return sizes


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C: the server is stopped on the way out."""
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[100_000, 1_000_000, 3_000_000],
        help="group-partition counts, comma-separated (default 100000,1000000,3000000)",
    )
    parser.add_argument("--url", help="an existing server (its admin database); default: a local one")
    parser.add_argument("--samples", type=int, default=5, help="offsets cycles in the window (default 5)")
    parser.add_argument("--interval", type=int, default=180, help="seconds between cycles (default 180)")
    parser.add_argument(
        "--runs", type=int, default=1, help="timed runs per size after the warm-up (default 1)"
    )
    parser.add_argument(
        "--driver-memory", help="spark.driver.memory (default: auto, sized to the largest size)"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting, as spark.conf in monitor.yaml (repeatable)",
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="spark.master (default local[2]); a standalone master on 127.0.0.1 (kafka-health dev-spark "
        "up --workers 2) gets the driver settings it needs, and its executors' memory counts in the peak",
    )
    parser.add_argument("--keep", action="store_true", help="keep the databases (and the server) afterwards")
    parser.add_argument(
        "--full", action="store_true", help="timed runs are full evaluations (default: as the daemon's)"
    )
    parser.add_argument(
        "--still",
        type=float,
        metavar="PERCENT",
        help="a still fleet (no partition written to, every group caught up and stable) of which PERCENT "
        "%% of the groups consume new records before each timed run; reports to evaluate-still.md/json",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the sizes of the last report (bench/results/evaluate.json) that this run does not measure",
    )
    args = parser.parse_args()  # fmt: skip
    if args.samples < 2 or args.runs < 1 or args.interval < 1:
        parser.error("--samples must be at least 2, --runs and --interval at least 1")
    if (args.samples - 1) * args.interval + RUN_SPACING.total_seconds() * args.runs >= 900:
        parser.error(
            "the samples must lie in the 15-minute window of every run: lower --samples or --interval"
        )
    extra = dict(item.split("=", 1) for item in args.conf)
    memory = {"driver_memory": args.driver_memory} if args.driver_memory else {}
    if args.master.startswith("spark://127.0.0.1:"):
        extra = {**DRIVER_CONF, **extra}
    spark_config = SparkConfig(master=args.master, conf=extra, **memory)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    server, started = None, False
    args.postmaster = None
    if args.url:
        admin_url = normalize_url(args.url)
    else:
        server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-evaluate", BENCH_PG_PORT, log=_log)
        started = not server.status()
        server.up()
        admin_url = server.url("postgres")
        args.postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    sizes: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    try:
        engine = make_engine(admin_url)
        try:
            with engine.connect() as conn:
                pg_version = str(conn.execute(text("SHOW server_version")).scalar_one())
        finally:
            engine.dispose()
        _log(f"starting Spark ({args.master})")
        spark = build_session(spark_config, ensure_jdbc_driver(), max(args.sizes))
        pids: list[int | str] = ["self", spark_jvm_pid(), *executor_pids(spark.sparkContext.applicationId)]
        shown = {
            "spark.master", "spark.driver.memory", "spark.executor.memory", "spark.sql.shuffle.partitions",
            *(k for k in extra if k not in DRIVER_CONF),
        }  # fmt: skip
        info = machine(pg_version, {k: v for k, v in spark.sparkContext.getConf().getAll() if k in shown})
        try:
            kept = earlier_sizes(args.sizes, _stem(args), args.still) if args.merge else []
            measured = {
                "date": info["date"],
                "driver_memory": info["spark_conf"].get("spark.driver.memory", "?"),
            }
            for rows in args.sizes:
                try:
                    size = run_size(spark, admin_url, rows, args, pids)
                except Exception as exc:
                    _log(f"[{rows:,}] failed: {type(exc).__name__}: {exc}")
                    size = {"rows": rows, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                sizes.append({**size, "measured": measured})
                save(info, args, sorted([*kept, *sizes], key=_order))
        finally:
            spark.stop()
    finally:
        if server is not None and started and not args.keep:
            server.down()
    print(save(info, args, sorted([*kept, *sizes], key=_order)))
    _log(f"wrote {RESULTS / _stem(args)}.md and .json")
    return 0 if all("runs" in s for s in sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
