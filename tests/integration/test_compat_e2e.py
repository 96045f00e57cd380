"""One end-to-end run at the session's Kafka version (KAFKA_HEALTH_TEST_KAFKA_VERSION; `make
test-compat` runs it at every supported version, CI at 2.8.2 and 3.9.1 beside the default):
the daemon collects and evaluates, the cluster page, `/collection` and the API name the Kafka
release with what it cannot give, a lagging group is notified, a stopped broker is paged, and a
retention raise is applied and reverted.

The rules are the shipped lag and broker rules with their hold time taken out (`for: 0s`), so
that the run proves what each version gives, not how long a rule waits."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from html import unescape
from pathlib import Path
from subprocess import Popen

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from monitor.act.model import RetentionError
from monitor.core.kafka_features import parse_version, unavailable_features, unavailable_text, version_text
from monitor.expose.web.app import create_app
from tests.fixtures.daemon import evaluated
from tests.fixtures.kafka import KafkaTestHelper, session_kafka_version
from tests.fixtures.receivers import FakePagerDuty
from tests.fixtures.retention import ALICE, CLUSTER, DAY_MS, Rig

pytestmark = [pytest.mark.e2e, pytest.mark.compat]

RULES = """
rules:
  - name: CompatLagging
    description: A group behind on old records (offset lag and lag seconds both known).
    entity: group_topic
    condition: offset_lag > 0 and max_lag_seconds > 600
    value: max_lag_seconds
    for: 0s
    severities:
      - severity: warning
    summary: "Group {{ group_id }} is {{ offset_lag | number }} messages behind on {{ topic }}"
  - name: BrokerDown
    description: A broker that was in the cluster is gone from the metadata.
    entity: broker
    condition: down
    value: replicas
    for: 0s
    severities:
      - severity: critical
    summary: "Broker {{ broker_id }} of {{ cluster }} is down"
"""


def _console(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(1200)
def test_a_lagging_group_is_notified_and_a_stopped_broker_paged(
    e2e_daemon: Callable[..., Popen[bytes]],
    e2e_topic: str,
    kafka: KafkaTestHelper,
    engine: Engine,
    fake_pagerduty: FakePagerDuty,
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "compat.yaml").write_text(RULES)
    topic = e2e_topic
    old = int(time.time() * 1000) - 2 * 3600 * 1000
    kafka.produce(topic, [b"r"] * 10, partition=0, timestamps_ms=[old + i for i in range(10)])
    kafka.commit("compat-lagging", topic, 0, 2)
    proc = e2e_daemon(rules_dir=rules)
    log = tmp_path / "daemon.log"

    def wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
        """`kafka.wait_for`, whose failure ends with the daemon's log."""
        try:
            kafka.wait_for(predicate, timeout, what)
        except AssertionError as exc:
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no daemon log)"
            raise AssertionError(f"{exc}; the daemon's log ends:\n{tail}") from None

    # The first evaluation waits for Spark to start: minutes on a busy two-core machine.
    wait(lambda: evaluated(engine) or proc.poll() is not None, 480, "the daemon's first evaluation")
    assert proc.poll() is None, log.read_text()[-3000:]
    _says_its_release(engine, "e2e")

    def notified() -> list[dict[str, object]]:
        return [n for n in _console(tmp_path / "console.jsonl") if "compat-lagging" in json.dumps(n)]

    wait(lambda: notified() or proc.poll() is not None, 180, "the lagging group's notification")
    assert proc.poll() is None, log.read_text()[-3000:]
    assert "8 messages behind" in json.dumps(notified()[0])
    assert fake_pagerduty.events == [], "nothing pages while every broker is up"

    kafka.stop_broker(3)

    def paged() -> bool:
        triggers = [e for e in fake_pagerduty.events if e.get("event_action") == "trigger"]
        return bool(triggers) or proc.poll() is not None

    wait(paged, 180, "a page at the local PagerDuty server")
    assert proc.poll() is None, log.read_text()[-3000:]
    triggers = [e for e in fake_pagerduty.events if e["event_action"] == "trigger"]
    assert "Broker 3" in triggers[0]["payload"]["summary"]
    errors = [line for line in log.read_text().splitlines() if " ERROR " in line or "Traceback" in line]
    assert errors == [], f"Kafka {session_kafka_version()}: the daemon logged errors: {errors[:5]}"


def _says_its_release(engine: Engine, cluster: str) -> None:
    """The cluster page, `/collection` and the API name the session's Kafka release, and each
    feature it cannot give once, in the words of `monitor.core.kafka_features`."""
    version = parse_version(session_kafka_version())
    missing = [unavailable_text(feature, version) for feature in unavailable_features(version)]
    with TestClient(create_app(engine, stale_after=timedelta(minutes=5))) as client:
        api = client.get(f"/api/v1/clusters/{cluster}").json()
        pages = [unescape(client.get(path).text) for path in (f"/clusters/{cluster}", "/collection")]
    assert api["kafka_version"] == version_text(version), api
    assert [u["text"] for u in api["unavailable"]] == missing
    for html in pages:
        assert f'data-role="kafka-version">Kafka {version_text(version)}<' in html
        assert [html.count(text) for text in missing] == [1] * len(missing)
    if version == (2, 8):
        assert "log directory volume size: not available on Kafka 2.8 (from 3.3)" in pages[0]


def test_a_retention_raise_is_applied_and_reverted(retention_rig: Rig) -> None:
    topic = retention_rig.topic()

    # Two broker versions run side by side in CI: a request timing out on a busy broker leaves the
    # step to the daemon's next tick, as in production.
    request = retention_rig.settled(
        retention_rig.service.raise_retention(
            ALICE, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, DAY_MS, "compat"
        )
    )
    retention_rig.expect_retention_ms(topic, str(2 * DAY_MS))
    reverted = retention_rig.settled(retention_rig.service.revert(ALICE, request.id, "caught up"))
    assert reverted.state == "reverted", (reverted.state, reverted.last_error)
    retention_rig.expect_retention_ms(topic, str(DAY_MS))

    assert retention_rig.actions(request.id)[:5] == [
        "requested",
        "approved",
        "committed",
        "applied",
        "verified",
    ]
    with pytest.raises(RetentionError):
        retention_rig.service.revert(ALICE, request.id, "twice")
