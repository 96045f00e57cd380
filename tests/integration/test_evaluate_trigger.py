"""The daemon reacts at once: with the evaluation and the alert cycle scheduled an hour apart, a
broker that stops is collected, evaluated and handed to the alert cycle within the collection's
seconds, through the scheduler wiring of `monitor.app` (collect -> run_soon("evaluate") ->
evaluate -> run_soon("alert")). Every wait is on a condition in the database, never on a clock."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, text

from tests.fixtures.daemon import stop_daemon
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import free_port

pytestmark = pytest.mark.e2e

HOUR = 3600


@pytest.fixture
def daemon(tmp_path: Path, kafka: KafkaTestHelper, db_url: str) -> Iterator[subprocess.Popen[bytes]]:
    topic = kafka.create_topic(partitions=3, replication_factor=3)
    routing = tmp_path / "routing.yaml"
    routing.write_text(
        f"""
receivers:
  - name: console
    console: {{path: "{tmp_path / "console.jsonl"}"}}
route:
  receiver: console
  group_by: [cluster, rule]
  group_wait: 0s
"""
    )
    config = {
        "clusters": [
            {
                "name": "trigger",
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "topics": {"allow": [topic]},
            }
        ],
        "intervals": {
            "offsets_seconds": 2,
            "metadata_seconds": 2,
            "log_dirs_seconds": HOUR,
            "evaluate_seconds": HOUR,
        },
        "alert": {"interval_seconds": HOUR, "sender_interval_seconds": 1, "routing_file": str(routing)},
        "log_level": "INFO",
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "DATABASE_URL": db_url, "KAFKA_HEALTH_WEB__PORT": str(free_port())}
    with (tmp_path / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    yield proc
    stop_daemon(proc)


def _runs(engine: Engine, job: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT started_at, finished_at, status, counts FROM collection_runs WHERE job = :job "
                "ORDER BY started_at"
            ),
            {"job": job},
        )
        return [dict(row._mapping) for row in rows]


def _now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(text("SELECT now()")).scalar_one()  # type: ignore[no-any-return]


def test_a_stopped_broker_is_evaluated_and_alerted_without_waiting_for_the_ticks(
    daemon: subprocess.Popen[bytes], kafka: KafkaTestHelper, engine: Engine, tmp_path: Path
) -> None:
    def log_tail() -> str:
        return (tmp_path / "daemon.log").read_text(errors="replace")[-3000:]

    # The daemon is up and collecting; the first scheduled evaluation is an hour away.
    kafka.wait_for(
        lambda: any(r["status"] == "ok" for r in _runs(engine, "metadata")) or daemon.poll() is not None,
        180,
        "the daemon's first metadata collection",
    )
    assert daemon.poll() is None, log_tail()
    assert _runs(engine, "evaluate") == [], "a healthy cluster asks for no evaluation"

    stopped_at = _now(engine)
    kafka.stop_broker(3)

    def alerted() -> bool:
        # The evaluation asks for the alert cycle before it closes its own run row.
        closed = all(r["finished_at"] is not None for r in _runs(engine, "evaluate"))
        return (bool(_runs(engine, "alert")) and closed) or daemon.poll() is not None

    # Spark starts once the collectors have answered, in the background: a stop seen before it is
    # up is evaluated as soon as it is (the JVM's start and a cold evaluation: minutes on a busy
    # two-core machine).
    kafka.wait_for(
        alerted, 600, "an alert cycle after the evaluation the broker's stop asked for, and its close"
    )
    assert daemon.poll() is None, log_tail()

    asked = [r for r in _runs(engine, "metadata") if (r["counts"] or {}).get("evaluation_requested")]
    assert asked and asked[0]["started_at"] >= stopped_at, (
        "the metadata run that saw it asked for an evaluation"
    )
    evaluations = _runs(engine, "evaluate")
    assert evaluations and evaluations[0]["started_at"] >= asked[0]["started_at"]
    assert evaluations[0]["status"] in ("ok", "partial"), evaluations[0]
    # asked for by the evaluation once its findings were merged, before its own run row was closed
    assert _runs(engine, "alert")[0]["started_at"] >= evaluations[0]["started_at"]
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT rule, entity_key, first_seen FROM findings WHERE rule = 'BrokerDown'")
        ).all()
    assert [(rule, key) for rule, key, _ in found] == [("BrokerDown", "trigger/3")]
    # its `for` counts from the metadata sample that showed the broker gone, not from the evaluation
    assert stopped_at <= found[0].first_seen <= evaluations[0]["finished_at"]
