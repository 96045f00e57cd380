"""The offsets collector against its targets: cycle time, exact timestamps and memory, by size.

    .venv/bin/python bench/collector.py                       # 1k, 10k and 30k partitions
    .venv/bin/python bench/collector.py --sizes 1000,10000 --groups 500 --keep
    .venv/bin/python bench/collector.py --sizes 1000,10000 --groups 50,500 --partitions-per-group 200
                                     # issue 19's cases: 10k and 100k group-partitions

For each size (a number of partitions, a multiple of 100):

1. A private Kafka cluster under var/bench/kafka-<size> (or $KAFKA_HEALTH_VAR/bench/...): three
   nodes with a 768 MB heap each up to 10k partitions, one node with a 2 GB heap above that.
   Broker ports 59092 + 10 * i (i = the size's position in --sizes), controllers 100 higher.
   It is purged before the size starts and stopped and purged after it, unless --keep.
2. A fresh database kh_bench_collector_<size>, migrated to head, on a private PostgreSQL under
   var/bench/postgres-collector on 127.0.0.1:55473 (its own home: bench/ingest.py runs another
   server, on another port, under var/bench/postgres).
3. Topics of 100 partitions with replication factor 1 (the collector's work does not depend on
   it; RF 3 would only triple the brokers' disk and CPU on a 2-core machine); 5-20 records per
   partition from one producer, record i of every partition stamped base + i seconds (base = one
   hour ago), so every timestamp the collector reads can be checked.
4. --groups simple consumer groups (no subscription, offsets committed with Consumer.commit;
   one number for every size or one per size), each committing a random 20-200 partitions (or
   --partitions-per-group): half of them at the end (caught up), half at a random offset in
   [start, end) (lagging).

The collector then runs in a separate Python process that does nothing else, as the daemon would
(so its RSS is the collector's alone, not the setup's producer and 500 consumers): the commits
job (the commit stream's thread, unless --no-commit-stream), one `ClusterCollector.run("metadata")`,
then `ClusterCollector.run("offsets")` --cycles times. Cycle 1 is cold (empty timestamp cache in
memory and in PostgreSQL): it answers the lag first and asks for the next cycle at once, as it
does in the daemon; such cycles run straight after it, without churn, and are marked "asked".
Before each other cycle a handful of groups commit new offsets and a few partitions get new
records, as in steady state. The time from the process's start to the first complete answer (a
lag in the store for every committed group-partition) and to the append times filled (`filling`
0) is reported. Then --steady-seconds of steady state: the jobs at the daemon's offsets interval
while this process commits one offset a second and times how long each takes to show in the
store (commit observations), and the measuring process's CPU seconds per minute. Each cycle reports
its wall time, the counts of its `collection_runs` row and where its time went (the collector's
calls into Kafka and PostgreSQL, timed by wrapping them in the measuring process); --profile also
writes a cProfile of the metadata job and of every cycle to bench/results/. Every exact timestamp
written for a lagging group is checked against the known record times.

Prints Markdown tables on stdout (progress on stderr) and writes bench/results/collector.json
and collector.md. Kafka and PostgreSQL run in their own processes and are not in the RSS.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import logging
import os
import platform
import pstats
import random
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from statistics import median
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from monitor.collect import lag
from monitor.collect import recall as recall_module
from monitor.collect.clients import READER
from monitor.collect.jobs import offsets as offsets_module
from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.errors import DevEnvironmentError
from monitor.core.settings import ClusterConfig, CollectConfig, DevKafkaConfig, Intervals
from monitor.devtools import postgres
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.paths import cache_dir, var_dir
from monitor.store import migrate
from monitor.store.buffer import BufferedWriter
from monitor.store.engine import make_engine
from monitor.store.runs import RunRecorder
from monitor.store.samples import offsets as samples_offsets
from monitor.store.samples import staging as samples_staging

BENCH_KAFKA_PORT = int(os.environ.get("KAFKA_HEALTH_BENCH_KAFKA_PORT", "59092"))
"""First broker port (controllers 100 higher; sizes take slots of ten up to 199 above it)."""
BENCH_PG_PORT = int(os.environ.get("KAFKA_HEALTH_BENCH_PG_PORT", "55473"))
PARTITIONS_PER_TOPIC = 100
SMALL_CLUSTER_MAX_PARTITIONS = 10_000
RECORDS_PER_PARTITION = (5, 20)
PARTITIONS_PER_GROUP = (20, 200)
CHURN_GROUPS = 10
CHURN_PARTITIONS_PER_GROUP = 20
CHURN_PRODUCE_PARTITIONS = 50
CHURN_RECORDS = 3
TARGET_CYCLE_SECONDS = 10.0
TARGET_EXACT = 0.95
TARGET_RSS_MB = 500.0
TARGET_SIZE = 10_000
RESULTS = Path(__file__).resolve().parent / "results"
VALUE = b"v" * 100

TP = tuple[str, int]
T = TypeVar("T")

_TRANSIENT = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._WAIT_COORD,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)

_UNKNOWN_YET = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._MSG_TIMED_OUT,
    }
)

# Where a cycle's time goes: (key, label). Keys marked nested are inside another step, or run
# beside other steps, and are not added to the total.
STEPS: list[tuple[str, str]] = [
    ("list_group_ids", "1. list groups (ListGroups, every broker)"),
    ("describe_groups", "1. describe groups (DescribeGroups, beside steps 2 and 3)"),
    ("committed_offsets", "2. committed offsets (one OffsetFetch per group)"),
    ("list_offsets", "3. list offsets (earliest/latest/max-timestamp)"),
    ("targets", "4. timestamp targets (lag.*_targets)"),
    ("cache_memory", "4. timestamp cache in memory"),
    ("cache_db", "4. timestamp cache in PostgreSQL (cached_timestamps)"),
    ("reader", "4. timestamp reader (Kafka consumer, within the budget)"),
    ("history", "5. end-offset history (end_offset_brackets)"),
    ("samples", "6. lag samples and commit observations (lag.*)"),
    ("previous", "6. previous commits (latest_committed)"),
    ("db_batch", "6. write the batch (submit: transaction + commit)"),
    ("db_batch_sql", "   of which write_offsets_batch"),
    ("db_run", "run row (start insert, finish update)"),
    ("db_history", "cold cycle's history rows (own thread, after its run, beside the next cycle)"),
]
NESTED = {"db_batch_sql", "describe_groups", "db_history"}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---------------------------------------------------------------------------------------------
# The workload


@dataclass
class Workload:
    """What the setup wrote, so the results can be checked: record counts and committed offsets."""

    size: int
    topics: list[str]
    base_ms: int
    records: dict[TP, int] = field(default_factory=dict)
    commits: dict[str, dict[TP, int]] = field(default_factory=dict)

    @property
    def partitions(self) -> list[TP]:
        return list(self.records)


def plan_workload(size: int, groups: int, rng: random.Random, per_group: int | None = None) -> Workload:
    """`groups` groups, each committing on `per_group` partitions (None: a random 20-200)."""
    topics = [f"bench-{n:03d}" for n in range(size // PARTITIONS_PER_TOPIC)]
    base_ms = (int(time.time()) - 3600) * 1000
    workload = Workload(size, topics, base_ms)
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            workload.records[(topic, partition)] = rng.randint(*RECORDS_PER_PARTITION)
    partitions = workload.partitions
    high = min(PARTITIONS_PER_GROUP[1], len(partitions))
    low = min(PARTITIONS_PER_GROUP[0], high)
    for g in range(groups):
        count = min(per_group, len(partitions)) if per_group is not None else rng.randint(low, high)
        chosen = rng.sample(partitions, count)
        offsets = {}
        for tp in chosen:
            end = workload.records[tp]
            offsets[tp] = end if rng.random() < 0.5 else rng.randrange(0, end)
        workload.commits[f"bench-group-{g:04d}"] = offsets
    return workload


def create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for n, chunk in enumerate(_chunks(topics, 20)):
        new = [NewTopic(t, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1) for t in chunk]
        futures = admin.create_topics(new, operation_timeout=120, request_timeout=180)
        for future in futures.values():
            future.result(timeout=240)
        _log(f"  topics {min((n + 1) * 20, len(topics))}/{len(topics)}")
    # Every broker's metadata cache, not just one: they apply the controller's log each at its own
    # pace, and a client asking a broker that lags is told the topic does not exist.
    deadline = time.monotonic() + 300
    for server in bootstrap.split(","):
        while True:
            missing = _partitions_without_leader(server, topics)
            if not missing:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{missing} partitions still have no leader on {server} after 300 s")
            _log(f"  waiting for leaders: {missing} partitions without one on {server}")
            time.sleep(2)
    # A leader in the metadata may not have created the partition's log yet (a broker creates
    # thousands one by one): ListOffsets answers only once it has.
    while True:
        unready = _partitions_not_ready(bootstrap, topics)
        if not unready:
            return
        if time.monotonic() > deadline + 300:
            raise RuntimeError(f"{unready} partitions still not ready after 600 s")
        _log(f"  waiting for the brokers to create the logs: {unready} partitions not ready yet")
        time.sleep(3)


def _partitions_not_ready(bootstrap: str, topics: list[str]) -> int:
    """Partitions whose latest offset cannot be listed yet. A new client each time: one that was
    told a topic is unknown keeps failing its partitions for a while after it exists."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(PARTITIONS_PER_TOPIC)}
    futures = admin.list_offsets(wanted, request_timeout=60)
    unready = 0
    for future in futures.values():
        try:
            if future.result(timeout=90).offset < 0:
                unready += 1
        except Exception:
            unready += 1
    return unready


