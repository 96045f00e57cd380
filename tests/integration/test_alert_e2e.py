"""End to end on the real cluster: a daemon process (collect -> evaluate on Spark -> alert -> send)
pages a local PagerDuty server when a broker stops. The time from the stop to the page is measured
and printed (and recorded as the test's `page_latency_seconds` property).

The page is BrokerDown. The shipped rule holds for 1m before it fires; the test runs the shipped
pack with that `for` cut to 10 s (`tests/fixtures/rules.py`), so the latency is at least 10 s plus
a few collection, evaluation and alert cycles (with the shipped rule, add 50 s). The replicas the broker took with it
are inhibited by the BrokerDown alert: the pager gets one page, not one per partition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, text

from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import ROUTING_KEY, FakePagerDuty
from tests.integration.test_daemon_leases import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def e2e_topic(kafka: KafkaTestHelper) -> str:
    """The one topic the daemon watches: 3 partitions on all three brokers."""
    return kafka.create_topic(partitions=3, replication_factor=3)


@pytest.fixture
def daemon(
    tmp_path: Path, kafka: KafkaTestHelper, e2e_topic: str, db_url: str, fake_pagerduty: FakePagerDuty
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts the daemon on `e2e_topic` (console receiver, and the local PagerDuty for critical
    alerts); `rules_dir` replaces the shipped rules."""
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

    def start(rules_dir: Path | None = None) -> subprocess.Popen[bytes]:
        if rules_dir is not None:
            config["evaluate"] = {"rules_dir": str(rules_dir)}
        path.write_text(yaml.safe_dump(config))
        env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "KAFKA_HEALTH_WEB__PORT": str(free_port()),
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


def test_a_stopped_broker_pages_the_local_pagerduty(
    daemon: Callable[..., subprocess.Popen[bytes]],
    kafka: KafkaTestHelper,
    engine: Engine,
    fake_pagerduty: FakePagerDuty,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
    quick_rules: Path,
) -> None:
    # The shipped rules with BrokerDown's `for` at 10 s, not a minute: pending, then firing.
    proc = daemon(quick_rules)
    kafka.wait_for(
        lambda: _evaluated(engine) or proc.poll() is not None, 180, "the daemon's first evaluation"
    )
    assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
    assert fake_pagerduty.events == [], "nothing pages while the cluster is healthy"

    stopped = time.monotonic()
    kafka.stop_broker(3)

    def paged() -> bool:
        return (
            any(e.get("event_action") == "trigger" for e in fake_pagerduty.events) or proc.poll() is not None
        )

    kafka.wait_for(paged, 300, "a page at the local PagerDuty server")
    latency = time.monotonic() - stopped
    record_property("page_latency_seconds", round(latency, 1))
    print(f"\nbroker stopped -> page accepted by the local PagerDuty server: {latency:.1f} s")
    assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]

    triggers = [e for e in fake_pagerduty.events if e["event_action"] == "trigger"]
    assert "Broker 3" in triggers[0]["payload"]["summary"]
    time.sleep(5)  # a few more alert cycles: the inhibited partitions must not page
    triggers = [e for e in fake_pagerduty.events if e["event_action"] == "trigger"]
    assert len({e["dedup_key"] for e in triggers}) == 1, [e["payload"]["summary"] for e in triggers]
    assert latency < 180
