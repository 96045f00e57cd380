"""The whole daemon's footprint: `kafka-health run` (collectors, evaluation every 30 s, alerting,
web) against a live cluster of 10,000 group-partitions, from its start to a complete answer and
then in steady state.

    .venv/bin/python bench/footprint.py --label before     # about 20 minutes on 2 CPUs
    .venv/bin/python bench/footprint.py --steady 120 --settle 30 --label start  # the start's figures

1. A private 1-node Kafka cluster under var/bench/kafka-footprint (or $KAFKA_HEALTH_VAR/...),
   ports --kafka-port (59392) and 100 higher: --partitions partitions in topics of 100 (1,000 by
   default), 5-20 records each; --groups groups (50) committing on 200 partitions each (10,000
   group-partitions), half caught up and half lagging.
2. A fresh database on a private PostgreSQL under var/bench/postgres-footprint (--pg-port, 55477),
   migrated to head.
3. The load while the daemon runs: one producer writes --produce-rate records a second (500) over
   every partition, and each group commits every 10 s on its 200 partitions, a random few records
   short of the end.
4. The daemon as `kafka-health run` in its own process (web on --web-port, 27395), with the shipped
   rule pack, the default intervals (offsets 15 s, evaluation 30 s) and alerts written to a file.
   From the moment the process starts: seconds until every group-partition has its lag through the
   API (`/api/v1/clusters/{c}/groups/{g}/lag` of every group) and through `/metrics` (a
   `kafka_consumer_group_lag_in_offsets` series for each: where the fleet has more than the 50,000
   partition-level series one scrape serves by default, `metrics.max_partition_series` is raised to
   hold them all, as the daemon's warning tells an operator to); the CPU seconds of the daemon's
   process tree (Python and the Spark JVM it starts) and of PostgreSQL's processes (with the
   backends it reaped) to each point.
5. After --settle seconds (840) from the end of the first evaluation, --steady seconds (180) of
   steady state (by then the evaluation's 15-minute window holds its 60 samples of each
   group-partition: a shorter settle measures a window still filling, whose evaluations cost
   less, docs/bench/targets.md) with a scraper reading `/metrics` every 15 s and one group's lag
   read through the API every 10 s: CPU seconds per minute of the daemon (Python, JVM) and of
   PostgreSQL; resident memory of the daemon's tree (the sum of RSS and of PSS, sampled every 5 s:
   the largest and the last); the age of the offset lag served (now - `offset_lag_as_of` of the
   group read); the evaluations' durations.

Prints Markdown and writes bench/results/footprint.json and footprint.md; the runs of other labels
in footprint.json are kept, so one file holds the before and the after of a change.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import collector_load as setup_load
from bench.collector import database_url
from bench.collector_load import PARTITIONS_PER_TOPIC, VALUE, Workload
from bench.detect import cpu_seconds, evaluation_seconds, start_daemon
from bench.summary import FOOTPRINT_POSTGRES_LIMIT, FOOTPRINT_TARGETS, code_commit
from monitor.core.settings import DevKafkaConfig
from monitor.core.settings_push import MetricsConfig
from monitor.devtools import postgres
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.paths import cache_dir, var_dir
from monitor.expose.metrics.state_queries import GROUP_PARTITION, PARTITION
from monitor.store import migrate
from monitor.store.engine import make_engine

CLUSTER = "bench"
RESULTS = Path(__file__).resolve().parent / "results"
PER_GROUP = 200
"""Partitions each group commits on: 50 groups make issue 31's 10,000 group-partitions."""
EVERY = {"commit": 10.0, "scrape": 15.0, "read": 10.0, "sample": 5.0}
"""Seconds between two of each: every group's commits while the daemon runs; in the steady state,
a scrape of `/metrics` (a common Prometheus interval), a read of one group's lag through the API,
a memory sample of the daemon's tree."""
LAG_SERIES = "kafka_consumer_group_lag_in_offsets{"
DEFAULT_PARTITION_SERIES = MetricsConfig().max_partition_series
"""The partition-level series one scrape serves by default (metrics.max_partition_series)."""