def _partitions_without_leader(server: str, topics: list[str]) -> int:
    """Partitions of `topics` without a leader in the metadata of the broker at `server` (a new
    client bootstrapped from it alone sends its first request there)."""
    metadata = AdminClient({"bootstrap.servers": server}).list_topics(timeout=30)
    missing = 0
    for topic in topics:
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or len(found.partitions) != PARTITIONS_PER_TOPIC:
            missing += PARTITIONS_PER_TOPIC
        else:
            missing += sum(1 for p in found.partitions.values() if p.leader < 0)
    return missing


def produce(bootstrap: str, workload: Workload, plan: Iterable[tuple[TP, int, int]]) -> int:
    """Produce, for each (partition, first index, count), records first..first+count-1 stamped
    base + index seconds, in order; returns how many were produced.

    A partition whose records all failed because the producer did not know it yet (a broker's
    metadata lagging behind the controller's right after the topics were made) is produced again;
    a partition with some records written and some failed would break the offset -> timestamp
    mapping the check relies on, and stops the benchmark.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            # Without idempotence, a retried batch whose first attempt was written after all
            # (a timeout on a loaded broker) is written twice, or after a later batch: the
            # records' offsets then no longer give their timestamps, and the check fails on rows
            # the collector got right.
            "enable.idempotence": True,
            "linger.ms": 50,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 3,  # not a warning per partition missing from the metadata cache
        }
    )
    pending = list(plan)
    sent = 0
    ok: dict[TP, int] = defaultdict(int)
    failed: dict[TP, KafkaError] = {}

    def delivered(error: KafkaError | None, message: Any) -> None:
        key = (str(message.topic()), int(message.partition()))
        if error is None:
            ok[key] += 1
        else:
            failed[key] = error

    for attempt in range(6):
        ok.clear()
        failed.clear()
        for (topic, partition), first, count in pending:
            for index in range(first, first + count):
                try:
                    _produce_one(producer, workload, topic, partition, index, delivered)
                except KafkaException as exc:
                    failed[(topic, partition)] = exc.args[0]  # a topic the producer thinks missing
                    break
                sent += 1
                if sent % 20_000 == 0:
                    producer.poll(0)
                    _log(f"  produced {sent:,} records")
        left = producer.flush(300)
        if left:
            raise RuntimeError(f"producing failed: {left} records undelivered after 300 s")
        if not failed:
            return sent
        broken = {tp: e for tp, e in failed.items() if ok[tp] or e.code() not in _UNKNOWN_YET}
        if broken:
            raise RuntimeError(f"producing failed on {len(broken)} partitions: {list(broken.items())[:3]}")
        pending = [item for item in pending if item[0] in failed]
        sent -= sum(ok[tp] for tp, _, _ in pending)  # none: a partition with any is `broken`
        _log(f"  {len(pending)} partitions were not known to the producer yet; producing them again")
        time.sleep(2 * (attempt + 1))
    raise RuntimeError(f"{len(pending)} partitions stayed unknown to the producer")


def _produce_one(
    producer: Producer,
    workload: Workload,
    topic: str,
    partition: int,
    index: int,
    delivered: Callable[[KafkaError | None, Any], None],
) -> None:
    while True:
        try:
            producer.produce(
                topic,
                value=VALUE,
                key=f"key-{topic}-{partition}-{index}".encode(),
                partition=partition,
                timestamp=workload.base_ms + index * 1000,
                on_delivery=delivered,
            )
            return
        except BufferError:
            producer.poll(0.1)


def _commit(bootstrap: str, group: str, offsets: dict[TP, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        deadline = time.monotonic() + 120
        while True:
            error: KafkaError | None
            try:
                answer = consumer.commit(offsets=wanted, asynchronous=False) or []
                failed = [tp.error for tp in answer if tp.error is not None]
                if not failed:
                    return
                error = failed[0]
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is None:
                    raise
            if not (error.code() in _TRANSIENT or error.retriable()) or time.monotonic() > deadline:
                raise RuntimeError(f"commit of group {group} failed: {error}")
            time.sleep(0.2)
    finally:
        consumer.close()


def commit_groups(bootstrap: str, commits: dict[str, dict[TP, int]], threads: int) -> None:
    """Commit every group's offsets, one consumer per group, `threads` groups at a time."""
    done = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(_commit, bootstrap, group, offsets) for group, offsets in commits.items()]
        for future in as_completed(futures):
            future.result()
            done += 1
            if done % 50 == 0 or done == len(futures):
                _log(f"  committed {done}/{len(futures)} groups")


def churn(bootstrap: str, workload: Workload, rng: random.Random, threads: int) -> dict[str, int]:
    """New records on a few partitions, then a handful of groups committing further on."""
    chosen = rng.sample(workload.partitions, min(CHURN_PRODUCE_PARTITIONS, len(workload.records)))
    plan = [(tp, workload.records[tp], CHURN_RECORDS) for tp in chosen]
    produced = produce(bootstrap, workload, plan)
    for tp in chosen:
        workload.records[tp] += CHURN_RECORDS
    moved: dict[str, dict[TP, int]] = {}
    for group in rng.sample(sorted(workload.commits), min(CHURN_GROUPS, len(workload.commits))):
        current = workload.commits[group]
        keys = rng.sample(sorted(current), min(CHURN_PARTITIONS_PER_GROUP, len(current)))
        moved[group] = {tp: rng.randint(current[tp], workload.records[tp]) for tp in keys}
        current.update(moved[group])
    commit_groups(bootstrap, moved, threads)
    return {"records": produced, "groups": len(moved), "group_partitions": sum(map(len, moved.values()))}


# ---------------------------------------------------------------------------------------------
# The measuring process: the collector and nothing else


