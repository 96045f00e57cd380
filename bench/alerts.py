"""The alert stage's speed: one cycle over many firing findings, the sender's throughput to real
local receivers, and the latency from a finding to a notification accepted by a receiver.

    .venv/bin/python bench/alerts.py                 # a private server under var/bench/postgres
    .venv/bin/python bench/alerts.py --url postgresql+psycopg://user@host/db --findings 10000

Without --url, a project-local PostgreSQL is started on 127.0.0.1:55463 (data under
var/bench/postgres) and stopped at the end if this script started it; a scratch database is
created, migrated and dropped afterwards.

1. Cycle: N firing findings (partition rules over 20 topics, half warning, half critical, on 4
   clusters) through `run_cycle` with the shipped routing (alert_rules/routing.yaml) and a memory
   kept between cycles, as the daemon runs them: the first cycle creates every alert and group,
   the second (30 s later) sends the first notices, the third is a steady cycle with nothing new,
   the fourth follows an evaluation of one of the 4 clusters (each value of its findings moved);
   then a steady cycle without a memory, which reads every open finding and alert (every cycle
   did before the memory). Each is one transaction, commit included.
2. Sender: M notifications to a webhook receiver and M to a PagerDuty receiver, both served by a
   local threaded HTTP server in another process (keep-alive), drained by one sender with the
   daemon's defaults (alert.sender_batch 200, alert.sender_concurrency 16); notifications per second.
3. Latency: a finding written, then the alert cycle and the sender, as the daemon's jobs run
   them (group_wait 0); the time until the receiver answered 202, median of 20.

Prints Markdown tables on stdout (and to bench/results/alerts.md, with the figures in alerts.json);
progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import queue
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.cycle import run_cycle
from monitor.alert.memory import CycleMemory
from monitor.alert.model import AlertView, Notification
from monitor.alert.notify.outbox import enqueue
from monitor.alert.notify.retry import RetryPolicy
from monitor.alert.notify.sender import Sender
from monitor.alert.render import Templates
from monitor.alert.stage import build_receivers
from monitor.core.clock import SystemClock
from monitor.core.settings import AlertConfig
from monitor.devtools import postgres
from monitor.devtools.paths import var_dir
from monitor.store import migrate
from monitor.store.changes import findings_of, raise_versions
from monitor.store.engine import make_engine, normalize_url

T = TypeVar("T")
BENCH_PORT = 55463
RESULTS = Path(__file__).resolve().parent / "results"
ROUTING_KEY = "B3NCHR0UT1NGKEY0123456789abcdefX"
T0 = datetime(2031, 6, 1, tzinfo=UTC)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Handler(BaseHTTPRequestHandler):
    """Answers like the webhook and PagerDuty endpoints; reports each arrival's monotonic time
    (system-wide on Linux) to the benchmark process."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real receivers offer
    arrivals: Any = None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        self.arrivals.put(time.monotonic())
        if self.path.startswith("/pagerduty"):
            event = json.loads(body)
            answer = json.dumps({"status": "success", "dedup_key": event.get("dedup_key")}).encode()
            self.send_response(202)
        else:
            answer = b"{}"
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _serve(port: Any, arrivals: Any) -> None:
    _Handler.arrivals = arrivals
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port.value = server.server_address[1]
    server.serve_forever()


class ReceiverProcess:
    """The local receivers in a process of their own, as remote receivers would be: they do not
    compete with the sender for this process's interpreter lock."""

    def __init__(self) -> None:
        self.arrivals: Any = multiprocessing.Queue()
        port: Any = multiprocessing.Value("i", 0)
        self._process = multiprocessing.Process(target=_serve, args=(port, self.arrivals), daemon=True)
        self._process.start()
        deadline = time.monotonic() + 10
        while not port.value and time.monotonic() < deadline:
            time.sleep(0.01)
        if not port.value:
            raise RuntimeError("the local receiver server did not start")
        self.port = int(port.value)

    def drain(self) -> list[float]:
        times = []
        while True:
            try:
                times.append(self.arrivals.get(timeout=0.2))
            except queue.Empty:
                return times

    def stop(self) -> None:
        self._process.terminate()
        self._process.join(5)


def _insert_findings(engine: Engine, count: int, at: datetime) -> None:
    rules = [("PartitionReplicaLost", "warning"), ("PartitionReplicasLost", "critical")]
    rows = []
    for n in range(count):
        rule, severity = rules[n % 2]
        cluster = f"cluster-{n % 4}"
        topic, partition = f"topic-{n % 20}", n // 20
        key = f"{cluster}/{topic}/{partition}"
        labels = {"cluster": cluster, "topic": topic, "partition": str(partition)}
        rows.append(
            {
                "rule": rule,
                "key": key,
                "cluster": cluster,
                "labels": json.dumps(labels),
                "severity": severity,
                "summary": f"{topic}[{partition}] on {cluster}: {rule}",
                "now": at,
            }
        )
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, annotations, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES (:rule, 'partition', :key, :cluster, CAST(:labels AS jsonb), :severity, 1, :summary,"
                " '', '{}'::jsonb, 0, 'firing', :now, :now, :now)"
            ),
            rows,
        )