FIRST_EVALUATION_WITHIN = 900
"""Seconds the benchmark waits for the daemon's first evaluation to end before it gives up."""


def _log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def tree(root: int) -> list[int]:
    """`root` and its live descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def memory_mb(root: int) -> dict[str, float]:
    """The sum of RSS and of PSS over `root`'s tree, and of the largest process's RSS, in MB."""
    rss = pss = largest = 0.0
    for pid in tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        own = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        rss += own / 1024
        largest = max(largest, own / 1024)
        pss += (
            next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0) / 1024
        )
    return {"rss": round(rss, 1), "pss": round(pss, 1), "largest_rss": round(largest, 1)}


class Cpu:
    """CPU seconds of the daemon's tree (Python, its children) and of PostgreSQL's."""

    def __init__(self, daemon: int, postmaster: int) -> None:
        self.daemon, self.postmaster = daemon, postmaster
        self.first = self.read()

    def read(self) -> dict[str, float]:
        own, children = cpu_seconds(self.daemon)
        pg_own, pg_children = cpu_seconds(self.postmaster)
        return {"python": own, "jvm": children, "postgres": pg_own + pg_children, "at": time.monotonic()}

    @staticmethod
    def between(first: dict[str, float], last: dict[str, float], per_minute: bool) -> dict[str, float]:
        scale = 60 / (last["at"] - first["at"]) if per_minute else 1.0
        spent = {k: round((last[k] - first[k]) * scale, 2) for k in ("python", "jvm", "postgres")}
        spent["daemon"] = round(spent["python"] + spent["jvm"], 2)
        spent["total"] = round(spent["daemon"] + spent["postgres"], 2)
        return spent


class Load(threading.Thread):
    """A steady produce rate over every partition, and every group committing every 10 s on its
    partitions a few records short of what was produced."""

    def __init__(self, bootstrap: str, workload: Workload, rate: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.workload, self.rate = bootstrap, workload, rate
        self.stopping = threading.Event()
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 50})
        self.consumers = {
            group: Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
            for group in workload.commits
        }

    def run(self) -> None:
        partitions = self.workload.partitions
        rng = random.Random(3)
        tick, next_commit, sent = 0.1, time.monotonic() + EVERY["commit"], 0
        while not self.stopping.wait(tick):
            for _ in range(max(1, int(self.rate * tick))):
                tp = partitions[sent % len(partitions)]
                self.producer.produce(tp[0], value=VALUE, partition=tp[1])
                self.workload.records[tp] += 1
                sent += 1
            self.producer.poll(0)
            if time.monotonic() >= next_commit:
                next_commit += EVERY["commit"]
                for group, offsets in self.workload.commits.items():
                    for tp in offsets:
                        offsets[tp] = max(offsets[tp], self.workload.records[tp] - rng.randint(2, 6))
                    wanted = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
                    with contextlib.suppress(KafkaException):
                        self.consumers[group].commit(offsets=wanted, asynchronous=False)
        self.producer.flush(10)
        for consumer in self.consumers.values():
            consumer.close()


def group_lag(client: httpx.Client, group: str) -> list[dict[str, Any]]:
    """The group's lag per partition through the API; none while the daemon does not answer."""
    try:
        answer = client.get(f"/api/v1/clusters/{CLUSTER}/groups/{group}/lag", params={"limit": 1000})
    except httpx.HTTPError:
        return []
    return list(answer.json().get("items", [])) if answer.status_code == 200 else []


def lag_series(client: httpx.Client) -> int:
    """The group-partition lag series of the cluster in one scrape; 0 while it does not answer."""
    try:
        answer = client.get("/metrics")
    except httpx.HTTPError:
        return 0
    if answer.status_code != 200:
        return 0
    mark = f'cluster="{CLUSTER}"'
    return sum(1 for line in answer.text.splitlines() if line.startswith(LAG_SERIES) and mark in line)


