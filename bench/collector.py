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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from confluent_kafka import Consumer, TopicPartition
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.collector_load import (
    PARTITIONS_PER_TOPIC,
    TP,
    T,
    Workload,
    churn,
    commit_groups,
    create_topics,
    note,
    plan_workload,
    produce,
)
from bench.collector_report import RESULTS, exact_share, machine, results_stem, save

BENCH_KAFKA_PORT = int(os.environ.get("KAFKA_HEALTH_BENCH_KAFKA_PORT", "59092"))
"""First broker port (controllers 100 higher; sizes take slots of ten up to 199 above it)."""
BENCH_PG_PORT = int(os.environ.get("KAFKA_HEALTH_BENCH_PG_PORT", "55473"))
SMALL_CLUSTER_MAX_PARTITIONS = 10_000


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
        note(f"  ports {port}+ are taken (by a client connection?); trying the next slot")
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
    note(f"[{size:,} partitions] one broker cannot hold them here ({why}): using three")
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
        note(f"  verification found wrong rows, e.g. {json.dumps(examples[:5])}")
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
                note(f"  churn before cycle {message['before_cycle']}")
                churned.append(churn(spec["bootstrap"], workload, rng, threads))
                child.stdin.write("go\n")
                child.stdin.flush()
            elif event == "cycle":
                counts = message["run"]["counts"]
                note(
                    f"  cycle {message['cycle']}: {message['seconds']:.2f} s, {message['run']['status']}, "
                    f"exact {counts.get('exact', 0):,}/{counts.get('lagging_group_partitions', 0):,} "
                    f"lagging, read {counts.get('timestamps_read', 0):,}, "
                    f"unread {counts.get('timestamps_unread', 0):,}, "
                    f"RSS {message['memory']['rss_mb']:.0f} MB"
                )
            elif event == "steady":
                note(
                    f"  steady state: {message['seconds']:.0f} s, "
                    f"a commit timed every {PROBE_EVERY_SECONDS:g} s"
                )
                if spec["commit_stream"]:
                    prober = CommitProber(spec["bootstrap"], spec["db_url"], spec["cluster"], workload, rng)
                    prober.start()
                child.stdin.write("go\n")
                child.stdin.flush()
            elif event == "steady_done":
                note(
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
        "exact": [exact_share(c["run"]["counts"]) for c in run["cycles"]],
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
            versioned = {"version": args.kafka_version} if args.kafka_version else {}
            config = DevKafkaConfig(
                nodes=plan.nodes, base_port=plan.base_port, heap_mb=plan.heap_mb, **versioned
            )
            cluster = DevKafkaCluster(config, home, cache_dir())
            cluster.down(purge=True)
            note(
                f"[{size:,} partitions] Kafka: {plan.nodes} node(s), {plan.heap_mb} MB heap each, "
                f"ports {plan.base_port}+"
            )
            try:
                cluster.up(report=lambda m: note(f"  {m}"))
                break
            except DevEnvironmentError as exc:
                if "already in use" not in str(exc) or attempt == 2:
                    raise
                note(f"  {exc}; trying other ports")
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
        note(f"  creating {len(workload.topics)} topics of {PARTITIONS_PER_TOPIC} partitions (RF 1)")
        create_topics(bootstrap, workload.topics)
        setup["topics"] = time.perf_counter() - started

        started = time.perf_counter()
        result["records"] = produce(bootstrap, workload, [(tp, 0, n) for tp, n in workload.records.items()])
        setup["produce"] = time.perf_counter() - started
        note(f"  produced {result['records']:,} records in {setup['produce']:.1f} s")

        started = time.perf_counter()
        commit_groups(bootstrap, workload.commits, args.threads)
        setup["commits"] = time.perf_counter() - started
        result["groups"] = len(workload.commits)
        result["group_partitions_committed"] = sum(map(len, workload.commits.values()))
        result["setup"] = setup
        note(
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
                note(f"  run {repeat + 1}/{args.repeat}: a fresh database, a new measuring process")
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
            note(f"  stopping the {size:,}-partition cluster")
            cluster.down(purge=True)
    return result


# ---------------------------------------------------------------------------------------------
# Report


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
    parser.add_argument(
        "--kafka-version",
        help="the Apache Kafka version of the clusters (default: dev_kafka.version's); results go to "
        "bench/results/collector-kafka-<version>.{json,md}",
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
    note(
        f"timestamp budget {defaults.timestamp_budget_seconds:g} s, "
        f"request timeout {request_timeout:g} s "
        f"({'set by flags' if overrides or args.request_timeout else 'the defaults'})"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-collector", BENCH_PG_PORT, log=note)
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
        info = machine(pg_version, args.kafka_version)
        stem = results_stem(args.kafka_version)
        earlier: list[dict[str, Any]] = []
        if args.merge and (RESULTS / f"{stem}.json").is_file():
            previous = json.loads((RESULTS / f"{stem}.json").read_text())
            earlier = [s for s in previous["sizes"] if s["partitions"] not in args.sizes]
            info["earlier_runs"] = sorted(
                {s.get("measured_at", previous["machine"]["date"]) for s in earlier}
                | set(previous["machine"].get("earlier_runs", []))
            )
        for index, size in enumerate(args.sizes):
            try:
                sizes.append(run_size(size, index, args, admin_url, collect))
            except Exception as exc:
                note(f"[{size:,} partitions] failed: {type(exc).__name__}: {exc}")
                sizes.append({"partitions": size, "error": f"{type(exc).__name__}: {exc}"})
            sizes[-1]["measured_at"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
            save(info, collect, sorted(earlier + sizes, key=lambda s: s["partitions"]), stem)
    finally:
        if not args.keep:
            server.down()
    print(save(info, collect, sorted(earlier + sizes, key=lambda s: s["partitions"]), stem))
    note(f"wrote {RESULTS / (stem + '.json')} and {RESULTS / (stem + '.md')}")
    return 0 if all("cycles" in s for s in sizes) else 1


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C: the clusters and the server are stopped."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