class StepTimer:
    """Seconds and calls per step, from wrappers around the collector's calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, key: str, function: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> T:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - started
                self.calls[key] += 1

        return timed

    def take(self) -> dict[str, dict[str, float]]:
        taken = {k: {"seconds": v, "calls": self.calls[k]} for k, v in self.seconds.items()}
        self.seconds.clear()
        self.calls.clear()
        return taken


def instrument(collector: ClusterCollector, recorder: RunRecorder, writer: BufferedWriter) -> StepTimer:
    """Wrap the calls an offsets cycle makes, on the instances and modules of this process only."""
    timer = StepTimer()
    admin = collector.context.admin
    for name in ("list_group_ids", "describe_groups", "committed_offsets", "list_offsets"):
        setattr(admin, name, timer.wrap(name, getattr(admin, name)))
    reader = collector.context.client(READER)
    reader.read = timer.wrap("reader", reader.read)  # type: ignore[method-assign]
    offsets_job = collector.runners["offsets"]
    assert isinstance(offsets_job, offsets_module.OffsetsCollector)
    cache = offsets_job.cache
    cache.get_many = timer.wrap("cache_memory", cache.get_many)  # type: ignore[method-assign]
    cache.put_many = timer.wrap("cache_memory", cache.put_many)  # type: ignore[method-assign]
    recall_module.cached_timestamps = timer.wrap("cache_db", recall_module.cached_timestamps)
    recall_module.end_offset_brackets = timer.wrap("history", recall_module.end_offset_brackets)
    recall_module.latest_committed = timer.wrap("previous", recall_module.latest_committed)
    offsets_module.write_offsets_batch = timer.wrap("db_batch_sql", offsets_module.write_offsets_batch)
    for name in ("partition_targets", "group_targets"):
        setattr(lag, name, timer.wrap("targets", getattr(lag, name)))
    for name in ("group_samples", "partition_samples", "observe_commits"):
        setattr(lag, name, timer.wrap("samples", getattr(lag, name)))
    # Inside write_offsets_batch: each COPY into a staging table and each set-based statement.
    statements = {
        getattr(samples_offsets, name): name.strip("_").lower()
        for name in dir(samples_offsets)
        if name.startswith(("_INSERT", "_UPSERT", "_DELETE", "_CARRY", "_TOUCH"))
        and isinstance(getattr(samples_offsets, name), str)
    }
    execute, copy_rows = samples_staging.rowcount, samples_staging.copy_rows

    def timed_execute(conn: Any, statement: str, params: dict[str, Any]) -> int:
        name = next((n for text_, n in statements.items() if statement.startswith(text_)), "other")
        return timer.wrap(f"sql {name}", execute)(conn, statement, params)

    def timed_copy(conn: Any, table: str, columns: Any, rows: Any) -> int:
        return timer.wrap(f"sql copy {table}", copy_rows)(conn, table, columns, rows)

    for module in (samples_offsets, samples_staging):
        module.rowcount = timed_execute  # type: ignore[attr-defined]
        module.copy_rows = timed_copy  # type: ignore[attr-defined]
    start_run = recorder._try_start
    recorder._try_start = timer.wrap("db_run", start_run)  # type: ignore[method-assign]
    submit = writer.submit

    def timed_submit(label: str, rows: int, write: BufferedWriter.Write) -> bool:
        key = (
            "db_run" if label.endswith(":run") else "db_history" if label.endswith(" history") else "db_batch"
        )
        return timer.wrap(key, submit)(label, rows, write)

    writer.submit = timed_submit  # type: ignore[method-assign]
    return timer


def memory_mb() -> dict[str, float]:
    """Current (VmRSS) and peak (VmHWM, and getrusage's ru_maxrss) resident set of this process."""
    status: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            status[key] = int(value.split()[0]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"rss_mb": status.get("VmRSS", 0.0), "peak_mb": max(peak, status.get("VmHWM", 0.0))}


def last_run(engine: Engine, cluster: str, job: str) -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT status, counts, error, duration_ms FROM collection_runs "
                "WHERE cluster = :c AND job = :j ORDER BY id DESC LIMIT 1"
            ),
            {"c": cluster, "j": job},
        ).one()
    return dict(row._mapping)


def complete_answer(engine: Engine, cluster: str, since: datetime, expected: int) -> bool:
    """Whether the store holds a lag sampled since `since` for every committed group-partition."""
    with engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT count(*) FROM latest_group_offsets "
                "WHERE cluster = :c AND lag IS NOT NULL AND sampled_at >= :since"
            ),
            {"c": cluster, "since": since},
        ).scalar_one()
    return int(found) >= expected


MAX_FILL_CYCLES = 5
"""Cycles the offsets job may ask for at once after a start (filling), beyond --cycles."""


def worker() -> int:
    """The measuring process. Talks JSON lines over its original stdout; logs go to stderr."""
    origin = time.perf_counter()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else written to stdout must not corrupt the protocol

    def send(event: str, **values: Any) -> None:
        protocol.write(json.dumps({"event": event, **values}) + "\n")

    def wait_go() -> None:
        if sys.stdin.readline().strip() != "go":
            raise RuntimeError("the benchmark stopped the measuring process")

    spec = json.loads(sys.stdin.readline())
    logging.basicConfig(level=logging.WARNING, format="  [collector] %(levelname)s %(name)s: %(message)s")
    started_at = datetime.now(UTC)
    engine = make_engine(spec["db_url"])
    clock = SystemClock()
    collect = dict(spec["collect"])
    timeout = collect.pop("request_timeout_seconds")
    config = CollectConfig(**collect)
    writer = BufferedWriter(engine, config.buffer_max_rows, clock)
    recorder = RunRecorder(engine, clock, writer=writer)
    cluster = ClusterConfig(
        name=spec["cluster"],
        bootstrap_servers=spec["bootstrap"].split(","),
        request_timeout_seconds=timeout,
        commit_stream=spec["commit_stream"],
    )
    asked: list[str] = []  # the jobs that asked for their next run now (the daemon's run_soon)
    collector = ClusterCollector(cluster, engine, clock, recorder, writer, config, run_soon=asked.append)
    collector.start()
    timer = instrument(collector, recorder, writer)
    baseline = memory_mb()

    started = time.perf_counter()
    if spec["commit_stream"]:
        collector.run("commits")  # starts the stream's thread, as the daemon's first run does
    if spec["profile"]:
        profile_call(Path(spec["profile"]) / f"collector-{spec['size']}-metadata", collector.run, "metadata")
    else:
        collector.run("metadata")
    metadata = {
        "seconds": time.perf_counter() - started,
        "run": last_run(engine, cluster.name, "metadata"),
        "steps": timer.take(),
    }
    cycles: list[dict[str, Any]] = []
    cold: dict[str, float | None] = {"first_complete_seconds": None, "filled_seconds": None}
    planned = filled_in = 0
    while planned < spec["cycles"] or ("offsets" in asked and filled_in < MAX_FILL_CYCLES):
        requested = "offsets" in asked
        asked.clear()
        if requested and filled_in < MAX_FILL_CYCLES:
            filled_in += 1  # the job asked for this one at once: no churn before it
        else:
            requested = False
            planned += 1
            if planned > 1:
                send("churn", before_cycle=len(cycles) + 1)
                wait_go()
        number = len(cycles) + 1
        started = time.perf_counter()
        if spec["commit_stream"]:
            collector.run("commits")
        if spec["profile"]:
            stem = Path(spec["profile"]) / f"collector-{spec['size']}-cycle{number}"
            profile_call(stem, collector.run, "offsets")
        else:
            collector.run("offsets")
        seconds = time.perf_counter() - started
        since_start = time.perf_counter() - origin
        steps = timer.take()
        run = last_run(engine, cluster.name, "offsets")
        if cold["first_complete_seconds"] is None and complete_answer(
            engine, cluster.name, started_at, spec["group_partitions"]
        ):
            cold["first_complete_seconds"] = since_start
        if cold["filled_seconds"] is None and not (run["counts"] or {}).get("filling", 0):
            cold["filled_seconds"] = since_start
        cycle = {
            "cycle": number,
            "asked": requested,
            "seconds": seconds,
            "since_start": since_start,
            "run": run,
            "steps": steps,
            "memory": memory_mb(),
            "loadavg": os.getloadavg()[0],
        }
        cycles.append(cycle)
        send("cycle", **cycle)
    steady = _steady(spec, collector, send, wait_go) if spec["steady_seconds"] > 0 else None
    collector.stop()
    engine.dispose()
    send(
        "done",
        baseline=baseline,
        metadata=metadata,
        cycles=cycles,
        cold=cold,
        steady=steady,
        memory=memory_mb(),
    )
    return 0


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _steady(
    spec: dict[str, Any], collector: ClusterCollector, send: Callable[..., None], wait_go: Callable[[], None]
) -> dict[str, Any]:
    """Steady state: the commits and offsets jobs at the daemon's interval for whole intervals
    (the orchestrator commits and times the commits meanwhile); the process's CPU seconds
    (every thread: the commit stream's too) over that time."""
    interval = spec["interval_seconds"]
    count = max(1, round(spec["steady_seconds"] / interval))
    send("steady", seconds=count * interval)
    wait_go()
    cpu, began = _cpu_seconds(), time.perf_counter()
    cycles: list[float] = []
    for n in range(count):
        pause = began + n * interval - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        started = time.perf_counter()
        if spec["commit_stream"]:
            collector.run("commits")
        collector.run("offsets")
        cycles.append(time.perf_counter() - started)
    pause = began + count * interval - time.perf_counter()
    if pause > 0:
        time.sleep(pause)
    wall = time.perf_counter() - began
    used = _cpu_seconds() - cpu
    result = {"wall_seconds": wall, "cpu_seconds": used, "cpu_per_minute": used / wall * 60, "cycles": cycles}
    send("steady_done", **result)
    wait_go()  # the timed commits have stopped: one more cycle, so the store holds the last ones
    collector.run("offsets")
    return result


