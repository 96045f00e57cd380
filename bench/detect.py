"""Detection: how long from a fault to the alert firing and to the notification a receiver
accepts, beyond what the rule's `for:` asks for; and what the daemon costs while nothing happens.

    .venv/bin/python bench/detect.py                 # about 10 minutes
    .venv/bin/python bench/detect.py --idle 120      # seconds of idle measurement (default 180)
    .venv/bin/python bench/detect.py --settle 240    # seconds of running before it (default 180)

What it runs, all real and local:
- a 3-node Kafka 4 cluster (KRaft, the project's dev cluster on ports 48092-48094, data under
  var/bench/kafka-detect) and a private PostgreSQL on 127.0.0.1:55487;
- the daemon as `kafka-health run` in its own process, with the shipped rule pack, the demo's
  collection intervals (metadata 15 s, log dirs 30 s, offsets 15 s; evaluation every 30 s) and
  a routing file that sends every alert (no inhibition, group_wait 0s) to a webhook receiver
  served by this process, which records when each notice arrived;
- a workload made for the faults: `detect-offline` (one replica, on broker 3), `detect-minisr`
  (replicas on brokers 3 and 1, min.insync.replicas 2), `detect-loss` (retention 20 s, 2 s
  segments, made and written to when the faults start) read by the group `detect-lagger`, which
  committed offset 0 and never reads again, and `detect-ok`, a healthy topic with 3 replicas.

The run:
1. start everything; wait for the daemon's first evaluation and then `--settle` seconds (a
   daemon runs for days: its JVM compiles the code an evaluation runs in its first minutes, and
   that is not what it costs at idle); then measure the idle phase for `--idle` seconds: the CPU
   seconds per minute of the daemon's Python process and of its children (the Spark JVM), and
   the duration of each evaluation run (collection_runs, job 'evaluate'), and each evaluation's
   duration by the daemon's age (`by_age`);
2. faults: broker 3 stops (BrokerDown; `detect-offline` goes offline: PartitionOffline;
   `detect-minisr` goes under min ISR: PartitionUnderMinIsr), and retention deletes what
   `detect-lagger` had not read (DataLossOccurred; its fault time is when this process first sees
   the log start offset pass the committed offset). For each rule: fault -> firing (first seen in
   the alerts table, polled every 0.5 s: a notice can arrive before the poll that sees its alert
   firing) and fault -> notice accepted by the webhook, each also minus the rule's `for:`.

Prints Markdown on stdout (progress on stderr) and writes bench/results/detect.md and .json.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from pytest_httpserver import HTTPServer
from sqlalchemy import Engine, text
from werkzeug import Request, Response

import monitor
from monitor.core.settings import DevKafkaConfig
from monitor.devtools import postgres
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.paths import cache_dir, var_dir
from monitor.evaluate.rules import load_rules, rule_files
from monitor.store import migrate
from monitor.store.engine import make_engine

BENCH_PG_PORT = 55487
KAFKA_PORT = 48092
CLUSTER = "detect"
RULES = ("BrokerDown", "PartitionOffline", "PartitionUnderMinIsr", "DataLossOccurred")
RESULTS = Path(__file__).parent / "results"


def _log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def rule_for_seconds(rule: str) -> int:
    """The `for:` of `rule` in the shipped pack."""
    for spec in load_rules(rule_files(None)).rules:
        if spec.name == rule:
            return spec.for_seconds
    raise SystemExit(f"rule {rule} is not in alert_rules/")


def spark_jvm_pid() -> int:
    """The process id of this process's Spark JVM (local mode: a descendant started by PySpark,
    the one running SparkSubmit), found in /proc rather than asked of the JVM through PySpark."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    todo = [child for child, parent in parents.items() if parent == os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in command:
            return pid
        todo += [child for child, parent in parents.items() if parent == pid]
    raise RuntimeError("no Spark JVM among this process's descendants: start the session first")