def _reset(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE findings, alerts, alert_groups, acks, silences, notification_outbox,"
                " notification_log, change_versions"
            )
        )


def _reevaluate(engine: Engine, cluster: str, at: datetime) -> None:
    """The findings of `cluster` as a new evaluation's merge leaves them: every value moved (the
    lag of each), stamped, and the cluster's findings counter raised (monitor.store.changes)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE findings SET value = value + 1, last_seen = :t, evaluated_at = :t WHERE cluster = :c"
            ),
            {"c": cluster, "t": at},
        )
        raise_versions(conn, [findings_of(cluster)])


def bench_cycle(engine: Engine, findings: int) -> dict[str, Any]:
    """Cycles as the daemon runs them, with a memory (monitor.alert.memory): the first, the one
    that notifies, a steady one, one after an evaluation of one of the 4 clusters; then a steady
    one without a memory (every open finding and alert read, as before the memory)."""
    _reset(engine)
    routing = load_routing(*default_routing_paths())
    _insert_findings(engine, findings, T0)
    memory = CycleMemory()
    timings = []
    notifications = 0
    for step in range(5):
        at = T0 + timedelta(seconds=30 * step)
        if step == 3:
            _reevaluate(engine, "cluster-0", at)
        kept = memory if step < 4 else None
        started = time.perf_counter()
        with engine.begin() as conn:
            result = run_cycle(conn, routing, at, "http://x", kept)
        timings.append(time.perf_counter() - started)
        if kept is not None:
            kept.committed(result.alerts_version)
        notifications += len(result.notifications)
    return {"findings": findings, "first": timings[0], "notify": timings[1], "steady": timings[2],
            "one_cluster": timings[3], "steady_full": timings[4],
            "notifications": notifications}  # fmt: skip


def _routing_file(directory: Path, port: int) -> Path:
    path = directory / "bench-routing.yaml"
    path.write_text(
        f"""
receivers:
  - name: hook
    webhook: {{url: "http://127.0.0.1:{port}/hook", timeout: 5}}
  - name: pager
    pagerduty:
      routing_key_env: KH_BENCH_PD_KEY
      url: "http://127.0.0.1:{port}/pagerduty/v2/enqueue"
      timeout: 5
route:
  receiver: hook
  group_by: [cluster, rule]
  group_wait: 0s
  routes:
    - matchers: [severity=critical]
      receiver: pager
      continue: true
"""
    )
    return path


def _notification(n: int, receiver: str) -> Notification:
    alert = AlertView(
        fingerprint=f"fp{n}", rule="PartitionReplicasLost", severity="critical", state="firing", cluster="c",
        entity="partition", entity_key=f"c/t/{n}", labels={"cluster": "c", "topic": "t", "partition": str(n)},
        summary=f"t[{n}] lost two replicas", description="", value=2.0, annotations={}, starts_at=T0,
    )  # fmt: skip
    return Notification(
        receiver=receiver, kind="firing", severity="critical", group_key=f"g{n}",
        group_labels={"cluster": "c"}, dedup_key=f"bench-{receiver}-{n}", alerts=(alert,), created_at=T0,
    )  # fmt: skip


def bench_sender(engine: Engine, routing_path: Path, count: int) -> dict[str, Any]:
    _reset(engine)
    routing = load_routing(routing_path, None)
    receivers = build_receivers(routing, Templates("http://x"))
    clock = SystemClock()
    with engine.begin() as conn:
        for n in range(count):
            enqueue(conn, _notification(n, "hook"), clock.now())
            enqueue(conn, _notification(n, "pager"), clock.now())
    defaults = AlertConfig()
    sender = Sender(
        lambda: engine,
        lambda: receivers,
        clock,
        "bench",
        batch=defaults.sender_batch,
        concurrency=defaults.sender_concurrency,
        policy=RetryPolicy(),
    )
    try:
        started = time.perf_counter()
        counts = sender.drain(max_rounds=10_000)
        seconds = time.perf_counter() - started
    finally:
        sender.close()
    sent = counts.get("sent", 0)
    return {"notifications": 2 * count, "sent": sent, "seconds": seconds, "rate": sent / seconds}


def bench_latency(engine: Engine, routing_path: Path, rounds: int, server: ReceiverProcess) -> dict[str, Any]:
    routing = load_routing(routing_path, None)
    receivers = build_receivers(routing, Templates("http://x"))
    clock = SystemClock()
    sender = Sender(lambda: engine, lambda: receivers, clock, "bench", policy=RetryPolicy())
    latencies = []
    try:
        for n in range(rounds):
            _reset(engine)
            server.drain()
            started = time.monotonic()
            _insert_findings(engine, 1, clock.now())
            with engine.begin() as conn:
                run_cycle(conn, routing, clock.now(), "http://x")
            sender.drain()
            arrived = server.drain()
            if not arrived:
                raise RuntimeError(f"round {n}: the receiver got nothing")
            latencies.append(min(arrived) - started)
    finally:
        sender.close()
    return {"rounds": rounds, "median_ms": 1000 * statistics.median(latencies),
            "max_ms": 1000 * max(latencies)}  # fmt: skip


def memory_text() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _machine() -> str:
    memory = memory_text()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpus} CPU, {memory} RAM, {platform.system()} {platform.machine()}, Python "
            f"{platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M UTC}, load average {load:.1f} "
            "at the end")  # fmt: skip


def _save_json(
    cycles: list[dict[str, Any]], sending: dict[str, Any], latency: dict[str, Any], loadavg_start: float
) -> None:
    memory = memory_text()
    machine = {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory": memory, "system": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(), "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": loadavg_start, "loadavg_end": os.getloadavg()[0],
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    document = {"machine": machine, "cycles": cycles, "sender": sending, "latency": latency}
    (RESULTS / "alerts.json").write_text(json.dumps(document, indent=2) + "\n")


@contextmanager
def scratch_database(admin_url: str) -> Iterator[Engine]:
    """A new database on the server of `admin_url`, migrated; dropped afterwards."""
    name = f"kh_bench_{uuid.uuid4().hex[:8]}"
    postgres.create_database(admin_url, name)
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()
    finally:
        postgres.drop_database(admin_url, name)


def server_parser(doc: str | None, port: int) -> argparse.ArgumentParser:
    """A benchmark's arguments, starting with --url (an existing server) and --port (the local
    one's), as `on_server` takes them."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an existing server (its admin database); default: a local one")
    parser.add_argument("--port", type=int, default=port, help=f"the local server's port ({port})")
    return parser