# ---------------------------------------------------------------------------------------------
# The orchestrating process


@dataclass(frozen=True)
class ClusterPlan:
    nodes: int
    heap_mb: int
    base_port: int
    why_not_single: str = ""


def single_node_fits(size: int) -> tuple[bool, str]:
    """Whether one broker can hold `size` partitions here: it keeps a file open for every
    partition's active segment and maps its two index files, so it needs about `size` file
    descriptors (RLIMIT_NOFILE, inherited from this process) and 2 * `size` memory maps
    (vm.max_map_count), with room for the JVM, the sockets and Kafka's own topics."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        max_maps = int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        max_maps = 1 << 30
    problems = []
    if hard != resource.RLIM_INFINITY and size + 3000 > hard:
        problems.append(f"the open-file limit is {hard} (a broker needs about {size + 3000:,})")
    if 2 * size + 10_000 > max_maps:
        problems.append(f"vm.max_map_count is {max_maps} (a broker needs about {2 * size + 10_000:,})")
    return not problems, "; ".join(problems)


def _ports_free(base_port: int, nodes: int) -> bool:
    for port in [base_port + n for n in range(nodes)] + [base_port + 100 + n for n in range(nodes)]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_base_port(index: int, nodes: int) -> int:
    """59092 + 10 * index, or the next free slot of ten: these ports are inside Linux's usual
    ephemeral range (32768-60999), so a client connection may hold one for a while."""
    for attempt in range(10):
        port = BENCH_KAFKA_PORT + 10 * ((index + 3 * attempt) % 10)
        if _ports_free(port, nodes):
            return port
        _log(f"  ports {port}+ are taken (by a client connection?); trying the next slot")
        time.sleep(1)
    raise RuntimeError(f"no free Kafka ports between {BENCH_KAFKA_PORT} and {BENCH_KAFKA_PORT + 199}")


def cluster_plan(size: int, index: int) -> ClusterPlan:
    """Three nodes with 768 MB heaps up to 10k partitions; above that one node with 2 GB when the
    machine's limits allow a single broker that many partitions, else three with 1 GB each."""
    if size <= SMALL_CLUSTER_MAX_PARTITIONS:
        return ClusterPlan(3, 768, free_base_port(index, 3))
    fits, why = single_node_fits(size)
    if fits:
        return ClusterPlan(1, 2048, free_base_port(index, 1))
    _log(f"[{size:,} partitions] one broker cannot hold them here ({why}): using three")
    return ClusterPlan(3, 1024, free_base_port(index, 3), why)


def database_url(admin_url: str, name: str) -> str:
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


MAX_WRONG_EXAMPLES = 10
"""Wrong rows kept in the results (with what was expected), to tell a reader bug from the
benchmark's own bookkeeping."""


def verify(engine: Engine, cluster: str, workload: Workload) -> dict[str, int]:
    """Check every exact timestamp written against the known record times."""
    checked = wrong = 0
    examples: list[dict[str, Any]] = []
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT group_id, topic, partition, committed_offset, committed_timestamp, "
                "consumed_timestamp FROM latest_group_offsets WHERE cluster = :c AND lag > 0 "
                "AND timestamp_method = 'exact'"
            ),
            {"c": cluster},
        ).all()
        for group, topic, partition, offset, committed, consumed in rows:
            checked += 1
            expected = workload.base_ms + offset * 1000
            ok = committed is not None and int(committed.timestamp() * 1000) == expected
            if offset > 0:
                ok = ok and consumed is not None and int(consumed.timestamp() * 1000) == expected - 1000
            known = workload.commits.get(group, {}).get((topic, partition))
            if known != offset:
                ok = False
            wrong += not ok
            if not ok and len(examples) < MAX_WRONG_EXAMPLES:
                examples.append({
                    "group": group, "topic": topic, "partition": partition, "committed_offset": offset,
                    "known_commit": known, "records": workload.records.get((topic, partition)),
                    "committed_ms": _ms(committed), "consumed_ms": _ms(consumed),
                    "expected_committed_ms": expected,
                })  # fmt: skip
        partitions = conn.execute(
            text(
                "SELECT topic, partition, end_offset, start_timestamp, latest_timestamp "
                "FROM latest_partition_offsets WHERE cluster = :c"
            ),
            {"c": cluster},
        ).all()
    partition_wrong = 0
    for topic, partition, end, first, latest in partitions:
        good = end == workload.records[(topic, partition)]
        good = good and first is not None and int(first.timestamp() * 1000) == workload.base_ms
        good = (
            good
            and latest is not None
            and int(latest.timestamp() * 1000) == workload.base_ms + (end - 1) * 1000
        )
        partition_wrong += not good
        if not good and len(examples) < 2 * MAX_WRONG_EXAMPLES:
            examples.append({
                "topic": topic, "partition": partition, "end_offset": end,
                "records": workload.records[(topic, partition)], "start_ms": _ms(first),
                "latest_ms": _ms(latest),
            })  # fmt: skip
    if examples:
        _log(f"  verification found wrong rows, e.g. {json.dumps(examples[:5])}")
    return {
        "exact_checked": checked,
        "exact_wrong": wrong,
        "partitions_checked": len(partitions),
        "partitions_wrong": partition_wrong,
        "wrong_examples": examples,
    }


