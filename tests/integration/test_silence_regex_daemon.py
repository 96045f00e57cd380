"""A silence whose pattern makes a backtracking engine run for hours (`(.*.*)*\\d`, which once froze
the daemon: /healthz silent, SIGINT ignored) is matched in linear time by RE2 against long labels
every alert cycle, while the real daemon process keeps answering /healthz and stops on SIGINT.
A pattern RE2 cannot run in linear time (a backreference) is refused with a 422 that says why."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import Engine, text

from monitor.store.changes import findings_of, raise_versions
from tests.conditions import wait_for
from tests.fixtures.receivers import free_port

pytestmark = pytest.mark.e2e

LONG = "a" * 20_000
"""A label long enough that `(.*.*)*\\d` against it would not finish in a backtracking engine."""
PATTERN = "(.*.*)*\\d"


@pytest.fixture
def daemon(tmp_path: Path, db_url: str, engine: Engine) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE findings, alerts, alert_groups, acks, silences, audit_log"))
    _add_findings(engine, range(60))
    port = free_port()
    config = {
        "clusters": [{"name": "regex", "bootstrap_servers": [f"127.0.0.1:{free_port()}"]}],
        "evaluate": {"enabled": False},
        "retention": {"enabled": False},
        "alert": {"interval_seconds": 1},
        "web": {
            "port": port,
            "identity": {"trusted_proxies": ["127.0.0.1"], "platform_teams": ["kafka-platform"]},
        },
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "run", "--config", str(path)],
        env={**os.environ, "DATABASE_URL": db_url},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url), 60, "the daemon's web server")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _add_findings(engine: Engine, indexes: range) -> None:
    """Firing findings with long group ids; the odd ones end in a digit (the silence matches them),
    written as the evaluation writes them."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        for index in indexes:
            group = LONG + (str(index % 10) if index % 2 else "x")
            conn.execute(
                text(
                    "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                    " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                    " VALUES ('ConsumerAppendLag', 'group', :key, 'regex', CAST(:labels AS jsonb), 'warning',"
                    " 1, 'behind', '', 0, 'firing', :t, :t, :t)"
                ),
                {"key": f"regex/{index}", "t": now,
                 "labels": json.dumps({"cluster": "regex", "group_id": group, "n": str(index)})},
            )  # fmt: skip
        # As a merge of the evaluation's findings does: the alert stage reads a cluster's
        # findings again when their counter moved (monitor.alert.memory).
        raise_versions(conn, [findings_of("regex")])


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _silenced(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT count(*) FILTER (WHERE silenced_by IS NOT NULL), count(*) FROM alerts"
                " WHERE state = 'firing' AND cluster = 'regex'"
            )
        ).one()
    return int(row[0]), int(row[1])


def test_a_catastrophic_pattern_neither_freezes_the_daemon_nor_is_refused_without_reason(
    daemon: tuple[subprocess.Popen[bytes], str], engine: Engine
) -> None:
    proc, url = daemon
    headers = {"X-Forwarded-User": "pat", "X-Forwarded-Groups": "kafka-platform"}
    with httpx.Client(base_url=url, headers=headers, timeout=10) as http:
        http.headers["X-CSRF-Token"] = http.get("/api/v1/csrf-token").json()["token"]
        refused = http.post("/api/v1/silences", json={
            "matchers": ["group_id=~(a)\\1"], "duration_seconds": 3600, "comment": "backreference"})  # fmt: skip
        assert refused.status_code == 422 and "RE2" in refused.json()["error"]["message"], refused.text
        made = http.post("/api/v1/silences", json={
            "matchers": [f"group_id=~{PATTERN}"], "duration_seconds": 3600, "comment": "catastrophic"})  # fmt: skip
        assert made.status_code == 201, made.text

    wait_for(lambda: _silenced(engine) == (30, 60), 60, "the alert cycle to apply the silence")
    started = time.monotonic()
    while time.monotonic() - started < 5:  # several alert cycles, each matching 60 long labels
        # a frozen daemon never answers; 5 s leaves room for a loaded machine
        assert httpx.get(url + "/healthz", timeout=5).status_code == 200
        time.sleep(0.2)
    _add_findings(engine, range(60, 70))  # later cycles match the pattern against these too
    wait_for(lambda: _silenced(engine) == (35, 70), 60, "later alert cycles to apply the silence")
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200

    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) is not None, "the daemon stops on SIGINT"
