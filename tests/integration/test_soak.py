"""Soak: ten minutes of steady traffic on the 3-node cluster while its surroundings misbehave, with
the daemon (collect -> evaluate on Spark -> alert -> send) running as its own process.

The timeline, in seconds after the daemon's first evaluation (`TIMELINE`):

- every two minutes one broker stops, in turn 1, 2, 3, 1, 2, and starts again 100 s later (long
  enough for BrokerDown, which holds for 1m, to fire and then resolve);
- the webhook receiver is down from 100 s to 220 s: what fired or resolved meanwhile is retried;
- PostgreSQL stops at 300 s and starts again at 345 s: the collectors queue their samples in
  memory (the buffer policy in monitor/store/buffer.py) and write them when it is back.

Then, once the last broker is back and the outbox is drained:

- the daemon's resident memory (its own process; the Spark JVM it started is measured apart) did
  not grow past the bounds in `MEMORY_BOUNDS_MB` after its warm-up;
- no samples were lost: partition and group offsets have no gap longer than `MAX_SAMPLE_GAP`,
  samples taken while PostgreSQL was down are there, and the buffer dropped nothing;
- every alert that fired was notified exactly once as firing, and once as resolved when it
  resolved; every notification reached the receiver exactly once, the outage's after a retry;
- the collection-run table shows the degraded windows: runs queued during the PostgreSQL outage
  (`counts.buffered`), evaluations that failed then (and only then), metadata runs with a broker
  missing during each broker stop;
- SIGTERM stops the daemon cleanly.

It runs last in the session, and only when the session's time budget still has room for it
(`KAFKA_HEALTH_TEST_BUDGET_MINUTES`, 40 by default: see `budget`); `pytest -m soak` runs it alone.
The figures are printed and written to var/test/soak/results.json.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from sqlalchemy import Engine, text

from monitor.devtools import postgres
from monitor.devtools.paths import var_dir
from monitor.store import migrate
from monitor.store.engine import make_engine
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import free_port
from tests.session import SESSION_STARTED

pytestmark = [pytest.mark.soak, pytest.mark.e2e, pytest.mark.timeout(1800)]

SOAK_SECONDS = 600
BROKER_DOWN_SECONDS = 100
BROKER_STOPS = ((20, 1), (140, 2), (260, 3), (380, 1), (500, 2))
RECEIVER_DOWN = (100, 220)
POSTGRES_DOWN = (300, 345)
NEEDED_MINUTES = 15
"""What the soak takes with its warm-up and checks, for the budget."""

MEMORY_BOUNDS_MB = {"daemon_growth": 64, "daemon_peak": 512}
"""The daemon process's resident memory: growth from the end of its first minute to the end, and
its peak. The Spark JVM it starts is bounded by `spark.driver_memory` and reported, not asserted."""

MAX_SAMPLE_GAP = timedelta(seconds=30)
"""Offsets are sampled every 5 s; a cycle may wait out a 10 s request timeout on a broker that has
just stopped."""

SOAK_PG_PORT = int(os.environ.get("KAFKA_HEALTH_TEST_SOAK_PG_PORT", "24533"))
TOPICS = ("soak-orders", "soak-payments", "soak-audit")
PARTITIONS = 6
MESSAGES_PER_SECOND = 150
HEALTHY_GROUP = "soak-healthy"
STOPPED_GROUP = "soak-stopped"


# ---------------------------------------------------------------------------------------------
# The session's time budget


def budget(request: pytest.FixtureRequest) -> None:
    """Skip when the session has already used so much of its budget that the soak would overrun it."""
    started = request.config.stash.get(SESSION_STARTED, None)
    if started is None:
        return
    limit = float(os.environ.get("KAFKA_HEALTH_TEST_BUDGET_MINUTES", "40"))
    elapsed = (time.monotonic() - started) / 60
    if elapsed + NEEDED_MINUTES > limit:
        pytest.skip(
            f"the soak needs about {NEEDED_MINUTES} minutes and the session has used {elapsed:.1f} of its "
            f"{limit:g}-minute budget (KAFKA_HEALTH_TEST_BUDGET_MINUTES); run it alone with `pytest -m soak`"
        )


# ---------------------------------------------------------------------------------------------
# A webhook receiver that can go away and come back on the same port


class Receiver:
    """Records every webhook body it is sent; `stop` closes its port, `start` opens it again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bodies: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# ---------------------------------------------------------------------------------------------
