"""Two real daemon processes on one database share a cluster through a lease: exactly one collects,
and when it dies the other takes over within two lease periods. SIGTERM stops a daemon cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, text

from tests.conditions import wait_for
from tests.fixtures.daemon import spawn_daemon
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import free_port

pytestmark = pytest.mark.e2e

LEASE_TTL = 4.0


@pytest.fixture
def daemon_config(tmp_path: Path, kafka: KafkaTestHelper) -> Path:
    topic = kafka.create_topic()
    config = {
        "clusters": [
            {
                "name": "shared",
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "topics": {"allow": [topic]},
            }
        ],
        "intervals": {"offsets_seconds": 1, "metadata_seconds": 2, "log_dirs_seconds": 30},
        "collect": {"lease_ttl_seconds": LEASE_TTL},
        # Collection leases only: no Spark session to start in either daemon.
        "evaluate": {"enabled": False},
        "log_level": "INFO",
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def start_daemon(daemon_config: Path, db_url: str, tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "DATABASE_URL": db_url, "KAFKA_HEALTH_WEB__PORT": str(free_port())}
        proc = spawn_daemon(daemon_config, tmp_path / f"{name}.log", env)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def instances_collecting(engine: Engine, since: float) -> set[str]:
    with engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT DISTINCT instance FROM collection_runs WHERE cluster = 'shared' AND job = 'offsets'"
                " AND started_at > to_timestamp(:since)"
            ),
            {"since": since},
        ).scalars()
        return set(found)


def test_one_instance_collects_and_the_other_takes_over(
    start_daemon: object, engine: Engine, tmp_path: Path
) -> None:
    host = socket.gethostname()
    a = start_daemon("a")  # type: ignore[operator]
    wait_for(lambda: f"{host}:{a.pid}" in instances_collecting(engine, 0), 60, "daemon a to collect")
    b = start_daemon("b")  # type: ignore[operator]
    # b is up (its jobs scheduled) before a is killed: the takeover is timed from the kill.
    wait_for(lambda: "starting scheduler" in (tmp_path / "b.log").read_text(), 180, "daemon b to start")
    time.sleep(3 * LEASE_TTL)
    window_start = time.time() - 2 * LEASE_TTL
    assert instances_collecting(engine, window_start) == {f"{host}:{a.pid}"}, (
        "exactly one live instance collects"
    )
    assert b.poll() is None

    a.send_signal(signal.SIGKILL)
    a.wait(10)
    killed_at = time.time()
    wait_for(
        lambda: f"{host}:{b.pid}" in instances_collecting(engine, killed_at),
        2 * LEASE_TTL + 10,
        "b to take over",
    )
    took = time.time() - killed_at
    # Two lease periods, plus one offsets interval for the first job to run after the takeover.
    assert took <= 2 * LEASE_TTL + 2, took


def test_sigterm_stops_cleanly_and_releases_the_lease(start_daemon: object, engine: Engine) -> None:
    host = socket.gethostname()
    a = start_daemon("solo")  # type: ignore[operator]
    wait_for(lambda: f"{host}:{a.pid}" in instances_collecting(engine, 0), 60, "the daemon to collect")
    a.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0
    with engine.connect() as conn:
        holders = (
            conn.execute(text("SELECT holder FROM leases WHERE name = 'collect:shared'")).scalars().all()
        )
        # This daemon's runs only: the database is the module's, and the previous test SIGKILLs a
        # daemon, whose in-flight run stays `running` by design.
        running = conn.execute(
            text(
                "SELECT count(*) FROM collection_runs"
                " WHERE cluster = 'shared' AND status = 'running' AND instance = :me"
            ),
            {"me": f"{host}:{a.pid}"},
        ).scalar()
    assert f"{host}:{a.pid}" not in holders
    assert running == 0, "an in-flight run was left unfinished"
