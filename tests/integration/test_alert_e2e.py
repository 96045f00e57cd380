"""End to end on the real 3-node cluster, through the whole daemon process (collect -> evaluate on
Spark -> alert -> send), with the end-to-end probe on: a broker that stops pages a local PagerDuty
server, and makes the probe fail on the partition that broker led, which the cluster page shows
with the reason and the shipped ProbeFailing rule fires on, while the partitions of the other
brokers go on passing. The time from the stop to the page is measured and printed (and recorded
as the test's `page_latency_seconds` property).

The page is BrokerDown. The shipped rule holds for 1m before it fires; the test runs the shipped
pack with the `for` of BrokerDown and ProbeFailing cut to 10 s (`tests/fixtures/rules.py`), so the
latency is at least 10 s plus a few collection, evaluation and alert cycles (with the shipped rule,
add 50 s). The replicas the broker took with it are inhibited by the BrokerDown alert: the pager
gets a page for the broker and one for the failing probe, not one per partition."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import Engine, text

from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import ROUTING_KEY, FakePagerDuty
from tests.integration.test_daemon_leases import free_port

pytestmark = pytest.mark.e2e

PROBE_TOPIC = "kafka-health-probe-e2e"
PROBE_GROUP = "kafka-health-probe-e2e-group"


@pytest.fixture
def web_port() -> int:
    """The daemon's web port."""
    return free_port()


@pytest.fixture
def e2e_topic(kafka: KafkaTestHelper) -> str:
    """The one topic the daemon watches: 3 partitions on all three brokers."""
    return kafka.create_topic(partitions=3, replication_factor=3)