# Steady traffic: producers, a healthy consumer group and a group that stopped


@dataclass
class Traffic:
    kafka: KafkaTestHelper
    produced: int = 0
    failed: int = 0
    consumed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for topic in TOPICS:
            self.kafka.create_topic(
                topic, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"}
            )
        self._threads = [
            threading.Thread(target=self._produce, name="soak-producer", daemon=True),
            threading.Thread(target=self._consume, name="soak-consumer", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop_group(self) -> None:
        """A group that committed once and then stopped: its lag grows for the rest of the soak."""
        ends = {}
        probe = Consumer({"bootstrap.servers": self.kafka.bootstrap_servers, "group.id": STOPPED_GROUP})
        try:
            for p in range(PARTITIONS):
                ends[p] = probe.get_watermark_offsets(TopicPartition(TOPICS[0], p), timeout=10)[1]
            probe.commit(
                offsets=[TopicPartition(TOPICS[0], p, o) for p, o in ends.items()], asynchronous=False
            )
        finally:
            probe.close()

    def _produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.kafka.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 20,
                "delivery.timeout.ms": 120_000,
            }
        )

        def delivered(error: KafkaError | None, _message: Any) -> None:
            if error is None:
                self.produced += 1
            else:
                self.failed += 1
                self.errors[error.name()] += 1

        sequence = 0
        while not self._stop.is_set():
            started = time.monotonic()
            for _ in range(MESSAGES_PER_SECOND // 10):
                topic = TOPICS[sequence % len(TOPICS)]
                try:
                    producer.produce(
                        topic, value=b"x" * 200, key=str(sequence).encode(), on_delivery=delivered
                    )
                except BufferError:
                    self.errors["local_queue_full"] += 1
                sequence += 1
            producer.poll(0)
            time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        producer.flush(30)

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.kafka.bootstrap_servers,
                "group.id": HEALTHY_GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 1000,
            }
        )
        consumer.subscribe(list(TOPICS))
        try:
            while not self._stop.is_set():
                for message in consumer.consume(500, timeout=0.5):
                    if message.error() is None:
                        self.consumed += 1
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


# ---------------------------------------------------------------------------------------------
# The daemon's memory


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return found