def _ms(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


PROBE_EVERY_SECONDS = 1.0
PROBE_WAIT_SECONDS = 20.0
"""Longest wait for a commit to show in the store before it counts as not seen."""


class CommitProber:
    """Commits one offset at a time (a lagging group-partition of the workload moves on by one)
    and times how long the commit takes to show in the store as a commit observation: the
    commit-to-visible latency, from just before the commit request to the first poll that finds
    it (polls every 10 ms)."""

    def __init__(
        self, bootstrap: str, db_url: str, cluster: str, workload: Workload, rng: random.Random
    ) -> None:
        self._bootstrap = bootstrap
        self._engine = make_engine(db_url)
        self._cluster = cluster
        self._workload = workload
        self._rng = rng
        self._consumers: dict[str, Consumer] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commit-prober", daemon=True)
        self.latencies: list[float] = []
        self.unseen = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        for consumer in self._consumers.values():
            consumer.close()
        self._engine.dispose()

    def _pick(self) -> tuple[str, TP, int] | None:
        lagging = [
            (group, tp, offset + 1)
            for group, offsets in sorted(self._workload.commits.items())[:50]
            for tp, offset in offsets.items()
            if offset < self._workload.records[tp]
        ]
        return self._rng.choice(lagging) if lagging else None

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            picked = self._pick()
            if picked is None:
                return
            group, (topic, partition), offset = picked
            consumer = self._consumers.get(group)
            if consumer is None:
                consumer = Consumer(
                    {"bootstrap.servers": self._bootstrap, "group.id": group, "enable.auto.commit": False}
                )
                self._consumers[group] = consumer
            committed_at = time.monotonic()
            consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
            self._workload.commits[group][(topic, partition)] = offset
            seen = self._wait_seen(group, topic, partition, offset, committed_at + PROBE_WAIT_SECONDS)
            if seen is None:
                self.unseen += 1
            else:
                self.latencies.append(seen - committed_at)
            self._stop.wait(max(0.0, PROBE_EVERY_SECONDS - (time.monotonic() - began)))

    def _wait_seen(
        self, group: str, topic: str, partition: int, offset: int, deadline: float
    ) -> float | None:
        query = text(
            "SELECT 1 FROM commit_observations WHERE cluster = :c AND group_id = :g AND topic = :t "
            "AND partition = :p AND committed_offset = :o LIMIT 1"
        )
        values = {"c": self._cluster, "g": group, "t": topic, "p": partition, "o": offset}
        with self._engine.connect() as conn:
            while time.monotonic() < deadline:
                if conn.execute(query, values).first() is not None:
                    return time.monotonic()
                conn.rollback()
                time.sleep(0.01)
        return None


def profile_call(stem: Path, function: Callable[..., object], *args: object) -> None:
    """Run `function(*args)` under cProfile; its statistics go to `stem`.prof and, the 45 costliest
    by cumulative time, to `stem`.txt."""
    profile = cProfile.Profile()
    profile.runcall(function, *args)
    profile.dump_stats(f"{stem}.prof")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(45)
    stem.with_suffix(".txt").write_text(out.getvalue())


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(spec: dict[str, Any], workload: Workload, rng: random.Random, threads: int) -> dict[str, Any]:
    """Run the measuring process, doing the churn it asks for between cycles and timing commits
    during its steady state."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert child.stdin is not None and child.stdout is not None
    result: dict[str, Any] | None = None
    churned: list[dict[str, int]] = []
    prober: CommitProber | None = None
    try:
        child.stdin.write(json.dumps(spec) + "\n")
        child.stdin.flush()
        for line in child.stdout:
            message = json.loads(line)
            event = message.pop("event")
            if event == "churn":
                _log(f"  churn before cycle {message['before_cycle']}")
                churned.append(churn(spec["bootstrap"], workload, rng, threads))
                child.stdin.write("go\n")
                child.stdin.flush()
            elif event == "cycle":
                counts = message["run"]["counts"]
                _log(
                    f"  cycle {message['cycle']}: {message['seconds']:.2f} s, {message['run']['status']}, "
                    f"exact {counts.get('exact', 0):,}/{counts.get('lagging_group_partitions', 0):,} "
                    f"lagging, read {counts.get('timestamps_read', 0):,}, "
                    f"unread {counts.get('timestamps_unread', 0):,}, "
                    f"RSS {message['memory']['rss_mb']:.0f} MB"
                )
            elif event == "steady":
                _log(
                    f"  steady state: {message['seconds']:.0f} s, "
                    f"a commit timed every {PROBE_EVERY_SECONDS:g} s"
                )
                if spec["commit_stream"]:
                    prober = CommitProber(spec["bootstrap"], spec["db_url"], spec["cluster"], workload, rng)
                    prober.start()
                child.stdin.write("go\n")
                child.stdin.flush()
            elif event == "steady_done":
                _log(
                    f"  steady: {message['cpu_seconds']:.1f} CPU s in {message['wall_seconds']:.0f} s "
                    f"({message['cpu_per_minute']:.2f} per minute)"
                )
                if prober is not None:
                    prober.stop()  # before the worker's last cycle: verify() sees every commit
                child.stdin.write("go\n")
                child.stdin.flush()
            elif event == "done":
                result = message
    finally:
        if prober is not None:
            prober.stop()
        if child.poll() is None and result is None:
            child.kill()
        child.wait(timeout=60)
    if result is None or child.returncode != 0:
        raise RuntimeError(f"the measuring process failed (exit code {child.returncode})")
    result["churn"] = churned
    if prober is not None and result.get("steady") is not None:
        latencies = prober.latencies
        result["steady"]["commit_visible"] = {
            "probes": len(latencies) + prober.unseen,
            "unseen": prober.unseen,
            "median_seconds": median(latencies) if latencies else None,
            "p95_seconds": _percentile(latencies, 0.95),
            "max_seconds": max(latencies) if latencies else None,
        }
    return result


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose cold cycle is the median one (the lower of the two middle ones): its steps
    and counts go into the detailed tables, the main table gives the medians of every cycle."""
    ranked = sorted(runs, key=lambda r: r["cycles"][0]["seconds"])
    return ranked[(len(ranked) - 1) // 2]


def _run_summary(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "seconds": [c["seconds"] for c in run["cycles"]],
        "exact": [_exact(c["run"]["counts"]) for c in run["cycles"]],
        "loadavg": [c["loadavg"] for c in run["cycles"]],
        "peak_mb": run["memory"]["peak_mb"],
        "verification": run["verification"],
    }


def run_size(
    size: int, index: int, args: argparse.Namespace, admin_url: str, collect: dict[str, Any]
) -> dict[str, Any]:
    rng = random.Random(args.seed + size)
    home = var_dir() / "bench" / f"kafka-{size}"
    result: dict[str, Any] = {
        "partitions": size,
        "topics": size // PARTITIONS_PER_TOPIC,
        "replication_factor": 1,
        "loadavg_before": os.getloadavg()[0],
        "collect": collect,
    }
    setup: dict[str, float] = {}
    cluster: DevKafkaCluster | None = None
    try:
        started = time.perf_counter()
        for attempt in range(3):
            plan = cluster_plan(size, index + attempt)
            config = DevKafkaConfig(nodes=plan.nodes, base_port=plan.base_port, heap_mb=plan.heap_mb)
            cluster = DevKafkaCluster(config, home, cache_dir())
            cluster.down(purge=True)
            _log(
                f"[{size:,} partitions] Kafka: {plan.nodes} node(s), {plan.heap_mb} MB heap each, "
                f"ports {plan.base_port}+"
            )
            try:
                cluster.up(report=lambda m: _log(f"  {m}"))
                break
            except DevEnvironmentError as exc:
                if "already in use" not in str(exc) or attempt == 2:
                    raise
                _log(f"  {exc}; trying other ports")
        setup["kafka_up"] = time.perf_counter() - started
        result.update(
            kafka_nodes=plan.nodes,
            kafka_heap_mb=plan.heap_mb,
            kafka_base_port=plan.base_port,
            why_not_single_node=plan.why_not_single,
        )

        started = time.perf_counter()
        name = f"kh_bench_collector_{size}"
        postgres.drop_database(admin_url, name)
        postgres.create_database(admin_url, name)
        url = database_url(admin_url, name)
        migrate.upgrade(url)
        setup["database"] = time.perf_counter() - started

        groups = args.groups[index] if len(args.groups) > 1 else args.groups[0]
        workload = plan_workload(size, groups, rng, args.partitions_per_group)
        bootstrap = cluster.bootstrap_servers
        started = time.perf_counter()
        _log(f"  creating {len(workload.topics)} topics of {PARTITIONS_PER_TOPIC} partitions (RF 1)")
        create_topics(bootstrap, workload.topics)
        setup["topics"] = time.perf_counter() - started

        started = time.perf_counter()
        result["records"] = produce(bootstrap, workload, [(tp, 0, n) for tp, n in workload.records.items()])
        setup["produce"] = time.perf_counter() - started
        _log(f"  produced {result['records']:,} records in {setup['produce']:.1f} s")

        started = time.perf_counter()
        commit_groups(bootstrap, workload.commits, args.threads)
        setup["commits"] = time.perf_counter() - started
        result["groups"] = len(workload.commits)
        result["group_partitions_committed"] = sum(map(len, workload.commits.values()))
        result["setup"] = setup
        _log(
            f"  setup: {sum(setup.values()):.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in setup.items())})"
        )

        spec = {
            "size": size,
            "cluster": f"bench-{size}",
            "bootstrap": bootstrap,
            "db_url": url,
            "collect": collect,
            "cycles": args.cycles,
            "profile": str(RESULTS) if args.profile else None,
            "group_partitions": result["group_partitions_committed"],
            "commit_stream": not args.no_commit_stream,
            "steady_seconds": args.steady_seconds,
            "interval_seconds": Intervals().offsets_seconds,
        }
        runs: list[dict[str, Any]] = []
        for repeat in range(args.repeat):
            if repeat:
                # Cold again: a new measuring process (empty memory cache) and a fresh database.
                _log(f"  run {repeat + 1}/{args.repeat}: a fresh database, a new measuring process")
                postgres.drop_database(admin_url, name)
                postgres.create_database(admin_url, name)
                migrate.upgrade(url)
            run = measure(spec, workload, rng, args.threads)
            engine = make_engine(url)
            try:
                run["verification"] = verify(engine, spec["cluster"], workload)
            finally:
                engine.dispose()
            runs.append(run)
        result.update(median_run(runs))
        result["memory"] = {**result["memory"], "peak_mb": max(r["memory"]["peak_mb"] for r in runs)}
        result["runs"] = [_run_summary(r) for r in runs]
        result["loadavg_after"] = os.getloadavg()[0]
        if not args.keep:
            postgres.drop_database(admin_url, name)
    finally:
        if not args.keep and cluster is not None:
            _log(f"  stopping the {size:,}-partition cluster")
            cluster.down(purge=True)
    return result


# ---------------------------------------------------------------------------------------------
# Report


def _memory_total() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "unknown"


def machine(pg_version: str) -> dict[str, Any]:
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "memory": _memory_total(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "kafka": DevKafkaConfig().version,
        "postgresql": pg_version,
        "python": platform.python_version(),
        "confluent_kafka": package_version("confluent-kafka"),
        "librdkafka": librdkafka_version()[0],
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": os.getloadavg()[0],
    }


def _exact(counts: dict[str, int]) -> float | None:
    lagging = counts.get("lagging_group_partitions", 0)
    return counts.get("exact", 0) / lagging if lagging else None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def verdicts(sizes: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """(target, met, detail) for each target; met is None when the size was not run."""
    at = next((s for s in sizes if s["partitions"] == TARGET_SIZE and "cycles" in s), None)
    found: list[tuple[str, bool | None, str]] = []
    if at is None:
        found.append((f"cycle < {TARGET_CYCLE_SECONDS:g} s at 10k partitions", None, "10k not run"))
        found.append((f"exact >= {TARGET_EXACT:.0%} of lagging at 10k", None, "10k not run"))
    else:
        runs = at.get("runs", [])
        times = [c["seconds"] for c in at["cycles"]]
        if len(runs) > 1:
            times = [median(r["seconds"][i] for r in runs) for i in range(len(runs[0]["seconds"]))]
        found.append(
            (
                f"cycle < {TARGET_CYCLE_SECONDS:g} s at 10k partitions, {at['groups']} groups",
                all(t < TARGET_CYCLE_SECONDS for t in times),
                "cycles " + ", ".join(f"{t:.2f} s" for t in times),
            )
        )
        # A cycle still filling after a start leaves append times for the next on purpose.
        filling = [c for c in at["cycles"] if (c["run"]["counts"] or {}).get("filling")]
        exact = [_exact(c["run"]["counts"]) for c in at["cycles"] if c not in filling]
        found.append(
            (
                f"exact timestamps for >= {TARGET_EXACT:.0%} of lagging group-partitions at 10k",
                all(e is not None and e >= TARGET_EXACT for e in exact),
                "cycles "
                + ", ".join(f"{_pct(e)} %" for e in exact)
                + (f"; {len(filling)} cycle(s) still filling after the start left out" if filling else ""),
            )
        )
    found += stream_verdicts(sizes)
    measured = [s for s in sizes if "memory" in s]
    if measured:
        peaks = [(s["partitions"], s["memory"]["peak_mb"]) for s in measured]
        found.append(
            (
                f"collector RSS < {TARGET_RSS_MB:g} MB",
                all(p < TARGET_RSS_MB for _, p in peaks),
                "peak " + ", ".join(f"{p:.0f} MB at {n:,}" for n, p in peaks),
            )
        )
    return found


# Issue 19's targets, at 100k group-partitions (2 cores, quiet machine).
TARGET_GROUP_PARTITIONS = 100_000
TARGET_FIRST_ANSWER_SECONDS = 2.5
TARGET_VISIBLE_MEDIAN_SECONDS = 1.0
TARGET_VISIBLE_P95_SECONDS = 2.0
TARGET_CPU_PER_MINUTE = 3.0
TARGET_WARM_CYCLE_SECONDS = 2.0
TARGET_PEAK_RSS_MB = 300.0


def _warm_cycles(size: dict[str, Any]) -> list[float]:
    """The cycle times of the steady state, else of the cycles after the cold one and its fill."""
    steady = size.get("steady") or {}
    if steady.get("cycles"):
        return list(steady["cycles"])
    cycles = size.get("cycles", [])
    return [c["seconds"] for c in cycles[1:] if not c.get("asked")]


def stream_verdicts(sizes: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """Issue 19's targets at the size with 100k group-partitions (None: not run)."""
    at = next(
        (
            s
            for s in sizes
            if s.get("group_partitions_committed") == TARGET_GROUP_PARTITIONS and "cycles" in s
        ),
        None,
    )
    names = [
        f"first complete answer <= {TARGET_FIRST_ANSWER_SECONDS:g} s after start at 100k group-partitions",
        f"a commit visible <= {TARGET_VISIBLE_MEDIAN_SECONDS:g} s median, "
        f"<= {TARGET_VISIBLE_P95_SECONDS:g} s p95",
        f"steady CPU <= {TARGET_CPU_PER_MINUTE:g} CPU-seconds per minute",
        f"offsets cycle <= {TARGET_WARM_CYCLE_SECONDS:g} s (warm)",
        f"peak RSS <= {TARGET_PEAK_RSS_MB:g} MB at 100k group-partitions",
    ]
    if at is None:
        return [(name, None, "100k group-partitions not run") for name in names]
    cold = at.get("cold") or {}
    steady = at.get("steady") or {}
    visible = steady.get("commit_visible") or {}
    first = cold.get("first_complete_seconds")
    warm = _warm_cycles(at)
    found: list[tuple[str, bool | None, str]] = [
        (names[0], None if first is None else first <= TARGET_FIRST_ANSWER_SECONDS, _secs(first)),
    ]
    middle, p95 = visible.get("median_seconds"), visible.get("p95_seconds")
    found.append(
        (
            names[1],
            None
            if middle is None or p95 is None
            else middle <= TARGET_VISIBLE_MEDIAN_SECONDS
            and p95 <= TARGET_VISIBLE_P95_SECONDS
            and not visible.get("unseen"),
            f"median {_secs(middle)}, p95 {_secs(p95)}, {visible.get('unseen', 0)} of "
            f"{visible.get('probes', 0)} not seen",
        )
    )
    cpu = steady.get("cpu_per_minute")
    found.append(
        (names[2], None if cpu is None else cpu <= TARGET_CPU_PER_MINUTE, f"{cpu:.2f}" if cpu else "-")
    )
    found.append(
        (
            names[3],
            all(t <= TARGET_WARM_CYCLE_SECONDS for t in warm) if warm else None,
            ", ".join(f"{t:.2f} s" for t in warm) or "-",
        )
    )
    peak = at["memory"]["peak_mb"]
    found.append((names[4], peak <= TARGET_PEAK_RSS_MB, f"{peak:.0f} MB"))
    return found


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def stream_table(sizes: list[dict[str, Any]]) -> list[str]:
    """Start to the first complete answer, commit to visible, steady CPU and cycles, per size."""
    measured = [s for s in sizes if "cycles" in s and ("cold" in s or "steady" in s)]
    if not measured:
        return []
    lines = [
        "",
        "### Cold start, commit latency and steady cost",
        "",
        "| partitions | group-partitions | first complete answer s | append times filled s | commit visible "
        "median s | p95 s | probes (unseen) | steady CPU s / min | steady cycles s | peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    for s in measured:
        cold, steady = s.get("cold") or {}, s.get("steady") or {}
        visible = steady.get("commit_visible") or {}
        cpu = steady.get("cpu_per_minute")
        lines.append(
            f"| {s['partitions']:,} | {s['group_partitions_committed']:,} "
            f"| {_secs(cold.get('first_complete_seconds'))} | {_secs(cold.get('filled_seconds'))} "
            f"| {_secs(visible.get('median_seconds'))} | {_secs(visible.get('p95_seconds'))} "
            f"| {visible.get('probes', 0)} ({visible.get('unseen', 0)}) "
            f"| {'-' if cpu is None else f'{cpu:.2f}'} "
            f"| {', '.join(f'{t:.2f}' for t in steady.get('cycles', [])) or '-'} "
            f"| {s['memory']['peak_mb']:.0f} |"
        )
    lines += [
        "",
        "First complete answer: from the measuring process's start (clients built, the commit stream "
        "started, the metadata job) until the store holds a lag sampled since then for every committed "
        "group-partition; the daemon adds the offsets job's first_run_in (1 s). Append times filled: "
        "until a run's `filling` count is 0 (the cycles the job asks for at once). Commit visible: from "
        "a commit request (one a second, by a consumer of the group) to its commit observation found "
        "in the store (polled every 10 ms). Steady CPU: user + system seconds of the measuring process "
        "(every thread) over whole offsets intervals with the commit stream on, per minute.",
    ]
    return lines


def report(info: dict[str, Any], collect: dict[str, Any], sizes: list[dict[str, Any]]) -> str:
    if sizes and "collect" in sizes[0]:  # the settings of the first size; the others say so if they differ
        collect = {k: v for k, v in sizes[0]["collect"].items() if k in collect}
    lines = [
        "## Offsets collector: cycle time, exact timestamps, memory",
        "",
        f"Machine: {info['cpus']} CPU (nproc), {info['memory']} RAM, {info['system']}; "
        f"Kafka {info['kafka']} (local KRaft, RF 1); PostgreSQL {info['postgresql']}; "
        f"Python {info['python']}; confluent-kafka {info['confluent_kafka']} "
        f"(librdkafka {info['librdkafka']}); {info['date']}; load average (1 min) at start "
        f"{info['loadavg_start']:.2f} (a decaying average: it still counts what ran in the minutes "
        "before, an earlier benchmark's setup too).",
        "",
        "Collect settings: " + ", ".join(f"{k} = {v}" for k, v in collect.items()) + ".",
        "",
        "Measured: "
        + "; ".join(
            f"{s['partitions']:,} partitions at {s.get('measured_at', info['date'])}"
            + (
                f" (request timeout {s['collect']['request_timeout_seconds']:g} s)"
                if s.get("collect", collect).get("request_timeout_seconds")
                != collect["request_timeout_seconds"]
                else ""
            )
            for s in sizes
        )
        + ".",
        "",
        "| partitions | Kafka nodes | groups | group-partitions | lagging | cycle 1 s (cold) | cycle 2 s "
        "| cycle 3 s | exact % (1 / 2 / 3) | peak RSS MB | RSS MB | load avg |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for s in sizes:
        if "cycles" not in s:
            lines.append(
                f"| {s['partitions']:,} | {s.get('kafka_nodes', '')} | failed: {s.get('error', '')} |"
            )
            continue
        ran = [c["run"]["counts"] for c in s["cycles"] if c["run"]["status"] != "failed"]
        first = ran[0] if ran else {}
        secs = [
            f"{c['seconds']:.2f}" + (" failed" if c["run"]["status"] == "failed" else "") for c in s["cycles"]
        ] + ["-"] * (3 - len(s["cycles"]))
        runs = s.get("runs", [])
        if len(runs) > 1:  # the median of each cycle over the runs, then each run's figure
            secs = [
                f"{median(r['seconds'][i] for r in runs):.2f} ("
                + ", ".join(f"{r['seconds'][i]:.2f}" for r in runs)
                + ")"
                for i in range(len(runs[0]["seconds"]))
            ] + ["-"] * (3 - len(runs[0]["seconds"]))
        exact = " / ".join(_pct(_exact(c["run"]["counts"])) for c in s["cycles"])
        load = max([s["loadavg_before"]] + [c["loadavg"] for c in s["cycles"]])
        load = max([load] + [a for r in runs for a in r["loadavg"]])
        lines.append(
            f"| {s['partitions']:,} | {s['kafka_nodes']} | {first.get('groups', 0)} "
            f"| {first.get('group_partitions', 0):,} | {first.get('lagging_group_partitions', 0):,} "
            f"| {' | '.join(secs[:3])} | {exact} | {s['memory']['peak_mb']:.0f} "
            f"| {s['memory']['rss_mb']:.0f} | {load:.1f} |"
        )
    for s in sizes:
        if s.get("why_not_single_node"):
            lines += [
                "",
                f"{s['partitions']:,} partitions ran on {s['kafka_nodes']} brokers, not one: "
                f"{s['why_not_single_node']}.",
            ]
    lines += [
        "",
        "Cycle times with figures in brackets: the median over that many cold-started runs "
        "(--repeat), then each run's; the other columns and the tables below are of the run with the "
        "median cold cycle. "
        "Exact % = counts.exact / counts.lagging_group_partitions of the cycle's collection_runs row. "
        "RSS is the measuring process (the collector alone: Python, its clients, caches and batch); "
        "Kafka and PostgreSQL run in their own processes and are not counted. Load avg is the highest "
        "1-minute load average seen during the size (2 CPUs).",
        "",
        "### Per cycle",
        "",
        "| partitions | cycle | s | status | groups | group-partitions | lagging | exact % | timestamps "
        "needed | read | unread | interpolated | rows |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        for c in s.get("cycles", []):
            n = c["run"]["counts"]
            lines.append(
                f"| {s['partitions']:,} | {c['cycle']} | {c['seconds']:.2f} | {c['run']['status']} "
                f"| {n.get('groups', 0)} | {n.get('group_partitions', 0):,} "
                f"| {n.get('lagging_group_partitions', 0):,} | {_pct(_exact(n))} "
                f"| {n.get('timestamps_needed', 0):,} | {n.get('timestamps_read', 0):,} "
                f"| {n.get('timestamps_unread', 0):,} | {n.get('interpolated', 0):,} | {n.get('rows', 0):,} |"
            )
    lines += stream_table(sizes)
    problems = [
        f"- {s['partitions']:,} partitions, cycle {c['cycle']} ({c['run']['status']}): {c['run']['error']}"
        for s in sizes
        for c in s.get("cycles", [])
        if c["run"].get("error")
    ]
    if problems:
        lines += ["", *problems]
    lines += ["", "### Where a cycle's time goes (seconds)", ""]
    measured = [s for s in sizes if "cycles" in s]
    if measured:
        header = ["step"]
        for s in measured:
            header += [f"{s['partitions'] // 1000}k c{c['cycle']}" for c in s["cycles"]]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|---" + "|---:" * (len(header) - 1) + "|")
        sql = sorted({k for s in measured for c in s["cycles"] for k in c["steps"] if k.startswith("sql ")})
        rows = [*STEPS, *((k, f"   - {k}") for k in sql)]
        rows += [("other", "other (filtering, building the batch, counts)"), ("", "")]
        for key, label in rows:
            if not key:
                label = "**cycle wall time**"
            cells = [label]
            for s in measured:
                for c in s["cycles"]:
                    steps = c["steps"]
                    if key == "other":
                        value = c["seconds"] - sum(
                            v["seconds"]
                            for k, v in steps.items()
                            if k not in NESTED and not k.startswith("sql ")
                        )
                    elif not key:
                        value = c["seconds"]
                    else:
                        value = steps.get(key, {}).get("seconds", 0.0)
                    cells.append(f"{value:.3f}")
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Metadata job (once per size, before cycle 1): "]
        lines[-1] += (
            ", ".join(f"{s['partitions']:,}: {s['metadata']['seconds']:.2f} s" for s in measured) + "."
        )
    if len(measured) > 1:
        base = measured[0]
        growth = []
        for s in measured:
            ratio = s["cycles"][0]["seconds"] / base["cycles"][0]["seconds"]
            warm = s["cycles"][-1]["seconds"] / base["cycles"][-1]["seconds"]
            growth.append(
                f"{s['partitions']:,} partitions: x{ratio:.1f} cold, x{warm:.1f} warm "
                f"(for x{s['partitions'] / base['partitions']:.0f} partitions)"
            )
        lines += ["", "Growth against the smallest size: " + "; ".join(growth) + "."]
    lines += ["", "### Setup (not part of the measurement)", ""]
    lines.append(
        "| partitions | records | groups committed | group-partitions | Kafka up s | topics s "
        "| produce s | commits s | check: exact ok | check: partitions ok |"
    )
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for s in measured:
        st, v = s["setup"], s["verification"]
        lines.append(
            f"| {s['partitions']:,} | {s['records']:,} | {s['groups']} | {s['group_partitions_committed']:,} "
            f"| {st['kafka_up']:.1f} | {st['topics']:.1f} | {st['produce']:.1f} | {st['commits']:.1f} "
            f"| {v['exact_checked'] - v['exact_wrong']:,}/{v['exact_checked']:,} "
            f"| {v['partitions_checked'] - v['partitions_wrong']:,}/{v['partitions_checked']:,} |"
        )
    lines += ["", "### Targets", ""]
    for target, met, detail in verdicts(sizes):
        mark = "not measured" if met is None else ("met" if met else "NOT met")
        lines.append(f"- {target}: **{mark}** ({detail})")
    return "\n".join(lines) + "\n"


def _counts(value: str) -> list[int]:
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers, got {value!r}") from exc


def _sizes(value: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes takes comma-separated integers, got {value!r}") from exc
    if not sizes or any(s < PARTITIONS_PER_TOPIC or s % PARTITIONS_PER_TOPIC for s in sizes):
        raise argparse.ArgumentTypeError(f"every size must be a positive multiple of {PARTITIONS_PER_TOPIC}")
    return sizes


def main() -> int:
    global BENCH_KAFKA_PORT, BENCH_PG_PORT  # one run, one pair of ports
    if "--worker" in sys.argv[1:]:
        return worker()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=_sizes, default=[1000, 10_000, 30_000], help="partition counts")
    parser.add_argument(
        "--groups",
        type=_counts,
        default=[500],
        help="consumer groups: one number for every size, or one per size (default 500)",
    )
    parser.add_argument(
        "--partitions-per-group",
        type=int,
        help="partitions each group commits on (default: a random 20-200 per group); "
        "the issue's cases: --sizes 1000,10000 --groups 50,500 --partitions-per-group 200",
    )
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=60.0,
        help="steady state after the cycles: the jobs at the daemon's interval, CPU and commit "
        "latency measured (0: none; default 60)",
    )
    parser.add_argument(
        "--no-commit-stream",
        action="store_true",
        help="commits from OffsetFetch only (no __consumer_offsets)",
    )
    parser.add_argument("--cycles", type=int, default=3, help="offsets cycles per size (default 3)")
    parser.add_argument("--keep", action="store_true", help="leave Kafka, PostgreSQL and the data running")
    parser.add_argument(
        "--budget", type=float, help="collect.timestamp_budget_seconds (default: CollectConfig)"
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        help="the cluster's request_timeout_seconds (default: ClusterConfig, 10 s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measuring runs per size, each cold (new process, fresh database); the table gives medians",
    )
    parser.add_argument("--threads", type=int, default=8, help="setup: groups committing at once (default 8)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--kafka-port",
        type=int,
        default=BENCH_KAFKA_PORT,
        help="first broker port; the sizes use slots of ten up to 199 above it, controllers 100 "
        "higher still (default: $KAFKA_HEALTH_BENCH_KAFKA_PORT or 59092)",
    )
    parser.add_argument(
        "--pg-port",
        type=int,
        default=BENCH_PG_PORT,
        help="the private PostgreSQL's port (default: $KAFKA_HEALTH_BENCH_PG_PORT or 55473)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile each cycle into bench/results/")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other sizes of the last bench/results/collector.json in the report",
    )
    args = parser.parse_args()
    BENCH_KAFKA_PORT, BENCH_PG_PORT = args.kafka_port, args.pg_port
    if min(*args.groups, args.cycles, args.threads, args.repeat) < 1:
        parser.error("--groups, --cycles, --threads and --repeat must be at least 1")
    if len(args.groups) not in (1, len(args.sizes)):
        parser.error(f"--groups takes one number or one per size ({len(args.sizes)}), got {len(args.groups)}")
    if args.partitions_per_group is not None and args.partitions_per_group < 1:
        parser.error("--partitions-per-group must be at least 1")
    if args.steady_seconds < 0:
        parser.error("--steady-seconds must be 0 or more")
    overrides: dict[str, Any] = {}
    if args.budget is not None:
        overrides["timestamp_budget_seconds"] = args.budget
    defaults = CollectConfig(**overrides)
    request_timeout = (
        args.request_timeout
        if args.request_timeout is not None
        else ClusterConfig.model_fields["request_timeout_seconds"].default
    )
    collect = {
        "request_timeout_seconds": request_timeout,
        "timestamp_budget_seconds": defaults.timestamp_budget_seconds,
        "timestamp_cache_entries": defaults.timestamp_cache_entries,
        "buffer_max_rows": defaults.buffer_max_rows,
    }
    _log(
        f"timestamp budget {defaults.timestamp_budget_seconds:g} s, "
        f"request timeout {request_timeout:g} s "
        f"({'set by flags' if overrides or args.request_timeout else 'the defaults'})"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-collector", BENCH_PG_PORT, log=_log)
    server.up()
    sizes: list[dict[str, Any]] = []
    try:
        admin_url = server.url("postgres")
        engine = make_engine(admin_url)
        try:
            with engine.connect() as conn:
                pg_version = str(conn.execute(text("SHOW server_version")).scalar_one())
        finally:
            engine.dispose()
        info = machine(pg_version)
        earlier: list[dict[str, Any]] = []
        if args.merge and (RESULTS / "collector.json").is_file():
            previous = json.loads((RESULTS / "collector.json").read_text())
            earlier = [s for s in previous["sizes"] if s["partitions"] not in args.sizes]
            info["earlier_runs"] = sorted(
                {s.get("measured_at", previous["machine"]["date"]) for s in earlier}
                | set(previous["machine"].get("earlier_runs", []))
            )
        for index, size in enumerate(args.sizes):
            try:
                sizes.append(run_size(size, index, args, admin_url, collect))
            except Exception as exc:
                _log(f"[{size:,} partitions] failed: {type(exc).__name__}: {exc}")
                sizes.append({"partitions": size, "error": f"{type(exc).__name__}: {exc}"})
            sizes[-1]["measured_at"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
            save(info, collect, sorted(earlier + sizes, key=lambda s: s["partitions"]))
    finally:
        if not args.keep:
            server.down()
    print(save(info, collect, sorted(earlier + sizes, key=lambda s: s["partitions"])))
    _log(f"wrote {RESULTS / 'collector.json'} and {RESULTS / 'collector.md'}")
    return 0 if all("cycles" in s for s in sizes) else 1


def save(info: dict[str, Any], collect: dict[str, Any], sizes: list[dict[str, Any]]) -> str:
    """Write the report of `sizes` to bench/results/collector.{md,json}; return the Markdown."""
    text_report = report(info, {k: v for k, v in collect.items() if k != "buffer_max_rows"}, sizes)
    targets = [{"target": t, "met": m, "detail": d} for t, m, d in verdicts(sizes)]
    document = {"machine": info, "collect": collect, "sizes": sizes, "targets": targets}
    (RESULTS / "collector.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    (RESULTS / "collector.md").write_text(text_report)
    return text_report


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C: the clusters and the server are stopped."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