def wait_complete(base: str, workload: Workload, daemon: subprocess.Popen[bytes], cpu: Cpu) -> dict[str, Any]:
    """Poll the API and /metrics (each in a thread of its own) until every group-partition shows;
    the seconds from the process start and the CPU spent to each point."""
    started = cpu.first
    expected = sum(map(len, workload.commits.values()))
    points: dict[str, dict[str, Any]] = {}

    passes: list[list[float]] = []

    def api() -> None:
        missing = set(workload.commits)
        with httpx.Client(base_url=base, timeout=30) as client:
            while missing and daemon.poll() is None:
                began = time.monotonic() - started["at"]
                for group in sorted(missing):
                    items = group_lag(client, group)
                    if len(items) == len(workload.commits[group]) and all(
                        i["offset_lag"] is not None for i in items
                    ):
                        missing.discard(group)
                passes.append([round(began, 2), round(time.monotonic() - started["at"], 2), len(missing)])
                if missing:
                    time.sleep(0.25)
        points["api"] = cpu.read()

    def metrics() -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while daemon.poll() is None:
                if lag_series(client) >= expected:
                    break
                time.sleep(0.5)
        points["metrics"] = cpu.read()

    threads = [threading.Thread(target=api, daemon=True), threading.Thread(target=metrics, daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # joined a second at a time, so that SIGTERM is heard
            thread.join(1)
    if daemon.poll() is not None:
        raise SystemExit("the daemon stopped before answering; see its log")
    complete: dict[str, Any] = {
        name: {"seconds": round(point["at"] - started["at"], 2), "cpu": Cpu.between(started, point, False)}
        for name, point in points.items()
    }
    # Each pass of the API poller over the groups still missing: [began, ended, missing after it],
    # in seconds from the start; where the time between the first answer and the complete one went.
    complete["api_passes"] = [p for p in passes if p[2] < len(workload.commits)] or passes[-1:]
    if complete["api_passes"]:
        complete["api_first_group"] = {"seconds": complete["api_passes"][0][1]}
    return complete


def steady(base: str, workload: Workload, daemon: int, cpu: Cpu, seconds: int) -> dict[str, Any]:
    """CPU per minute, memory and the age of the lag served over `seconds` of steady state."""
    group = sorted(workload.commits)[0]
    ages: list[float] = []
    samples: list[dict[str, float]] = []
    first = cpu.read()
    end = first["at"] + seconds
    next_scrape = next_read = next_sample = first["at"]
    with httpx.Client(base_url=base, timeout=30) as client:
        while (now := time.monotonic()) < end:
            if now >= next_scrape:
                lag_series(client)
                next_scrape += EVERY["scrape"]
            if now >= next_read:
                items = group_lag(client, group)
                served = [
                    datetime.fromisoformat(i["offset_lag_as_of"]) for i in items if i["offset_lag_as_of"]
                ]
                if served:
                    ages.append((datetime.now(UTC) - min(served)).total_seconds())
                next_read += EVERY["read"]
            if now >= next_sample:
                samples.append(memory_mb(daemon))
                next_sample += EVERY["sample"]
            time.sleep(max(0.0, min(next_scrape, next_read, next_sample, end) - time.monotonic()))
    last = cpu.read()
    return {
        "cpu_per_minute": Cpu.between(first, last, True),
        "memory_mb": {
            "rss_max": max(s["rss"] for s in samples),
            "rss_last": samples[-1]["rss"],
            "pss_max": max(s["pss"] for s in samples),
            "pss_last": samples[-1]["pss"],
            "largest_rss_max": max(s["largest_rss"] for s in samples),
        },
        "lag_age_seconds": {
            "median": round(statistics.median(ages), 1) if ages else None,
            "max": round(max(ages), 1) if ages else None,
        },
    }


def first_evaluation(engine: Engine, since: datetime) -> float | None:
    """Seconds from `since` to the end of the first evaluation that ended well."""
    with engine.connect() as conn:
        ended = conn.execute(
            text(
                "SELECT min(finished_at) FROM collection_runs WHERE job = 'evaluate' "
                "AND status IN ('ok', 'partial') AND started_at >= :since"
            ),
            {"since": since},
        ).scalar_one()
    return None if ended is None else round((ended - since).total_seconds(), 1)


def wait_first_evaluation(engine: Engine, since: datetime, daemon: subprocess.Popen[bytes]) -> float:
    """Seconds from `since` to the end of the first evaluation, waited for: the steady window
    starts after it (a start answers the lag before Spark is up; the steady state is later)."""
    deadline = time.monotonic() + FIRST_EVALUATION_WITHIN
    while (first := first_evaluation(engine, since)) is None:
        if daemon.poll() is not None:
            raise SystemExit("the daemon stopped before its first evaluation; see its log")
        if time.monotonic() > deadline:
            raise SystemExit(f"no evaluation ended within {FIRST_EVALUATION_WITHIN} s; see the daemon's log")
        time.sleep(1)
    return first


def partition_level_series(group_partitions: int, partitions: int) -> int:
    """The partition-level series `/metrics` can have for a fleet: each value column of the
    group-partition and partition queries for each of their rows."""
    return group_partitions * len(GROUP_PARTITION.value_columns) + partitions * len(PARTITION.value_columns)


def daemon_config(work: Path, url: str, bootstrap: str, web_port: int, extra: dict[str, Any]) -> Path:
    routing = work / "routing.yaml"
    routing.write_text(
        yaml.safe_dump(
            {
                "receivers": [{"name": "file", "console": {"path": str(work / "alerts.jsonl")}}],
                "route": {"receiver": "file"},
            }
        )
    )
    config: dict[str, Any] = {
        "clusters": [{"name": CLUSTER, "bootstrap_servers": bootstrap.split(",")}],
        "alert": {"routing_file": str(routing), "owners_file": None},
        "retention": {"enabled": False},
        "web": {"port": web_port},
        "log_level": "INFO",
    }
    for section, values in extra.items():
        config.setdefault(section, {}).update(values)
    path = work / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def setup(args: argparse.Namespace, cluster: DevKafkaCluster, admin_url: str) -> tuple[str, Workload]:
    rng = random.Random(args.seed)
    name = "kh_bench_footprint"
    postgres.drop_database(admin_url, name)
    postgres.create_database(admin_url, name)
    url = database_url(admin_url, name)
    migrate.upgrade(url)
    workload = setup_load.plan_workload(args.partitions, args.groups, rng, PER_GROUP)
    bootstrap = cluster.bootstrap_servers
    setup_load.create_topics(bootstrap, workload.topics)
    setup_load.produce(bootstrap, workload, [(tp, 0, n) for tp, n in workload.records.items()])
    setup_load.commit_groups(bootstrap, workload.commits, 16)
    return url, workload


def measure(
    args: argparse.Namespace, url: str, workload: Workload, bootstrap: str, postmaster: int
) -> dict[str, Any]:
    work = var_dir() / "bench" / "footprint"
    work.mkdir(parents=True, exist_ok=True)
    spark: dict[str, Any] = {"driver_memory": args.driver_memory} if args.driver_memory else {}
    if args.spark_conf:
        spark["conf"] = dict(item.split("=", 1) for item in args.spark_conf)
    extra: dict[str, Any] = {"spark": spark} if spark else {}
    series = partition_level_series(args.groups * PER_GROUP, args.partitions)
    if series > DEFAULT_PARTITION_SERIES:
        # What the daemon's warning tells an operator of such a fleet to do: the complete answer
        # is a series for every group-partition, which the default cap leaves out.
        extra["metrics"] = {"max_partition_series": series}
    config = daemon_config(work, url, bootstrap, args.web_port, extra)
    load = Load(bootstrap, workload, args.produce_rate)
    load.start()
    engine = make_engine(url)
    started_at = datetime.now(UTC)
    base = f"http://127.0.0.1:{args.web_port}"
    daemon = start_daemon(config, url, work / "daemon.log")
    cpu = Cpu(daemon.pid, postmaster)
    try:
        _log("the daemon starts; waiting for a complete answer through the API and /metrics")
        result: dict[str, Any] = {"complete": wait_complete(base, workload, daemon, cpu)}
        result["memory_at_complete_mb"] = memory_mb(daemon.pid)
        _log(f"complete: {result['complete']}; waiting for the first evaluation")
        first = wait_first_evaluation(engine, started_at, daemon)
        _log(f"first evaluation {first} s after the start; settling {args.settle} s, steady {args.steady} s")
        time.sleep(args.settle)
        since = datetime.now(UTC)
        result["steady"] = steady(base, workload, daemon.pid, cpu, args.steady)
        durations = evaluation_seconds(engine, since)
        result["steady"]["evaluations"] = len(durations)
        result["steady"]["evaluation_median_seconds"] = (
            round(statistics.median(durations), 2) if durations else None
        )
        result["first_evaluation_seconds"] = first_evaluation(engine, started_at)
        found = jvm(daemon.pid)
        result["jvm_options"] = found[1] if found else ""
        result["heap_mb"] = heap_mb(found[0]) if found else {}
        return result
    finally:
        load.stopping.set()
        daemon.terminate()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        load.join(30)
        engine.dispose()


def jvm(root: int) -> tuple[int, str] | None:
    """The Spark JVM in `root`'s tree: its pid and heap and GC options, as started."""
    for pid in tree(root):
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if words and words[0].endswith(b"java"):
            return pid, " ".join(w.decode() for w in words if w.startswith((b"-X", b"-XX")))
    return None


def heap_mb(pid: int) -> dict[str, float]:
    """The JVM's heap in use and committed (`jcmd PID GC.heap_info`), in MB; empty without jcmd."""
    try:
        out = subprocess.run(
            ["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    # G1 gives the whole heap ("garbage-first heap total ...K, used ...K"); the parallel collector
    # each generation ("PSYoungGen total ...K, used ...K", "ParOldGen ..."), the serial one too
    # ("def new generation total ...K, used ...K", "tenured generation ...").
    found = re.findall(r"(heap|Gen|generation)\s+total (\d+)K, used (\d+)K", out)
    parts = [f for f in found if f[0] == "heap"] or found
    if not parts:
        return {}
    return {
        "committed": round(sum(int(f[1]) for f in parts) / 1024, 1),
        "used": round(sum(int(f[2]) for f in parts) / 1024, 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = var_dir() / "bench" / "kafka-footprint"
    cluster = DevKafkaCluster(
        DevKafkaConfig(nodes=1, base_port=args.kafka_port, heap_mb=1024), home, cache_dir()
    )
    server = postgres.LocalPostgres(var_dir() / "bench" / "postgres-footprint", args.pg_port, log=_log)
    result: dict[str, Any] = {"label": args.label, "loadavg_before": [round(v, 2) for v in os.getloadavg()]}
    result["commit"] = code_commit()  # the code measured: taken at the start, as the daemon imports it
    cluster.down(purge=True)
    server.up()
    try:
        cluster.up(report=lambda m: _log(f"  {m}"))
        url, workload = setup(args, cluster, server.url("postgres"))
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        result.update(measure(args, url, workload, cluster.bootstrap_servers, postmaster))
    finally:
        cluster.down(purge=True)
        server.down()
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    result.update(
        partitions=args.partitions,
        groups=args.groups,
        group_partitions=args.groups * PER_GROUP,
        produce_rate=args.produce_rate,
        settle_seconds=args.settle,
        steady_seconds=args.steady,
        loadavg_after=[round(v, 2) for v in os.getloadavg()],
        machine=f"{platform.node()} ({os.cpu_count()} CPUs, {memory_gb:.1f} GB)",
        measured_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    return result


METHOD = """## The method

`bench/footprint.py` starts a private 1-node Kafka 4 cluster and PostgreSQL, creates the topics
(100 partitions each, 5-20 records per partition), has every group commit on its 200 partitions
(half caught up, half lagging), then starts `kafka-health run` as a child process with the
shipped rule pack and the default intervals (offsets every 15 s, evaluation every 30 s), alerts
written to a file. From then on one producer writes 500 records a second round-robin over every
partition and every group commits every 10 s a few records short of the end. The clock starts
when the process is started. "Complete" is the first moment every group's
`/api/v1/clusters/{c}/groups/{g}/lag` lists all 200 partitions with an offset lag, and `/metrics`
has a `kafka_consumer_group_lag_in_offsets` series for each of the 10,000 group-partitions (two
pollers, one each). The steady window starts `--settle` seconds after the first evaluation
ended (runs before 2026-12-01 07:00 UTC: after the complete answers, which came after the first
evaluation then). CPU-seconds are user + system time from /proc of the daemon's Python process,
of its live children (the Spark JVM) and of the PostgreSQL postmaster's tree (every backend,
the checkpointer, autovacuum), taken at the start, at each complete answer and over the steady
window; resident memory is the sum of VmRSS (and of Pss from smaps_rollup) over the daemon's
tree, sampled every 5 s. The age of the lag served is now minus the oldest `offset_lag_as_of` of
one group's answer, read every 10 s. The benchmark's own producer, consumers and pollers are in
its own process and not counted; everything shares the machine's CPUs with whatever else runs,
which is why each run gives the load average (1 minute) at its start and end."""


def at(run: dict[str, Any], path: str) -> Any:
    """The figure at `path` (keys joined by dots) in `run`; `-` where the run has none."""
    value: Any = run
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return "-"
        value = value[key]
    return "-" if value is None else value


def report(document: dict[str, Any]) -> str:
    """One section per fleet size (its runs in the order measured, the newest size first), each
    with that size's targets (bench/summary.FOOTPRINT_TARGETS), then the notes and the method."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for run in document["runs"]:
        by_size.setdefault(int(run["group_partitions"]), []).append(run)
    newest = int(document["runs"][-1]["group_partitions"])
    sizes = [newest, *(size for size in by_size if size != newest)]
    lines = ["# The whole daemon's footprint\n"]
    for size in sizes:
        lines += _size_table(by_size[size])
    notes = [f"- `{r['label']}`: {r['note']}" for r in document["runs"] if r.get("note")]
    lines += [*(["Notes on the runs:", "", *notes, ""] if notes else []), METHOD]
    return "\n".join(lines) + "\n"


def _size_table(runs: list[dict[str, Any]]) -> list[str]:
    """The table of the runs of one fleet size, with its targets."""
    last = runs[-1]
    api, cpu, rss, age = FOOTPRINT_TARGETS.get(int(last["group_partitions"]), (None, None, None, None))
    pg_limit = FOOTPRINT_POSTGRES_LIMIT.get(int(last["group_partitions"]))
    head = ["figure", *(f"{r['label']} ({r['measured_at']}, load {r['loadavg_before'][0]:.1f} -> "
                        f"{r['loadavg_after'][0]:.1f}, {r['commit']})" for r in runs), "target"]  # fmt: skip
    lines = [
        f"## At {last['group_partitions']:,} group-partitions\n",
        f"{last['partitions']:,} partitions, {last['groups']} groups of {PER_GROUP} partitions, "
        f"{last['produce_rate']} records/s produced, every group committing every "
        f"{EVERY['commit']:g} s; {last['machine']}. In the steady window `/metrics` is scraped every "
        f"{EVERY['scrape']:g} s.\n",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]

    def row(name: str, cells: str, target: float | None = None) -> None:
        """`cells` names one figure or two (`a / b`), each a path of keys into a run."""
        values = [" / ".join(str(at(r, path)) for path in cells.split(" / ")) for r in runs]
        limit = "" if target is None else f"<= {target:,g}"
        lines.append(f"| {name} | " + " | ".join(values) + f" | {limit} |")

    row("start -> complete lag through the API, s", "complete.api.seconds", api)
    row("start -> the first group's complete lag through the API, s", "complete.api_first_group.seconds")
    row("start -> complete lag through /metrics, s", "complete.metrics.seconds")
    row("start -> first evaluation done, s", "first_evaluation_seconds")
    row("CPU-s to the complete API answer, daemon / PostgreSQL",
        "complete.api.cpu.daemon / complete.api.cpu.postgres")  # fmt: skip
    row("CPU-s to the complete /metrics answer, daemon / PostgreSQL",
        "complete.metrics.cpu.daemon / complete.metrics.cpu.postgres")  # fmt: skip
    row("settling after the complete answer / steady window, s", "settle_seconds / steady_seconds")
    row("steady CPU-s per minute, daemon and PostgreSQL", "steady.cpu_per_minute.total", cpu)
    for part in ("python", "jvm", "postgres"):
        row(f"  of which {part}", f"steady.cpu_per_minute.{part}", pg_limit if part == "postgres" else None)
    row("resident, daemon tree RSS MB (largest sample)", "steady.memory_mb.rss_max", rss)
    row("  PSS MB (largest sample)", "steady.memory_mb.pss_max")
    row("  the JVM's RSS MB (largest sample)", "steady.memory_mb.largest_rss_max")
    row("RSS MB at the complete answer", "memory_at_complete_mb.rss")
    row("age of the lag served, median / max s",
        "steady.lag_age_seconds.median / steady.lag_age_seconds.max", age)  # fmt: skip
    row("evaluations in the steady window / median s",
        "steady.evaluations / steady.evaluation_median_seconds")  # fmt: skip
    row("the JVM's heap at the end, used / committed MB", "heap_mb.used / heap_mb.committed")
    row("Spark JVM options", "jvm_options")
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1000, help="partitions, in topics of 100 (1000)")
    parser.add_argument("--groups", type=int, default=50, help=f"groups of {PER_GROUP} partitions each (50)")
    parser.add_argument("--produce-rate", type=int, default=500, help="records per second (500)")
    parser.add_argument(
        "--settle", type=int, default=840, help="seconds after the first evaluation, the window filling (840)"
    )
    parser.add_argument("--steady", type=int, default=180, help="seconds of steady measurement (180)")
    parser.add_argument(
        "--driver-memory", default=None, help="spark.driver_memory for the daemon (its default)"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a spark.conf entry of the daemon's configuration (repeatable)",
    )
    parser.add_argument("--label", default="run", help="the run's name in the report (run)")
    parser.add_argument("--kafka-port", type=int, default=59392, help="the broker's port (59392)")
    parser.add_argument("--pg-port", type=int, default=55477, help="PostgreSQL's port (55477)")
    parser.add_argument("--web-port", type=int, default=27395, help="the daemon's web port (27395)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.partitions % PARTITIONS_PER_TOPIC:
        parser.error(f"--partitions must be a multiple of {PARTITIONS_PER_TOPIC}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop what was started on the way out
    result = run(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "footprint.json"
    kept = json.loads(path.read_text())["runs"] if path.is_file() else []
    document = {"runs": [r for r in kept if r["label"] != args.label] + [result]}
    path.write_text(json.dumps(document, indent=2) + "\n")
    text = report(document)
    (RESULTS / "footprint.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