def cpu_seconds(root: int) -> tuple[float, float]:
    """User + system CPU seconds of `root`, and of its descendants: the live ones, and the children
    it reaped (a PostgreSQL postmaster reaps each backend whose connection closed: without them a
    window in which a busy backend ended would count less than nothing)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    reaped = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
        if int(entry.name) == root:
            reaped = (int(fields[13]) + int(fields[14])) / tick
    children, todo = reaped, [child for child, parent in parents.items() if parent == root]
    while todo:
        pid = todo.pop()
        children += times.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return times.get(root, 0.0), children


def start_daemon(config: Path, url: str, log: Path) -> subprocess.Popen[bytes]:
    """`kafka-health run --config CONFIG` on the database at `url`, its output into `log`.

    The package's bytecode is written first, as an installed package has it (pip compiles what
    it installs; the image's does): this checkout is an editable install, and where the
    environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE) every start would compile
    its 270-odd modules again, about 0.4 CPU-s before the daemon answers."""
    compileall.compile_dir(str(Path(monitor.__file__).parent), quiet=1)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            env={**os.environ, "DATABASE_URL": url},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic("detect-offline", num_partitions=1, replica_assignment=[[3]]),
        NewTopic(
            "detect-minisr", num_partitions=1, replica_assignment=[[3, 1]],
            config={"min.insync.replicas": "2"},
        ),
        NewTopic("detect-ok", num_partitions=3, replication_factor=3),
    ]  # fmt: skip
    for future in admin.create_topics(topics).values():
        future.result(30)


def create_loss_topic(bootstrap: str) -> None:
    """`detect-loss`: 20 s of retention in 2 s segments."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(
        "detect-loss", num_partitions=1, replication_factor=3,
        config={"retention.ms": "20000", "segment.ms": "2000"},
    )  # fmt: skip
    for future in admin.create_topics([topic]).values():
        future.result(30)


def commit_zero(bootstrap: str) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "detect-lagger", "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition("detect-loss", 0, 0)], asynchronous=False)
    finally:
        consumer.close()


class Writer(threading.Thread):
    """Writes to detect-loss, 50 records a second, until stopped."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
        self.stopping = threading.Event()

    def run(self) -> None:
        payload = b"x" * 512
        while not self.stopping.wait(0.02):
            for topic in ("detect-loss",):
                with contextlib.suppress(BufferError):
                    self.producer.produce(topic, payload)
            self.producer.poll(0)
        self.producer.flush(5)


def log_start(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "detect-probe-watermarks"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition("detect-loss", 0), timeout=5)
        return int(low)
    finally:
        consumer.close()


def firing_rules(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT DISTINCT rule FROM alerts WHERE state = 'firing' AND cluster = :c"), {"c": CLUSTER}
        )
        return {str(r[0]) for r in rows}


def evaluation_seconds(engine: Engine, since: datetime) -> list[float]:
    return [seconds for _, seconds in evaluation_runs(engine, since)]


def evaluation_runs(engine: Engine, since: datetime) -> list[tuple[datetime, float]]:
    """(start, duration in seconds) of each evaluation that ended since `since`, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT started_at, extract(epoch FROM finished_at - started_at) FROM collection_runs "
                "WHERE job = 'evaluate' AND status IN ('ok', 'partial') AND started_at >= :since "
                "AND finished_at IS NOT NULL ORDER BY started_at"
            ),
            {"since": since},
        )
        return [(r[0], float(r[1])) for r in rows]


AGE_SPAN = 600
"""The daemon's age per row of the report's evaluations by age, in seconds."""


