"""The daemon answers the lag first: `kafka-health run` starts its collectors and web server
before anything that can wait, and starts Spark (the evaluate stage) and the store's maintenance
(the history rollups) only once every cluster's offsets job has answered the lag and read the
append times its first run left for the next; both still happen, in the background: the Spark
session starts and the rollup hours are marked."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import Engine, text

from tests.conditions import wait_for
from tests.fixtures.daemon import spawn_daemon, stop_daemon
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import free_port

pytestmark = pytest.mark.e2e

CLUSTER = "start"
GROUP = "start-readers"
PARTITIONS = 3


@pytest.fixture
def daemon(
    tmp_path: Path, kafka: KafkaTestHelper, db_url: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The daemon on one topic a group reads 2 records behind on each partition; (its process,
    its web server's URL)."""
    topic = kafka.create_topic(partitions=PARTITIONS)
    for partition in range(PARTITIONS):
        ends = kafka.produce(topic, [b"a", b"b", b"c", b"d"], partition=partition)
        kafka.commit(GROUP, topic, partition, ends[-1] - 1)
    routing = tmp_path / "routing.yaml"
    routing.write_text(
        yaml.safe_dump(
            {"receivers": [{"name": "file", "console": {"path": str(tmp_path / "alerts.jsonl")}}],
             "route": {"receiver": "file"}}
        )
    )  # fmt: skip
    config = {
        "clusters": [
            {
                "name": CLUSTER,
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "topics": {"allow": [topic]},
            }
        ],
        "intervals": {
            "offsets_seconds": 5,
            "metadata_seconds": 5,
            "log_dirs_seconds": 60,
            "evaluate_seconds": 5,
        },
        "alert": {"routing_file": str(routing), "owners_file": None},
        "retention": {"enabled": False},
        "log_level": "INFO",
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "KAFKA_HEALTH_WEB__PORT": str(port)}
    proc = spawn_daemon(path, tmp_path / "daemon.log", env)
    yield proc, f"http://127.0.0.1:{port}"
    stop_daemon(proc)


def _lag(base: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{base}/api/v1/clusters/{CLUSTER}/groups/{GROUP}/lag", timeout=10)
    items = answer.json()["items"] if answer.status_code == 200 else []
    return [i for i in items if i["offset_lag"] is not None]


def _count(engine: Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def test_the_lag_is_answered_first_and_spark_and_the_rollups_follow(
    daemon: tuple[subprocess.Popen[bytes], str], engine: Engine, tmp_path: Path
) -> None:
    proc, base = daemon

    def log() -> str:
        return (tmp_path / "daemon.log").read_text(errors="replace")

    def running(condition: bool) -> bool:
        assert proc.poll() is None, log()[-3000:]
        return condition

    answered = wait_for(
        lambda: running(len(_lag(base)) == PARTITIONS) and _lag(base), 120, "the lag through the API"
    )
    assert {i["offset_lag"] for i in answered} == {2}
    # The JVM's start: minutes on a busy two-core machine.
    wait_for(
        lambda: running("Spark driver heap" in log()), 600, "the Spark session, started in the background"
    )
    wait_for(
        lambda: running(_count(engine, "SELECT count(*) FROM rollup_hours") > 0),
        60,
        "the rollup hours marked by the store's maintenance in the background",
    )
    lines = log().splitlines()

    def first(words: str) -> int:
        return next(n for n, line in enumerate(lines) if words in line)

    answer = first("first answer: every cluster's offsets run is over")
    in_full = first("lag answered in full: every cluster's offsets job has read its append times")
    assert first("monitor.expose.web.server: web UI on") < first("starting scheduler") < answer <= in_full
    assert in_full < first("starting evaluate")
    assert in_full < first("rolled up the lag history")


def test_a_stop_during_an_evaluation_cancels_it_instead_of_waiting_for_it(
    daemon: tuple[subprocess.Popen[bytes], str], engine: Engine, tmp_path: Path
) -> None:
    """SIGTERM while an evaluation runs: the evaluate stage stops its Spark session under it
    (`EvaluateStage.halt`), the run is recorded as cancelled, and the daemon exits cleanly."""
    proc, _ = daemon

    def log() -> str:
        return (tmp_path / "daemon.log").read_text(errors="replace")

    def just_started() -> int | None:
        assert proc.poll() is None, log()[-3000:]
        with engine.connect() as conn:
            return conn.execute(
                text(
                    "SELECT id FROM collection_runs WHERE job = 'evaluate' AND status = 'running'"
                    " AND started_at > now() - interval '300 milliseconds'"
                )
            ).scalar()

    # An evaluation caught within 0.3 s of its start (every 5 s; each takes seconds on this plan).
    run_id = wait_for(just_started, 600, "an evaluation that has just started", interval=0.02)
    proc.terminate()
    assert proc.wait(60) == 0, log()[-3000:]
    with engine.connect() as conn:
        status, error = conn.execute(
            text("SELECT status, error FROM collection_runs WHERE id = :id"), {"id": run_id}
        ).one()
    assert (status, error) == (
        "failed",
        "cancelled: the daemon is stopping; the next start evaluates in full",
    )
    assert "the daemon stops: an evaluation running now is cancelled" in log()
