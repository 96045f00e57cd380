"""Acknowledgements and silences over HTTP: the link in a notification, the JSON API, and the
errors that say what is wrong with a request."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from monitor.alert.lifecycle import run_cycle
from monitor.alert.routing import default_routing_paths, load_routing
from monitor.clock import FakeClock
from monitor.expose.web import create_app

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def client(engine: Engine) -> TestClient:
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE findings, alerts, alert_groups, acks, silences, notification_outbox, notification_log"
            )
        )
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, runbook, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES ('PartitionReplicaLost', 'partition', 'prod/orders/0', 'prod', CAST(:labels AS jsonb),"
                " 'warning', 1, 'orders[0] lost a replica', '', NULL, 0, 'firing', :t, :t, :t)"
            ),
            {"labels": json.dumps({"cluster": "prod", "topic": "orders", "partition": "0"}), "t": T0},
        )
        routing = load_routing(*default_routing_paths())
        run_cycle(conn, routing, T0, "http://monitor.test")
        run_cycle(conn, routing, T0 + timedelta(seconds=30), "http://monitor.test")
    clock = FakeClock(T0 + timedelta(minutes=1))
    return TestClient(
        create_app(engine, stale_after=timedelta(minutes=5), clock=clock, silence_max_seconds=86400)
    )


def _token(engine: Engine) -> tuple[int, str]:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT id, ack_token FROM alert_groups WHERE receiver = 'ops-slack'")).one()
    return int(row.id), str(row.ack_token)


def test_the_acknowledgement_link_asks_then_acknowledges(client: TestClient, engine: Engine) -> None:
    _, token = _token(engine)
    page = client.get(f"/ack/{token}")
    assert page.status_code == 200 and 'name="by"' in page.text
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM acks")).scalar() == 0, "a GET changes nothing"

    done = client.post(f"/ack/{token}", data={"by": "alice", "comment": "on it"})
    assert done.status_code == 200 and "Acknowledged" in done.text
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT g.acknowledged_by, a.via, a.comment FROM alert_groups g JOIN acks a ON a.alert_group_id = g.id"
            )
        ).one()
    assert tuple(row) == ("alice", "link", "on it")


def test_an_unknown_link_and_a_nameless_acknowledgement_are_refused(
    client: TestClient, engine: Engine
) -> None:
    assert client.post("/ack/not-a-token", data={"by": "alice"}).status_code == 404
    _, token = _token(engine)
    refused = client.post(f"/ack/{token}", data={"by": "  "})
    assert refused.status_code == 400 and "say who acknowledges" in refused.text


def test_the_api_acknowledges_an_incident(client: TestClient, engine: Engine) -> None:
    incident, _ = _token(engine)
    assert client.post(f"/api/v1/incidents/{incident}/ack", json={"by": "bob"}).json() == {
        "acknowledged": [incident]
    }
    listed = {i["id"]: i for i in client.get("/api/v1/incidents").json()}
    assert listed[incident]["acknowledged_by"] == "bob"
    assert client.post("/api/v1/incidents/999999/ack", json={"by": "bob"}).status_code == 404
    assert client.post(f"/api/v1/incidents/{incident}/ack", json={"who": "bob"}).status_code == 422


def test_silences_over_the_api(client: TestClient) -> None:
    bad = client.post(
        "/api/v1/silences",
        json={"matchers": ["cluster=~(unclosed"], "duration_seconds": 600, "created_by": "c", "comment": "x"},
    )
    assert bad.status_code == 400 and "bad matcher" in bad.json()["error"]["message"]
    too_long = client.post(
        "/api/v1/silences",
        json={
            "matchers": ["cluster=prod"],
            "duration_seconds": 30 * 86400,
            "created_by": "c",
            "comment": "x",
        },
    )
    assert too_long.status_code == 400 and "at most" in too_long.json()["error"]["message"]

    made = client.post(
        "/api/v1/silences",
        json={
            "matchers": ["cluster=prod"],
            "duration_seconds": 3600,
            "created_by": "carol",
            "comment": "upgrade",
        },
    )
    assert made.status_code == 201
    silence_id = made.json()["id"]
    listed = client.get("/api/v1/silences").json()
    assert [(s["id"], s["created_by"], s["comment"], s["active"]) for s in listed] == [
        (silence_id, "carol", "upgrade", True)
    ]
    later = client.post(
        "/api/v1/silences",
        json={"matchers": ["cluster=prod"], "duration_seconds": 600, "created_by": "carol", "comment": "window",
              "starts_at": "2026-05-02T01:00:00+00:00"},
    )  # fmt: skip
    assert later.status_code == 201
    future = next(s for s in client.get("/api/v1/silences").json() if s["id"] == later.json()["id"])
    assert future["active"] is False and future["starts_at"].startswith("2026-05-02T01:00:00")
    assert client.delete(f"/api/v1/silences/{later.json()['id']}").status_code == 200
    assert client.delete(f"/api/v1/silences/{silence_id}").status_code == 200
    assert client.get("/api/v1/silences").json() == []
    assert client.delete(f"/api/v1/silences/{silence_id}").status_code == 404


def test_alerts_are_listed(client: TestClient) -> None:
    alerts = client.get("/api/v1/alerts").json()
    assert [(a["rule"], a["severity"], a["state"]) for a in alerts] == [
        ("PartitionReplicaLost", "warning", "firing")
    ]


def test_metrics_show_delivery_failures_by_receiver_and_reason(client: TestClient, engine: Engine) -> None:
    from monitor.alert.model import DeliveryResult
    from monitor.alert.outbox import RetryPolicy, Sender

    class Refusing:
        def send(self, notification: object) -> DeliveryResult:
            return DeliveryResult.give_up("HTTP 400: invalid routing key", 400)

    sender = Sender(lambda: engine, lambda: {"ops-slack": Refusing(), "ops-email": Refusing()},
                    FakeClock(T0 + timedelta(minutes=1)), "metrics-test", policy=RetryPolicy())  # fmt: skip
    try:
        assert sender.drain() == {"failed": 2}
    finally:
        sender.close()
    text_format = client.get("/metrics").text
    assert 'kafka_health_notification_failures_total{reason="http_400",receiver="ops-slack"}' in text_format
    assert 'kafka_health_notifications_total{outcome="failed",receiver="ops-email"}' in text_format


def test_the_alerts_cli_lists_acknowledges_and_silences(
    client: TestClient, engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console
    from typer.testing import CliRunner

    from monitor.alert import cli_alerts
    from monitor.cli import app

    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setattr(cli_alerts, "out", Console(width=400, soft_wrap=True))
    runner = CliRunner()
    listed = runner.invoke(app, ["alerts", "list"])
    assert listed.exit_code == 0 and "PartitionReplicaLost" in listed.output
    incident, _ = _token(engine)
    acked = runner.invoke(app, ["alerts", "ack", str(incident), "--by", "dave", "-m", "looking"])
    assert acked.exit_code == 0, acked.output
    assert f"acknowledged incident(s) {incident} as dave" in acked.output
    missing = runner.invoke(app, ["alerts", "ack", "999999", "--by", "dave"])
    assert missing.exit_code == 2 and "no open incident" in missing.output

    no_reason = runner.invoke(app, ["alerts", "silence", "cluster=prod", "--for", "1h", "--by", "dave"])
    assert no_reason.exit_code == 2 and "--comment" in no_reason.output
    bad_for = runner.invoke(app, ["alerts", "silence", "cluster=prod", "--for", "soon", "-m", "x"])
    assert bad_for.exit_code == 2 and "--for 'soon'" in bad_for.output
    made = runner.invoke(
        app, ["alerts", "silence", "cluster=prod", "--for", "1h", "-m", "upgrade", "--by", "dave"]
    )
    assert made.exit_code == 0, made.output
    silences = runner.invoke(app, ["alerts", "silences"])
    assert "cluster=prod" in silences.output and "dave" in silences.output
    outbox = runner.invoke(app, ["alerts", "outbox", "--state", "pending"])
    assert outbox.exit_code == 0 and "notification outbox" in outbox.output
    assert runner.invoke(app, ["alerts", "outbox", "--state", "stuck"]).exit_code == 2