def on_server(url: str | None, port: int, data: str, work: Callable[[str], T]) -> T:
    """`work(admin_url)` on the server at `url`, else on a project-local one (data under
    var/bench/`data`, on `port`), started for it and stopped afterwards if it was not running."""
    if url:
        return work(normalize_url(url))
    server = postgres.LocalPostgres(var_dir() / "bench" / data, port, log=_log)
    was_running = server.status()
    server.up()
    try:
        return work(server.url("postgres"))
    finally:
        if not was_running:
            server.down()


def bench(admin_url: str, findings: list[int], notifications: int, rounds: int) -> str:
    loadavg_start = os.getloadavg()[0]
    os.environ["KH_BENCH_PD_KEY"] = ROUTING_KEY
    server = ReceiverProcess()
    scratch = var_dir() / "bench"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        with scratch_database(admin_url) as engine:
            cycles = []
            for count in findings:
                _log(f"alert cycle over {count:,} firing findings")
                cycles.append(bench_cycle(engine, count))
            routing_path = _routing_file(scratch, server.port)
            _log(f"sender: {2 * notifications:,} notifications")
            sending = bench_sender(engine, routing_path, notifications)
            _log(f"latency: {rounds} rounds")
            latency = bench_latency(engine, routing_path, rounds, server)
    finally:
        server.stop()
    _save_json(cycles, sending, latency, loadavg_start)
    lines = [
        "## Alert stage",
        "",
        f"Machine: {_machine()}.",
        "",
        "| firing findings | first cycle s | notifying cycle s | steady cycle s "
        "| after 1 of 4 clusters evaluated s | steady, no memory s | notifications decided |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cycles:
        times = (c["first"], c["notify"], c["steady"], c["one_cluster"], c["steady_full"])
        cells = [f"{c['findings']:,}", *(f"{t:.2f}" for t in times), f"{c['notifications']:,}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| sender: notifications | sent | seconds | notifications/s |",
        "|---:|---:|---:|---:|",
        f"| {sending['notifications']:,} | {sending['sent']:,} | {sending['seconds']:.2f} "
        f"| {sending['rate']:,.0f} |",
        "",
        "| latency: finding written -> receiver answered | rounds | median ms | max ms |",
        "|---|---:|---:|---:|",
        f"| alert cycle + sender, group_wait 0 | {latency['rounds']} | {latency['median_ms']:.0f} "
        f"| {latency['max_ms']:.0f} |",
    ]
    return "\n".join(lines)


def _publish(report: str) -> None:
    print(report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "alerts.md").write_text(report + "\n")


def main() -> int:
    parser = server_parser(__doc__, BENCH_PORT)
    parser.add_argument("--findings", type=int, nargs="+", default=[1_000, 10_000],
                        help="firing findings per cycle run (default 1000 10000)")  # fmt: skip
    parser.add_argument("--notifications", type=int, default=1_000, help="per receiver (default 1000)")
    parser.add_argument("--rounds", type=int, default=20, help="latency rounds (default 20)")
    args = parser.parse_args()
    if min(args.findings) < 1 or args.notifications < 1 or args.rounds < 1:
        parser.error("--findings, --notifications and --rounds must be at least 1")
    _publish(on_server(args.url, args.port, "postgres",
                       lambda url: bench(url, args.findings, args.notifications, args.rounds)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