@pytest.fixture
def daemon(
    tmp_path: Path,
    kafka: KafkaTestHelper,
    e2e_topic: str,
    db_url: str,
    fake_pagerduty: FakePagerDuty,
    web_port: int,
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts the daemon on `e2e_topic` (console receiver, and the local PagerDuty for critical
    alerts); `rules_dir` replaces the shipped rules, `probe` turns the end-to-end probe on."""
    topic = e2e_topic
    routing = tmp_path / "routing.yaml"
    routing.write_text(
        f"""
receivers:
  - name: console
    console: {{path: "{tmp_path / "console.jsonl"}"}}
  - name: pager
    pagerduty: {{routing_key_env: E2E_PD_KEY, url: "{fake_pagerduty.url}", timeout: 5}}
route:
  receiver: console
  group_by: [cluster, rule]
  group_wait: 0s
  routes:
    - matchers: [severity=critical]
      receiver: pager
inhibit_rules:
  - source_matchers: [rule=BrokerDown]
    target_matchers: ["rule=~Partition.*"]
    equal: [cluster]
"""
    )
    config = {
        "clusters": [
            {
                "name": "e2e",
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "topics": {"allow": [topic]},
            }
        ],
        "intervals": {
            "offsets_seconds": 2,
            "metadata_seconds": 2,
            "log_dirs_seconds": 60,
            "evaluate_seconds": 5,
        },
        "alert": {"interval_seconds": 2, "sender_interval_seconds": 1, "routing_file": str(routing)},
        "log_level": "INFO",
    }
    path = tmp_path / "monitor.yaml"
    procs: list[subprocess.Popen[bytes]] = []

    def start(rules_dir: Path | None = None, probe: bool = False) -> subprocess.Popen[bytes]:
        if rules_dir is not None:
            config["evaluate"] = {"rules_dir": str(rules_dir)}
        if probe:
            # A stopped broker counts as removed only after an hour: this test is about a broker down.
            config["collect"] = {
                "probe": {
                    "enabled": True,
                    "topic": PROBE_TOPIC,
                    "group_id": PROBE_GROUP,
                    "retire_after_seconds": 3600,
                }
            }
            config["intervals"]["probe_seconds"] = 2  # type: ignore[index]
            config["clusters"][0]["topics"] = {"allow": [topic, PROBE_TOPIC]}  # type: ignore[index]
            config["clusters"][0]["request_timeout_seconds"] = 5  # type: ignore[index]
        path.write_text(yaml.safe_dump(config))
        env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "KAFKA_HEALTH_WEB__PORT": str(web_port),
            "E2E_PD_KEY": ROUTING_KEY,
        }
        log = (tmp_path / "daemon.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _evaluated(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM collection_runs WHERE job = 'evaluate' AND status IN ('ok', 'partial')"
                )
            ).scalar()
        )


def _get(port: int, path: str) -> str:
    response = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10)
    response.raise_for_status()
    return response.text


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


def test_a_stopped_broker_pages_and_fails_the_probe_of_its_partition(
    daemon: Callable[..., subprocess.Popen[bytes]],
    kafka: KafkaTestHelper,
    engine: Engine,
    fake_pagerduty: FakePagerDuty,
    tmp_path: Path,
    web_port: int,
    record_property: Callable[[str, object], None],
    quick_rules: Path,
) -> None:
    proc = daemon(quick_rules, probe=True)

    def tail() -> str:
        return (tmp_path / "daemon.log").read_text()[-3000:]

    def wait(condition: Callable[[], object], seconds: float, what: str) -> None:
        kafka.wait_for(lambda: condition() or proc.poll() is not None, seconds, what)
        assert proc.poll() is None, tail()

    def cluster_page() -> str:
        return _get(web_port, "/clusters/e2e")

    # 1. Healthy: every broker's probe partition passes, on the page and in the evaluation (the
    #    first evaluation waits for Spark to start: minutes on a busy machine); nothing pages.
    wait(lambda: _probe_rows(cluster_page()) == {1: "row-ok", 2: "row-ok", 3: "row-ok"}
         if _evaluated_probe(engine) else None, 600, "a passing probe on every broker, evaluated")  # fmt: skip
    assert _firing(engine, "ProbeFailing") == []
    assert fake_pagerduty.events == [], "nothing pages while the cluster is healthy"
    # KMinion's names and types on /metrics, per partition; the probe's group is no group of the
    # cluster's (it commits, but is not sampled).
    metrics = _get(web_port, "/metrics")
    assert "# TYPE kminion_end_to_end_roundtrip_latency_seconds histogram" in metrics
    assert re.search(r'kminion_end_to_end_messages_received_total\{[^}]*cluster="e2e"[^}]*\} [1-9]', metrics)
    assert PROBE_GROUP not in _get(web_port, "/clusters/e2e/groups")
    with engine.connect() as conn:
        assert not conn.execute(
            text("SELECT 1 FROM group_offsets WHERE group_id = :g"), {"g": PROBE_GROUP}
        ).first()

    def pages() -> dict[str, str]:
        """The rule of each page triggered -> its summary."""
        return {
            e["payload"].get("class"): e["payload"]["summary"]
            for e in fake_pagerduty.events
            if e["event_action"] == "trigger"
        }

    # 2. Broker 3 stops: BrokerDown pages (its `for` at 10 s).
    stopped = time.monotonic()
    kafka.stop_broker(3)
    wait(lambda: "BrokerDown" in pages(), 300, "BrokerDown's page at the local PagerDuty server")
    latency = time.monotonic() - stopped
    record_property("page_latency_seconds", round(latency, 1))
    print(f"\nbroker stopped -> page accepted by the local PagerDuty server: {latency:.1f} s")
    assert "Broker 3" in pages()["BrokerDown"]
    assert latency < 180

    # 3. The partition broker 3 led fails its probe, the others pass again once its ISR shrank.
    wait(lambda: _probe_rows(cluster_page()) == {1: "row-ok", 2: "row-ok", 3: "row-bad"}, 300,
         "broker 3's probe partition failing on the cluster page, the others passing")  # fmt: skip
    page = cluster_page()
    assert "broker 3 does not lead its probe partition" in page
    assert "End-to-end latency per broker" in page and "Probe rounds per broker" in page

    # 4. The shipped rule fires on broker 3, and pages.
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

    wait(lambda: "ProbeFailing" in pages(), 120, "the failing probe's page")
    time.sleep(5)  # a few more alert cycles: the inhibited partitions must not page
    assert set(pages()) == {"BrokerDown", "ProbeFailing"}, pages()