@dataclass
class MemorySampler:
    pid: int
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(seconds since start, daemon RSS in kB, RSS of everything it started in kB)."""
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, origin: float) -> None:
        while not self._stop.wait(5):
            children = _children(self.pid)
            descendants = list(children)
            while children:
                children = [g for c in children for g in _children(c)]
                descendants.extend(children)
            self.samples.append(
                (time.monotonic() - origin, _rss_kb(self.pid), sum(_rss_kb(c) for c in descendants))
            )

    def stop(self) -> None:
        self._stop.set()


# ---------------------------------------------------------------------------------------------
# The soak


@dataclass
class Event:
    at: float
    what: str
    action: Callable[[], None]


@pytest.fixture
def soak_database() -> Iterator[tuple[postgres.LocalPostgres, str]]:
    server = postgres.LocalPostgres(var_dir() / "test" / "soak-postgres", SOAK_PG_PORT)
    server.up()
    postgres.drop_database(server.url("postgres"), "kh_soak")
    server.create_database("kh_soak")
    url = server.url("kh_soak")
    migrate.upgrade(url, "head")
    try:
        yield server, url
    finally:
        server.down()


def _config(tmp_path: Path, kafka: KafkaTestHelper, receiver: Receiver) -> Path:
    routing = tmp_path / "routing.yaml"
    routing.write_text(
        yaml.safe_dump(
            {
                "receivers": [{"name": "hook", "webhook": {"url": receiver.url, "timeout": 5}}],
                "route": {
                    "receiver": "hook",
                    "group_by": ["..."],
                    "group_wait": "0s",
                    "group_interval": "10s",
                    "repeat_interval": "4h",
                    "send_resolved": True,
                },
            }
        )
    )
    config = {
        "clusters": [
            {
                "name": "soak",
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "topics": {"allow": ["soak-.*"]},
                "groups": {"allow": ["soak-.*"]},
            }
        ],
        "intervals": {
            "offsets_seconds": 5,
            "metadata_seconds": 5,
            "log_dirs_seconds": 30,
            "evaluate_seconds": 10,
        },
        "alert": {
            "interval_seconds": 2,
            "sender_interval_seconds": 1,
            "retry_base_seconds": 1,
            "retry_max_seconds": 10,
            "routing_file": str(routing),
        },
        "log_level": "INFO",
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _rows(engine: Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(text(sql), params)]


def _evaluated(engine: Engine) -> bool:
    try:
        return bool(
            _rows(
                engine, "SELECT 1 FROM collection_runs WHERE job = 'evaluate' AND status IN ('ok', 'partial')"
            )
        )
    except Exception:
        return False


def test_ten_minutes_of_traffic_through_broker_restarts_a_postgres_restart_and_a_receiver_outage(
    request: pytest.FixtureRequest,
    kafka: KafkaTestHelper,
    soak_database: tuple[postgres.LocalPostgres, str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    budget(request)
    server, url = soak_database
    receiver = Receiver()
    receiver.start()
    traffic = Traffic(kafka)
    traffic.start()
    config = _config(tmp_path, kafka, receiver)
    log_path = tmp_path / "daemon.log"
    env = {**os.environ, "DATABASE_URL": url, "KAFKA_HEALTH_WEB__PORT": str(free_port())}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    engine = make_engine(url)
    origin = time.monotonic()
    memory = MemorySampler(proc.pid)
    threading.Thread(target=memory.run, args=(origin,), daemon=True).start()
    happened: list[tuple[float, str]] = []
    try:
        kafka.wait_for(
            lambda: _evaluated(engine) or proc.poll() is not None, 240, "the daemon's first evaluation"
        )
        assert proc.poll() is None, log_path.read_text()[-3000:]
        traffic.stop_group()
        t0 = time.monotonic()
        t0_wall = datetime.now(UTC)

        events = [Event(at, f"stop broker {b}", lambda b=b: kafka.stop_broker(b)) for at, b in BROKER_STOPS]
        events += [
            Event(at + BROKER_DOWN_SECONDS, f"start broker {b}", lambda b=b: kafka.start_broker(b))
            for at, b in BROKER_STOPS
        ]
        events += [
            Event(RECEIVER_DOWN[0], "stop receiver", receiver.stop),
            Event(RECEIVER_DOWN[1], "start receiver", receiver.start),
            Event(POSTGRES_DOWN[0], "stop PostgreSQL", lambda: server.down()),
            Event(POSTGRES_DOWN[1], "start PostgreSQL", server.up),
        ]
        for event in sorted(events, key=lambda e: e.at):
            time.sleep(max(0.0, t0 + event.at - time.monotonic()))
            assert proc.poll() is None, (
                f"the daemon died before {event.what}: " + log_path.read_text()[-3000:]
            )
            happened.append((time.monotonic() - t0, event.what))
            event.action()
        time.sleep(max(0.0, t0 + SOAK_SECONDS - time.monotonic()))
        traffic.stop()
        assert proc.poll() is None, log_path.read_text()[-3000:]

        def settled() -> bool:
            open_alerts = _rows(
                engine, "SELECT count(*) AS n FROM alerts WHERE state <> 'resolved' AND rule = 'BrokerDown'"
            )
            unsent = _rows(
                engine, "SELECT count(*) AS n FROM notification_outbox WHERE state NOT IN ('sent', 'dropped')"
            )
            return open_alerts[0]["n"] == 0 and unsent[0]["n"] == 0

        kafka.wait_for(
            settled, 240, "every BrokerDown alert resolved and every notification sent", ignore=(Exception,)
        )
        memory.stop()
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(90)
    finally:
        memory.stop()
        traffic.stop()
        receiver.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    daemon_log = log_path.read_text()
    assert exit_code == 0, daemon_log[-3000:]

    figures = _check(engine, t0_wall, t0 - origin + 60, memory, receiver, traffic)
    engine.dispose()
    figures["timeline"] = [f"{at:6.1f} s  {what}" for at, what in happened]
    for key, value in figures.items():
        if not isinstance(value, list | dict):
            record_property(key, value)
    results = var_dir() / "test" / "soak" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print("\n" + json.dumps(figures, indent=2, default=str))


def _window(t0: datetime, window: tuple[float, float]) -> tuple[datetime, datetime]:
    return t0 + timedelta(seconds=window[0]), t0 + timedelta(seconds=window[1])


def _check(
    engine: Engine,
    t0: datetime,
    warmed_up: float,
    memory: MemorySampler,
    receiver: Receiver,
    traffic: Traffic,
) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "messages_produced": traffic.produced,
        "messages_consumed": traffic.consumed,
        "produce_failures": traffic.failed,
    }

    # -- memory ---------------------------------------------------------------------------------
    warm = [s for s in memory.samples if s[0] >= warmed_up]
    assert len(warm) > 60, f"too few memory samples: {len(memory.samples)}"
    start_kb, end_kb = warm[0][1], warm[-1][1]
    peak_kb = max(s[1] for s in memory.samples)
    figures.update(
        daemon_rss_mb_after_warmup=round(start_kb / 1024),
        daemon_rss_mb_at_end=round(end_kb / 1024),
        daemon_rss_mb_peak=round(peak_kb / 1024),
        spark_jvm_rss_mb_peak=round(max(s[2] for s in memory.samples) / 1024),
    )
    assert (end_kb - start_kb) / 1024 <= MEMORY_BOUNDS_MB["daemon_growth"], figures
    assert peak_kb / 1024 <= MEMORY_BOUNDS_MB["daemon_peak"], figures

    # -- samples ----------------------------------------------------------------------------------
    pg_down = _window(t0, POSTGRES_DOWN)
    end = t0 + timedelta(seconds=SOAK_SECONDS)
    for table in ("partition_offsets", "group_offsets"):
        times = [
            r["sampled_at"]
            for r in _rows(
                engine,
                f"SELECT DISTINCT sampled_at FROM {table} WHERE cluster = 'soak'"
                " AND sampled_at BETWEEN :a AND :b ORDER BY sampled_at",
                a=t0,
                b=end,
            )
        ]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        during_outage = [t for t in times if pg_down[0] <= t <= pg_down[1]]
        figures[f"{table}_samples"] = len(times)
        figures[f"{table}_longest_gap_seconds"] = max(gaps).total_seconds()
        figures[f"{table}_samples_while_postgres_was_down"] = len(during_outage)
        assert max(gaps) <= MAX_SAMPLE_GAP, (table, max(gaps))
        assert len(during_outage) >= (POSTGRES_DOWN[1] - POSTGRES_DOWN[0]) / 5 - 3, (
            table,
            len(during_outage),
        )
    (last,) = _rows(
        engine,
        "SELECT counts FROM collection_runs WHERE cluster = 'soak' AND job = 'offsets' ORDER BY started_at DESC LIMIT 1",
    )
    assert last["counts"]["buffer_dropped_rows_total"] == 0

    # -- the collection-run table shows the degraded windows ---------------------------------------
    runs = _rows(
        engine,
        "SELECT job, status, started_at, counts, error FROM collection_runs"
        " WHERE (cluster = 'soak' OR cluster IS NULL) AND started_at BETWEEN :a AND :b ORDER BY started_at",
        a=t0,
        b=end,
    )
    queued = [r for r in runs if r["job"] == "offsets" and (r["counts"] or {}).get("buffered", 0) > 0]
    assert queued and all(
        pg_down[0] - timedelta(seconds=5) <= r["started_at"] <= pg_down[1] + timedelta(seconds=10)
        for r in queued
    ), [r["started_at"] for r in queued]
    figures["offsets_runs_queued_while_postgres_was_down"] = len(queued)
    for at, broker in BROKER_STOPS:
        stopped = _window(t0, (at + 15, at + BROKER_DOWN_SECONDS - 5))
        metadata = [r for r in runs if r["job"] == "metadata" and stopped[0] <= r["started_at"] <= stopped[1]]
        assert metadata and all(r["counts"]["brokers"] == 2 for r in metadata if r["status"] == "ok"), (
            broker,
            metadata,
        )
    figures["runs_by_status"] = dict(Counter(f"{r['job']}:{r['status']}" for r in runs))
    # Evaluations fail only while PostgreSQL is away (one in flight when it went may end later),
    # and those failures are recorded; the session itself never runs out of memory.
    evaluations = [r for r in runs if r["job"] == "evaluate"]
    outage = (pg_down[0] - timedelta(seconds=60), pg_down[1] + timedelta(seconds=60))
    failed = [r for r in evaluations if r["status"] != "ok"]
    assert all(outage[0] <= r["started_at"] <= outage[1] for r in failed), [
        (r["started_at"], r["status"], (r["error"] or "")[:300]) for r in failed
    ]
    assert [r for r in failed if r["status"] == "failed"], "no evaluation failed while PostgreSQL was down"
    assert len(evaluations) >= SOAK_SECONDS / 30, f"only {len(evaluations)} evaluations in {SOAK_SECONDS} s"
    figures["evaluations"] = len(evaluations)

    # -- every alert notified exactly once, or, when it ended before its notice could be sent
    # (the receiver was down), never, the notice dropped at send time with its reason ----------------
    outbox = _rows(
        engine, "SELECT id, kind, state, attempts FROM notification_outbox WHERE receiver = 'hook'"
    )
    assert outbox and all(o["state"] in ("sent", "dropped") for o in outbox), [
        o for o in outbox if o["state"] not in ("sent", "dropped")
    ]
    sent = {o["id"] for o in outbox if o["state"] == "sent"}
    dropped = [o for o in outbox if o["state"] == "dropped"]
    delivered = Counter(b["notification_id"] for b in receiver.bodies)
    assert set(delivered) == sent
    assert [i for i, n in delivered.items() if n > 1] == [], "a notification reached the receiver twice"
    assert any(o["attempts"] > 1 for o in outbox), (
        "nothing was retried: the receiver outage missed every notification"
    )
    assert not [b for b in receiver.bodies if b["kind"] == "repeat"], "a repeat within the 4h repeat_interval"
    reasons = _rows(
        engine,
        "SELECT outbox_id, reason FROM notification_log WHERE receiver = 'hook' AND outcome = 'dropped'",
    )
    assert {r["outbox_id"] for r in reasons} == {o["id"] for o in dropped}, (reasons, dropped)

    fired = _rows(
        engine,
        "SELECT fingerprint, rule, entity_key, starts_at, resolved_at, state FROM alerts"
        " WHERE cluster = 'soak' AND starts_at IS NOT NULL ORDER BY starts_at",
    )
    told: Counter[tuple[str, datetime, str]] = Counter()
    for body in receiver.bodies:
        for alert in body["alerts"]:
            told[(alert["fingerprint"], datetime.fromisoformat(alert["starts_at"]), alert["state"])] += 1
    untold = []
    for alert in fired:
        starts = alert["starts_at"]
        firing = told[(alert["fingerprint"], starts, "firing")]
        assert firing <= 1, (alert, told)
        if firing == 0:  # resolved before its notice could be sent: dropped, never a stale page
            assert alert["state"] == "resolved" and told[(alert["fingerprint"], starts, "resolved")] == 0, (
                alert
            )
            untold.append(alert)
        elif alert["state"] == "resolved":
            assert told[(alert["fingerprint"], starts, "resolved")] == 1, (alert, told)
    assert len(untold) <= len([o for o in dropped if o["kind"] == "firing"]), (untold, dropped)
    figures["alerts_ended_before_their_notice_was_sent"] = len(untold)
    figures["notifications_dropped"] = dict(Counter(r["reason"] for r in reasons))
    broker_down = [a for a in fired if a["rule"] == "BrokerDown"]
    assert len(broker_down) == len(BROKER_STOPS), [(a["entity_key"], a["starts_at"]) for a in broker_down]
    figures["alerts_fired"] = dict(Counter(a["rule"] for a in fired))
    figures["notifications"] = dict(Counter(o["kind"] for o in outbox))
    figures["notifications_retried"] = sum(1 for o in outbox if o["attempts"] > 1)
    return figures
