"""The end-to-end probe on the real 3-node cluster, driven through the whole daemon (collect ->
evaluate on Spark -> alert): stopping a broker makes the probe fail on the partition that broker
led, which the cluster page shows with the reason and the shipped ProbeFailing rule fires on, while
the partitions of the other brokers go on passing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import Engine, text

from tests.fixtures.kafka import KafkaTestHelper
from tests.integration.test_daemon_leases import free_port

pytestmark = pytest.mark.e2e

TOPIC = "kafka-health-probe-e2e"
GROUP = "kafka-health-probe-e2e-group"


class Daemon:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return self.log.read_text()[-3000:]

    def cluster_page(self) -> str:
        return self.get("/clusters/e2e")

    def get(self, path: str) -> str:
        response = httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=10)
        response.raise_for_status()
        return response.text


@pytest.fixture
def daemon(tmp_path: Path, kafka: KafkaTestHelper, db_url: str, quick_rules: Path) -> Iterator[Daemon]:
    config = {
        "clusters": [
            {
                "name": "e2e",
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "topics": {"allow": [TOPIC]},
                "request_timeout_seconds": 5,
            }
        ],
        "intervals": {
            "offsets_seconds": 2,
            "metadata_seconds": 2,
            "log_dirs_seconds": 60,
            "evaluate_seconds": 5,
            "probe_seconds": 2,
        },
        # A stopped broker counts as removed only after an hour: this test is about a broker down.
        "collect": {
            "probe": {"enabled": True, "topic": TOPIC, "group_id": GROUP, "retire_after_seconds": 3600}
        },
        "alert": {"interval_seconds": 2},
        # The shipped rules with ProbeFailing's `for` at 10 s, not 30 s.
        "evaluate": {"rules_dir": str(quick_rules)},
        "log_level": "INFO",
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "KAFKA_HEALTH_WEB__PORT": str(port)}
    log = tmp_path / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(path)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield Daemon(proc, port, log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _probe_rows(page: str) -> dict[int, str]:
    """Broker -> the class of its probe row ("row-ok" or "row-bad") on the cluster page."""
    return {
        int(broker): css
        for css, broker in re.findall(
            r'<tr class="(row-\w+)" data-probe-partition="\d+" data-broker="(\d+)">', page
        )
    }


def _firing(engine: Engine, rule: str) -> list[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT labels->>'broker_id' FROM findings "
                "WHERE rule = :r AND cluster = 'e2e' AND state = 'firing'"
            ),
            {"r": rule},
        )
        return sorted(str(row[0]) for row in rows)


def _evaluated_probe(engine: Engine) -> bool:
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM derived_broker WHERE cluster = 'e2e' AND probe_successes > 0")
        ).scalar()
        return bool(found)


def test_a_stopped_broker_fails_the_probe_of_its_partition_on_the_page_and_fires_the_rule(
    daemon: Daemon, kafka: KafkaTestHelper, engine: Engine
) -> None:
    def wait(condition: Callable[[], object], seconds: float, what: str) -> None:
        kafka.wait_for(lambda: condition() or not daemon.alive(), seconds, what)
        assert daemon.alive(), daemon.tail()

    # 1. Healthy: every broker's probe partition passes, on the page and in the evaluation (the
    #    first evaluation waits for Spark to start: minutes on a busy machine).
    wait(lambda: _probe_rows(daemon.cluster_page()) == {1: "row-ok", 2: "row-ok", 3: "row-ok"}
         if _evaluated_probe(engine) else None, 600, "a passing probe on every broker, evaluated")  # fmt: skip
    assert _firing(engine, "ProbeFailing") == []
    # KMinion's names and types on /metrics, per partition; the probe's group is no group of the
    # cluster's (it commits, but is not sampled).
    metrics = daemon.get("/metrics")
    assert "# TYPE kminion_end_to_end_roundtrip_latency_seconds histogram" in metrics
    assert re.search(r'kminion_end_to_end_messages_received_total\{[^}]*cluster="e2e"[^}]*\} [1-9]', metrics)
    assert GROUP not in daemon.get("/clusters/e2e/groups")
    with engine.connect() as conn:
        assert not conn.execute(text("SELECT 1 FROM group_offsets WHERE group_id = :g"), {"g": GROUP}).first()

    # 2. Broker 3 stops: the partition it led fails, the others pass again once its ISR shrank.
    kafka.stop_broker(3)
    wait(lambda: _probe_rows(daemon.cluster_page()) == {1: "row-ok", 2: "row-ok", 3: "row-bad"}, 300,
         "broker 3's probe partition failing on the cluster page, the others passing")  # fmt: skip
    page = daemon.cluster_page()
    assert "broker 3 does not lead its probe partition" in page
    assert "End-to-end latency per broker" in page and "Probe rounds per broker" in page

    # 3. The shipped rule fires on broker 3.
    wait(lambda: "3" in _firing(engine, "ProbeFailing"), 300, "ProbeFailing firing on broker 3")
    with engine.connect() as conn:
        severity, summary = conn.execute(
            text(
                "SELECT severity, summary FROM findings WHERE rule = 'ProbeFailing' AND cluster = 'e2e' "
                "AND state = 'firing' AND labels->>'broker_id' = '3'"
            )
        ).one()
    assert severity == "critical"
    assert "broker 3 of e2e" in summary