def by_age(runs: list[tuple[datetime, float]], started: datetime) -> list[dict[str, Any]]:
    """The evaluations' median duration per AGE_SPAN of the daemon's age (from `started`): the
    JVM compiles the code an evaluation runs over its first tens of evaluations, so the duration
    falls with the age."""
    spans: dict[int, list[float]] = {}
    for at, seconds in runs:
        spans.setdefault(int((at - started).total_seconds() // AGE_SPAN), []).append(seconds)
    return [
        {
            "from_seconds": span * AGE_SPAN,
            "to_seconds": (span + 1) * AGE_SPAN,
            "evaluations": len(values),
            "median_seconds": round(statistics.median(values), 2),
        }
        for span, values in sorted(spans.items())
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = var_dir() / "bench" / "kafka-detect"
    kafka = DevKafkaCluster(DevKafkaConfig(nodes=3, base_port=KAFKA_PORT), home, cache_dir())
    database = postgres.LocalPostgres(var_dir() / "bench" / "postgres-detect", BENCH_PG_PORT, log=_log)
    notices: list[tuple[float, dict[str, Any]]] = []
    webhook = HTTPServer(host="127.0.0.1", port=0, threaded=True)

    def hook(request: Request) -> Response:
        notices.append((time.monotonic(), json.loads(request.get_data())))
        return Response("", status=200)

    webhook.expect_request("/notify", method="POST").respond_with_handler(hook)
    daemon: subprocess.Popen[bytes] | None = None
    writer: Writer | None = None
    work = var_dir() / "bench" / "detect"
    work.mkdir(parents=True, exist_ok=True)
    try:
        _log("starting PostgreSQL and a 3-node Kafka cluster")
        kafka.down(purge=True)
        kafka.up(report=_log)
        database.up()
        admin_url = database.url("postgres")
        postgres.drop_database(admin_url, "kh_bench_detect")
        postgres.create_database(admin_url, "kh_bench_detect")
        url = database.url("kh_bench_detect")
        migrate.upgrade(url)
        engine = make_engine(url)
        webhook.start()
        create_topics(kafka.bootstrap_servers)

        routing = work / "routing.yaml"
        routing.write_text(
            yaml.safe_dump(
                {
                    "receivers": [
                        {"name": "bench", "webhook": {"url": webhook.url_for("/notify"), "timeout": 5}}
                    ],
                    "route": {"receiver": "bench", "group_by": ["cluster", "rule"], "group_wait": "0s"},
                }
            )
        )
        config = {
            "clusters": [{"name": CLUSTER, "bootstrap_servers": kafka.bootstrap_servers.split(",")}],
            "intervals": {"metadata_seconds": 15, "log_dirs_seconds": 30},
            "alert": {"routing_file": str(routing), "owners_file": None},
            "retention": {"enabled": False},
            "web": {"port": args.web_port},
            "log_level": "INFO",
        }
        config_path = work / "monitor.yaml"
        config_path.write_text(yaml.safe_dump(config))
        _log("starting the daemon")
        started = datetime.now(UTC)
        daemon = start_daemon(config_path, url, work / "daemon.log")
        deadline = time.monotonic() + 300
        while not evaluation_seconds(engine, started):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not evaluate; see {work / 'daemon.log'}")
            time.sleep(1)
        _log(f"first evaluation done; settling for {args.settle} s, then idle for {args.idle} s")
        time.sleep(args.settle)
        idle_from = datetime.now(UTC)
        (own0, jvm0), t0 = cpu_seconds(daemon.pid), time.monotonic()
        time.sleep(args.idle)
        (own1, jvm1), t1 = cpu_seconds(daemon.pid), time.monotonic()
        per_minute = 60 / (t1 - t0)
        runs = evaluation_runs(engine, started)
        evaluations = [seconds for at, seconds in runs if at >= idle_from]
        ages = by_age(runs, started)
        noticed_before = {n["alerts"][0]["rule"] for _, n in notices if n.get("alerts")}

        _log("faults: detect-lagger falls behind a 20 s retention; broker 3 stops")
        create_loss_topic(kafka.bootstrap_servers)
        commit_zero(kafka.bootstrap_servers)
        writer = Writer(kafka.bootstrap_servers)
        writer.start()
        faults: dict[str, float] = {}
        stopped = time.monotonic()
        kafka.stop_node(3)
        for rule in ("BrokerDown", "PartitionOffline", "PartitionUnderMinIsr"):
            faults[rule] = stopped
        firing: dict[str, float] = {}
        told: dict[str, float] = {}
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and (len(firing) < len(RULES) or len(told) < len(RULES)):
            now = time.monotonic()
            if "DataLossOccurred" not in faults and log_start(kafka.bootstrap_servers) > 0:
                faults["DataLossOccurred"] = now
            for rule in firing_rules(engine) & set(RULES):
                if rule in faults:
                    firing.setdefault(rule, now)
            for at, notice in list(notices):
                if notice.get("kind") not in ("firing", "repeat", "escalation"):
                    continue
                for alert in notice.get("alerts", []):
                    rule = alert.get("rule")
                    if rule in faults and alert.get("state") == "firing" and at >= faults[rule]:
                        told.setdefault(rule, at)
            time.sleep(0.5)
        rows = []
        for rule in RULES:
            wait = rule_for_seconds(rule)
            fault = faults.get(rule)
            fire = firing.get(rule)
            tell = told.get(rule)
            rows.append(
                {
                    "rule": rule,
                    "for_seconds": wait,
                    "to_firing": None if fault is None or fire is None else round(fire - fault, 1),
                    "to_notice": None if fault is None or tell is None else round(tell - fault, 1),
                    "told_before_fault": rule in noticed_before,
                }
            )
        return {
            "date": f"{datetime.now(UTC):%Y-%m-%d}",
            "machine": f"{platform.node()} ({os.cpu_count()} cores)",
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "settle_seconds": args.settle,
            "idle_seconds": args.idle,
            "idle_cpu_seconds_per_minute": round((own1 - own0 + jvm1 - jvm0) * per_minute, 2),
            "idle_cpu_python_per_minute": round((own1 - own0) * per_minute, 2),
            "idle_cpu_jvm_per_minute": round((jvm1 - jvm0) * per_minute, 2),
            "evaluations": len(evaluations),
            "evaluation_median_seconds": round(statistics.median(evaluations), 2) if evaluations else None,
            "evaluation_p95_seconds": (
                round(statistics.quantiles(evaluations, n=20)[18], 2) if len(evaluations) >= 2 else None
            ),
            "evaluations_by_age": ages,
            "rules": rows,
        }
    finally:
        if writer is not None:
            writer.stopping.set()
        if daemon is not None and daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(60)
            except subprocess.TimeoutExpired:
                daemon.kill()
        if webhook.is_running():
            webhook.stop()
        kafka.down(purge=True)
        if not args.keep_database:
            database.down()


def markdown(result: dict[str, Any]) -> str:
    def seconds(value: float | None) -> str:
        return "not seen" if value is None else f"{value:.1f} s"

    def beyond(value: float | None, wait: int) -> str:
        return "-" if value is None else f"{value - wait:+.1f} s"

    lines = [
        f"Detection benchmark, {result['date']}, {result['machine']}, load average at the end "
        f"{result['load_average']}.",
        "",
        f"Idle ({result['idle_seconds']} s after {result.get('settle_seconds', 0)} s of running, 4 topics, "
        f"3 brokers): daemon and its Spark JVM {result['idle_cpu_seconds_per_minute']} CPU-s per minute "
        f"(Python {result.get('idle_cpu_python_per_minute', '-')}, "
        f"JVM {result.get('idle_cpu_jvm_per_minute', '-')}); "
        f"{result['evaluations']} evaluations, "
        f"median {result['evaluation_median_seconds']} s, p95 {result['evaluation_p95_seconds']} s.",
        "",
    ]
    if result.get("evaluations_by_age"):
        lines += [
            "Evaluations by the daemon's age (from its start to the faults):",
            "",
            "| daemon's age | evaluations | median |",
            "|---|---:|---:|",
            *(
                f"| {age['from_seconds']}-{age['to_seconds']} s | {age['evaluations']} "
                f"| {age['median_seconds']:.2f} s |"
                for age in result["evaluations_by_age"]
            ),
            "",
        ]
    lines += [
        "| rule | for: | fault -> firing | beyond for: | fault -> notice accepted | beyond for: |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["rules"]:
        wait = row["for_seconds"]
        lines.append(
            f"| {row['rule']} | {wait} s | {seconds(row['to_firing'])} | {beyond(row['to_firing'], wait)} | "
            f"{seconds(row['to_notice'])} | {beyond(row['to_notice'], wait)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=int, default=180, help="seconds of idle measurement")
    parser.add_argument(
        "--settle", type=int, default=180, help="seconds of running after the first evaluation, before idle"
    )
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for every rule")
    parser.add_argument("--web-port", type=int, default=18085)
    parser.add_argument("--keep-database", action="store_true", help="leave PostgreSQL running")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop what was started on the way out
    result = run(args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "detect.json").write_text(json.dumps(result, indent=2))
    text_out = markdown(result)
    (RESULTS / "detect.md").write_text(text_out)
    print(text_out)


if __name__ == "__main__":
    main()
