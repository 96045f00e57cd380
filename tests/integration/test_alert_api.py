"""Acknowledgements and silences over HTTP: the link in a notification, the JSON API, and the
errors that say what is wrong with a request."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.cycle import run_cycle
from monitor.core.clock import FakeClock
from monitor.core.settings import IdentityConfig
from monitor.expose.web.app import create_app
from tests.fixtures.people import IDENTITY, PROXY, STRANGER, Person

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)


ORDERS = ["cluster=prod", "topic=orders", "team=payments"]


@pytest.fixture
def app(engine: Engine) -> FastAPI:
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE findings, alerts, alert_groups, acks, silences, notification_outbox, notification_log,"
                " audit_log, api_tokens"
            )
        )
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES ('PartitionReplicaLost', 'partition', 'prod/orders/0', 'prod', CAST(:labels AS jsonb),"
                " 'warning', 1, 'orders[0] lost a replica', '', 0, 'firing', :t, :t, :t)"
            ),
            {"labels": json.dumps({"cluster": "prod", "topic": "orders", "partition": "0"}), "t": T0},
        )
        routing = load_routing(*default_routing_paths())
        run_cycle(conn, routing, T0, "http://monitor.test")
        run_cycle(conn, routing, T0 + timedelta(seconds=30), "http://monitor.test")
    clock = FakeClock(T0 + timedelta(minutes=1))
    return create_app(
        engine, stale_after=timedelta(minutes=5), clock=clock, silence_max_seconds=86400, identity=IDENTITY
    )


@pytest.fixture
def client(app: FastAPI) -> TestClient:
    """Anonymous, from the proxy's address (as a request the proxy let through without a user)."""
    return TestClient(app, client=PROXY)


def _silence(matchers: list[str], **extra: object) -> dict[str, object]:
    return {"matchers": matchers, "duration_seconds": 3600, "comment": "upgrade", **extra}


def _count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def _token(engine: Engine) -> tuple[int, str]:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT id, ack_token FROM alert_groups WHERE receiver = 'ops-slack'")).one()
    return int(row.id), str(row.ack_token)


def _audit(engine: Engine) -> list[tuple[str, str, str, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT subject, actor, action, via FROM audit_log ORDER BY id")).all()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_the_acknowledgement_link_asks_then_acknowledges_as_the_signed_in_person(
    app: FastAPI, engine: Engine
) -> None:
    _, token = _token(engine)
    alice = Person(app, "alice", "kafka-platform")  # the incident's alert has no team
    page = alice.http.get(f"/ack/{token}")
    assert page.status_code == 200 and "Acknowledge as <strong>alice</strong>" in page.text
    assert 'name="by"' not in page.text, "nobody types a name: the identity is who acknowledges"
    assert _count(engine, "acks") == 0, "a GET changes nothing"

    done = alice.http.post(f"/ack/{token}", data={"comment": "on it", "csrf_token": alice.csrf})
    assert done.status_code == 200 and "Acknowledged" in done.text
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT g.acknowledged_by, a.via, a.comment FROM alert_groups g JOIN acks a ON a.alert_group_id = g.id"
            )
        ).one()
    assert tuple(row) == ("alice", "link", "on it")
    assert ("incident", "alice", "acknowledged", "proxy") in _audit(engine)

    replay = alice.http.post(f"/ack/{token}", data={"csrf_token": alice.csrf})
    assert replay.status_code == 409 and "works once" in replay.text
    assert _count(engine, "acks") == 1


def test_acknowledgement_links_refuse_strangers_forgeries_and_old_tokens(
    app: FastAPI, client: TestClient, engine: Engine
) -> None:
    _, token = _token(engine)
    anonymous = client.post(f"/ack/{token}", data={"by": "alice"})
    assert anonymous.status_code == 401 and "Sign in" in anonymous.text
    assert client.get(f"/ack/{token}").status_code == 401
    alice = Person(app, "alice", "payments")
    no_csrf = alice.http.post(f"/ack/{token}", data={}, headers={"X-CSRF-Token": ""})
    assert no_csrf.status_code == 403
    cross_site = alice.http.post(
        f"/ack/{token}", data={"csrf_token": alice.csrf},
        headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    )  # fmt: skip
    assert cross_site.status_code == 403
    foreign = alice.http.post("/ack/not-a-token-of-ours", data={"csrf_token": alice.csrf})
    assert foreign.status_code == 404
    with engine.begin() as conn:
        conn.execute(text("UPDATE alert_groups SET last_notified_at = :t"), {"t": T0 - timedelta(days=8)})
    expired = alice.http.post(f"/ack/{token}", data={"csrf_token": alice.csrf})
    assert expired.status_code == 410 and "expired" in expired.text
    assert _count(engine, "acks") == 0


def test_the_api_acknowledges_as_the_identity_never_as_the_body_says(
    app: FastAPI, client: TestClient, engine: Engine
) -> None:
    incident, _ = _token(engine)
    assert client.post(f"/api/v1/incidents/{incident}/ack", json={}).status_code == 401
    bob = Person(app, "bob", "kafka-platform")
    forged = bob.http.post(f"/api/v1/incidents/{incident}/ack", json={"by": "mallory"})
    assert forged.status_code == 422 and "your identity" in forged.json()["error"]["message"]
    assert _count(engine, "acks") == 0
    assert bob.http.post(f"/api/v1/incidents/{incident}/ack", json={"comment": "mine"}).json() == {
        "acknowledged": [incident],
        "by": "bob",
    }
    listed = {i["id"]: i for i in client.get("/api/v1/incidents").json()}
    assert listed[incident]["acknowledged_by"] == "bob"
    assert bob.http.post("/api/v1/incidents/999999/ack", json={}).status_code == 404
    assert bob.http.post(f"/api/v1/incidents/{2**63}/ack", json={}).status_code == 422
    assert bob.http.post(f"/api/v1/incidents/{incident}/ack", json={"who": "bob"}).status_code == 422


@pytest.mark.parametrize(
    ("who", "body", "status"),
    [
        (None, _silence(ORDERS), 401),
        (("carol", "search"), _silence(ORDERS), 403),
        (("carol", "payments"), _silence(["severity=~.*"]), 403),
        (("carol", "payments"), _silence(["cluster=prod"]), 403),
        (("carol", "payments"), _silence(["team=~payments|search"]), 403),
        (("carol", "payments"), _silence(ORDERS, created_by="mallory"), 422),
        (("carol", "payments"), _silence(["rule=~(.*.*)*\\1", "team=payments"]), 422),
        (("carol", "payments"), _silence(ORDERS, duration_seconds=2**63), 422),
        (("carol", "payments"), _silence(ORDERS, starts_at="9999-12-31T00:00:00+00:00"), 422),
        (("carol", "payments"), _silence(ORDERS), 201),
        (("pat", "kafka-platform"), _silence(["severity=~.*"]), 201),
    ],
    ids=["anonymous", "other-team", "every-alert", "no-team", "team-regex", "forged-by", "backreference",
         "huge-duration", "year-9999", "own-team", "platform-everything"],
)  # fmt: skip
def test_who_may_create_a_silence(
    app: FastAPI,
    client: TestClient,
    engine: Engine,
    who: tuple[str, ...] | None,
    body: dict[str, object],
    status: int,
) -> None:
    http = Person(app, *who).http if who else client
    answer = http.post("/api/v1/silences", json=body)
    assert answer.status_code == status, answer.text
    assert _count(engine, "silences") == (1 if status == 201 else 0)
    if status == 201:
        assert answer.json()["created_by"] == who[0] if who else False
        assert _audit(engine)[-1] == ("silence", who[0], "silence_created", "proxy") if who else False
    if status == 403:
        assert _audit(engine)[-1][2] == "refused", "a refusal of someone identified is audited"


def test_proxy_headers_count_only_from_the_proxy(app: FastAPI, engine: Engine) -> None:
    stranger = TestClient(app, client=STRANGER)
    stranger.headers.update({"X-Forwarded-User": "pat", "X-Forwarded-Groups": "kafka-platform"})
    assert stranger.get("/api/v1/whoami").json()["identity"] is None
    assert stranger.post("/api/v1/silences", json=_silence(["severity=~.*"])).status_code == 401
    assert _count(engine, "silences") == 0


def test_a_proxy_identity_needs_the_csrf_token_and_a_same_site_origin(app: FastAPI, engine: Engine) -> None:
    carol = Person(app, "carol", "payments")
    missing = carol.http.post("/api/v1/silences", json=_silence(ORDERS), headers={"X-CSRF-Token": ""})
    assert missing.status_code == 403
    other_user = Person(app, "dave", "payments")
    swapped = carol.http.post(
        "/api/v1/silences", json=_silence(ORDERS), headers={"X-CSRF-Token": other_user.csrf}
    )
    assert swapped.status_code == 403, "a token signed for someone else"
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
        assert carol.http.post("/api/v1/silences", json=_silence(ORDERS), headers=headers).status_code == 403
    same = carol.http.post("/api/v1/silences", json=_silence(ORDERS),
                           headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"})  # fmt: skip
    assert same.status_code == 201
    assert _count(engine, "silences") == 1


def test_cross_site_forms_change_nothing(app: FastAPI, engine: Engine) -> None:
    incident, _ = _token(engine)
    carol = Person(app, "carol", "payments")
    evil = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "X-CSRF-Token": ""}
    posted = [
        carol.http.post("/alerts/silences", data={"matchers": "severity=~.*", "duration": "7d", "comment": "x"},
                        headers=evil, follow_redirects=False),
        carol.http.post("/alerts/ack", data={"incident": str(incident)}, headers=evil, follow_redirects=False),
    ]  # fmt: skip
    assert [r.status_code for r in posted] == [403, 403]
    assert _count(engine, "silences") == 0 and _count(engine, "acks") == 0
    made = carol.http.post(
        "/alerts/silences",
        data={
            "matchers": "\n".join(ORDERS),
            "duration": "1h",
            "comment": "upgrade",
            "csrf_token": carol.csrf,
        },
        follow_redirects=False,
    )
    assert made.status_code == 303 and _count(engine, "silences") == 1
    silence_id = client_silences(carol)[0]["id"]
    assert client_silences(carol)[0]["created_by"] == "carol"
    forged = carol.http.post(f"/alerts/silences/{silence_id}/expire", data={}, headers=evil)
    assert forged.status_code == 403 and client_silences(carol) != []


def client_silences(person: Person) -> list[dict[str, object]]:
    return person.http.get("/api/v1/silences").json()  # type: ignore[no-any-return]


def test_who_may_expire_a_silence(app: FastAPI, client: TestClient, engine: Engine) -> None:
    carol = Person(app, "carol", "payments")
    silence_id = carol.http.post("/api/v1/silences", json=_silence(ORDERS)).json()["id"]
    assert client.delete(f"/api/v1/silences/{silence_id}").status_code == 401
    assert Person(app, "erin", "search").http.delete(f"/api/v1/silences/{silence_id}").status_code == 403
    assert Person(app, "dave", "payments").http.delete(f"/api/v1/silences/{silence_id}").status_code == 200
    assert client.get("/api/v1/silences").json() == []
    assert carol.http.delete(f"/api/v1/silences/{silence_id}").status_code == 404
    actions = [(a[1], a[2]) for a in _audit(engine)]
    assert actions == [("carol", "silence_created"), ("erin", "refused"), ("dave", "silence_expired"),
                       ("carol", "refused")]  # fmt: skip


def test_silences_over_the_api(app: FastAPI) -> None:
    pat = Person(app, "pat", "kafka-platform")
    bad = pat.http.post("/api/v1/silences", json=_silence(["cluster=~(unclosed"]))
    assert bad.status_code == 422 and "bad matcher" in bad.json()["error"]["message"]
    too_long = pat.http.post("/api/v1/silences", json=_silence(["cluster=prod"], duration_seconds=30 * 86400))
    assert too_long.status_code == 422 and "at most" in too_long.json()["error"]["message"]

    made = pat.http.post("/api/v1/silences", json=_silence(["cluster=prod"]))
    assert made.status_code == 201
    silence_id = made.json()["id"]
    listed = pat.http.get("/api/v1/silences").json()
    assert [(s["id"], s["created_by"], s["comment"], s["active"]) for s in listed] == [
        (silence_id, "pat", "upgrade", True)
    ]
    later = pat.http.post(
        "/api/v1/silences",
        json=_silence(["cluster=prod"], duration_seconds=600, starts_at="2026-05-02T01:00:00+00:00"),
    )
    assert later.status_code == 201
    future = next(s for s in pat.http.get("/api/v1/silences").json() if s["id"] == later.json()["id"])
    assert future["active"] is False and future["starts_at"].startswith("2026-05-02T01:00:00")
    assert pat.http.delete(f"/api/v1/silences/{later.json()['id']}").status_code == 200
    assert pat.http.delete(f"/api/v1/silences/{silence_id}").status_code == 200
    assert pat.http.get("/api/v1/silences").json() == []
    assert pat.http.delete(f"/api/v1/silences/{silence_id}").status_code == 404


def test_alerts_are_listed(client: TestClient) -> None:
    alerts = client.get("/api/v1/alerts").json()
    assert [(a["rule"], a["severity"], a["state"]) for a in alerts] == [
        ("PartitionReplicaLost", "warning", "firing")
    ]


def test_metrics_show_delivery_failures_by_receiver_and_reason(client: TestClient, engine: Engine) -> None:
    from monitor.alert.model import DeliveryResult, FailureReason
    from monitor.alert.notify.retry import RetryPolicy
    from monitor.alert.notify.sender import Sender

    class Refusing:
        def send(self, notification: object) -> DeliveryResult:
            return DeliveryResult.failed(FailureReason.CLIENT_ERROR, "HTTP 400: invalid routing key", 400)

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
    """The command line acts with the database's credentials: `--as` and `--team` say who, and the
    same authorization rule and audit trail apply."""
    from rich.console import Console
    from typer.testing import CliRunner

    from monitor.cli import alerts as cli_alerts
    from monitor.cli.main import app

    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setattr(cli_alerts, "out", Console(width=400, soft_wrap=True))
    runner = CliRunner()
    listed = runner.invoke(app, ["alerts", "list"])
    assert listed.exit_code == 0 and "PartitionReplicaLost" in listed.output
    incident, _ = _token(engine)
    not_theirs = runner.invoke(app, ["alerts", "ack", str(incident), "--as", "dave", "--team", "payments"])
    assert (
        not_theirs.exit_code == 1 and "may acknowledge only their own teams' incidents" in not_theirs.output
    )
    acked = runner.invoke(
        app, ["alerts", "ack", str(incident), "--as", "dave", "--team", "kafka-platform", "-m", "looking"]
    )
    assert acked.exit_code == 0, acked.output
    assert f"acknowledged incident(s) {incident} as dave" in acked.output
    missing = runner.invoke(app, ["alerts", "ack", "999999", "--as", "dave"])
    assert missing.exit_code == 1 and "no open incident" in missing.output

    no_reason = runner.invoke(app, ["alerts", "silence", "team=payments", "--for", "1h", "--as", "dave",
                                    "--team", "payments"])  # fmt: skip
    assert no_reason.exit_code == 1 and "--comment" in no_reason.output
    not_theirs = runner.invoke(app, ["alerts", "silence", "cluster=prod", "--for", "1h", "-m", "x", "--as", "dave",
                                     "--team", "payments"])  # fmt: skip
    assert not_theirs.exit_code == 1 and "forbidden" in not_theirs.output and "team=" in not_theirs.output
    bad_for = runner.invoke(app, ["alerts", "silence", "cluster=prod", "--for", "soon", "-m", "x"])
    assert bad_for.exit_code == 2 and "--for: bad duration 'soon'" in bad_for.output
    made = runner.invoke(
        app,
        [
            "alerts",
            "silence",
            "cluster=prod",
            "--for",
            "1h",
            "-m",
            "upgrade",
            "--as",
            "dave",
            "-t",
            "kafka-platform",
        ],
    )
    assert made.exit_code == 0, made.output
    silences = runner.invoke(app, ["alerts", "silences"])
    assert "cluster=prod" in silences.output and "dave" in silences.output
    with engine.connect() as conn:
        audited = conn.execute(text("SELECT actor, action, via, address FROM audit_log ORDER BY id")).all()
    assert [tuple(a[:3]) for a in audited] == [
        ("dave", "refused", "cli"), ("dave", "acknowledged", "cli"), ("dave", "refused", "cli"),
        ("dave", "refused", "cli"), ("dave", "refused", "cli"), ("dave", "silence_created", "cli"),
    ]  # fmt: skip
    assert all(str(a.address).startswith("cli@") for a in audited)
    outbox = runner.invoke(app, ["alerts", "outbox", "--state", "pending"])
    assert outbox.exit_code == 0 and "notification outbox" in outbox.output
    assert runner.invoke(app, ["alerts", "outbox", "--state", "stuck"]).exit_code == 2


@pytest.mark.parametrize(
    "raw",
    [
        '{"matchers": ["team=payments"], "duration_seconds": NaN, "comment": "x"}',
        '{"matchers": ["team=payments"], "duration_seconds": Infinity, "comment": "x"}',
        '{"matchers": ["team=payments"], "duration_seconds": 1e400, "comment": "x"}',
        '{"matchers": ["team=payments\\ud800"], "duration_seconds": 60, "comment": "x"}',
        '{"matchers": ["team=payments"], "duration_seconds": 60, "comment": "nul \\u0000 byte"}',
        '{"matchers": ["team=payments"], "duration_seconds": 60, "comment": "x", "starts_at": "9999-12-31T23:59:59+00:00"}',
        '{"matchers": ["' + "a" * 5000 + '=~x"], "duration_seconds": 60, "comment": "x"}',
        "[1, 2",
    ],
    ids=["nan", "infinity", "1e400", "lone-surrogate", "nul", "year-9999", "long-matcher", "broken-json"],
)
def test_any_body_gets_a_4xx_with_a_reason(app: FastAPI, engine: Engine, raw: str) -> None:
    carol = Person(app, "carol", "payments")
    answer = carol.http.post("/api/v1/silences", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"]
    assert _count(engine, "silences") == 0


def test_bad_paths_and_queries_get_a_4xx(app: FastAPI) -> None:
    carol = Person(app, "carol", "payments")
    assert carol.http.get("/api/v1/clusters/prod%00x").status_code == 422
    assert carol.http.get("/api/v1/retention-requests?limit=-1").status_code in (404, 422)
    assert carol.http.delete(f"/api/v1/silences/{2**64}").status_code == 422
    assert carol.http.delete("/api/v1/silences/0").status_code == 422
    form = carol.http.post(
        "/alerts/silences", follow_redirects=False,
        data={"matchers": "team=payments", "duration": "99999999999d", "comment": "x", "csrf_token": carol.csrf},
    )  # fmt: skip
    assert form.status_code == 422 and "at most" in form.text, "the form again, with the reason"
    ack = carol.http.post(
        "/alerts/ack", data={"incident": "9" * 30, "csrf_token": carol.csrf}, follow_redirects=False
    )
    assert ack.status_code == 303 and "whole number from 1" in unquote(ack.cookies.get("kh_flash", ""))


def test_database_errors_are_told_apart() -> None:
    """A value the database refuses is the request's fault (400); only a database that does not
    answer is 503; and neither leaks the statement or its parameters."""
    import psycopg
    from sqlalchemy.exc import DataError, IntegrityError, OperationalError

    from monitor.expose.web.app import database_answer

    refused = DataError("SELECT :p", {"p": "secret"}, psycopg.DataError("value out of range for type bigint"))
    conflict = IntegrityError("INSERT", {}, psycopg.IntegrityError("duplicate key value"))
    away = OperationalError("SELECT 1", {}, psycopg.OperationalError("connection refused"))
    answers = [database_answer(e) for e in (refused, conflict, away)]
    assert [a.status_code for a in answers] == [400, 409, 503]
    assert b"out of range" in answers[0].body and b"secret" not in answers[0].body
    assert b"did not answer" in answers[2].body


def test_reads_can_be_put_behind_the_same_identity(engine: Engine) -> None:
    identity = IdentityConfig(trusted_proxies=["127.0.0.1"], protect_reads=True)
    app = create_app(engine, stale_after=timedelta(minutes=5), identity=identity)
    anonymous = TestClient(app, client=PROXY)
    for path in ("/api/v1/alerts", "/alerts", "/api/v1/clusters", "/v3/kafka"):
        assert anonymous.get(path).status_code == 401, path
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/metrics").status_code == 200
    assert Person(app, "carol", "payments").http.get("/api/v1/alerts").status_code == 200


def test_a_proxy_on_the_same_host_keeps_its_identity(app: FastAPI, engine: Engine) -> None:
    """Through the real web server: a proxy on 127.0.0.1 that adds X-Forwarded-For is still seen
    as the proxy (the server does not rewrite the peer's address), so its user is believed, and the
    audit records the address the proxy forwarded."""
    import httpx

    from tests.fixtures.browser import serve_app

    headers = {
        "X-Forwarded-User": "carol",
        "X-Forwarded-Groups": "payments",
        "X-Forwarded-For": "198.51.100.7",
    }
    with serve_app(app) as url, httpx.Client(base_url=url, headers=headers, timeout=10) as http:
        assert http.get("/api/v1/whoami").json()["identity"]["user"] == "carol"
        http.headers["X-CSRF-Token"] = http.get("/api/v1/csrf-token").json()["token"]
        assert http.post("/api/v1/silences", json=_silence(ORDERS)).status_code == 201
    with engine.connect() as conn:
        address = conn.execute(
            text("SELECT address FROM audit_log WHERE action = 'silence_created'")
        ).scalar()
    assert address == "198.51.100.7"


@pytest.mark.parametrize(
    ("forwarded", "recorded"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("6.6.6.6, 198.51.100.7", "198.51.100.7"),
        ("198.51.100.7, <img src=x onerror=alert(1)>", None),
        ("198.51.100.7, \x1b[2J\x1b]8;;http://evil\x07", None),
        ("6.6.6.6, 2001:db8::7", "2001:db8::7"),
        (", ".join(["6.6.6.6"] * 2000 + ["203.0.113.5"]), "203.0.113.5"),
        ("", "127.0.0.1"),
    ],
    ids=["plain", "spoofed-first", "markup", "escapes", "ipv6", "many", "empty"],
)
def test_the_audit_records_the_right_most_untrusted_forwarded_address_or_none(
    app: FastAPI, engine: Engine, forwarded: str, recorded: str | None
) -> None:
    carol = Person(app, "carol", "payments")
    answer = carol.http.post(
        "/api/v1/silences", json=_silence(ORDERS), headers={"X-Forwarded-For": forwarded}
    )
    assert answer.status_code == 201, answer.text
    with engine.connect() as conn:
        address = conn.execute(
            text("SELECT address FROM audit_log WHERE action = 'silence_created' ORDER BY id DESC LIMIT 1")
        ).scalar()
    assert address == recorded


def _team_incident(engine: Engine, team: str) -> int:
    """An incident of a consumer group's lag alert labelled `team` (its own notification group)."""
    group = f"{team}-ledger"
    labels = {"cluster": "prod", "topic": f"{team}.orders", "group_id": group, "team": team}
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES ('ConsumerAppendLag', 'group_topic', :key, 'prod', CAST(:labels AS jsonb),"
                " 'warning', 600, 'behind', '', 0, 'firing', :t, :t, :t)"
            ),
            {"key": f"prod/{group}/{team}.orders", "labels": json.dumps(labels), "t": T0},
        )
        routing = load_routing(*default_routing_paths())
        for seconds in (40, 80):
            run_cycle(conn, routing, T0 + timedelta(seconds=seconds), "http://monitor.test")
        return int(
            conn.execute(
                text("SELECT min(id) FROM alert_groups WHERE group_labels->>'group_id' = :g"), {"g": group}
            ).scalar_one()
        )


ACKS = [
    # (the incident's alerts' team, who acknowledges, allowed)
    ("payments", ("ann", "payments"), True),
    ("payments", ("ann", "search", "payments"), True),
    ("payments", ("bob", "search"), False),
    ("payments", ("bob",), False),
    ("payments", ("pat", "kafka-platform"), True),
    (None, ("ann", "payments"), False),  # alerts without a team: the platform role only
    (None, ("pat", "kafka-platform"), True),
]


@pytest.mark.parametrize("via", ["api", "form"])
@pytest.mark.parametrize(("team", "person", "allowed"), ACKS)
def test_who_may_acknowledge_is_the_alerts_team_or_the_platform_role(
    app: FastAPI, engine: Engine, via: str, team: str | None, person: tuple[str, ...], allowed: bool
) -> None:
    incident = _team_incident(engine, team) if team else _token(engine)[0]
    who = Person(app, *person)
    if via == "api":
        answer = who.http.post(f"/api/v1/incidents/{incident}/ack", json={"comment": "mine"})
        assert answer.status_code == (200 if allowed else 403), answer.text
        if not allowed:
            assert "platform role" in answer.json()["error"]["message"]
    else:
        answer = who.http.post(
            "/alerts/ack", data={"incident": str(incident), "csrf_token": who.csrf}, follow_redirects=False
        )
        assert answer.status_code == 303
        flash = json.loads(unquote(answer.cookies["kh_flash"]))
        assert flash["kind"] == ("ok" if allowed else "error"), flash
    with engine.connect() as conn:
        acked_by = conn.execute(
            text("SELECT acknowledged_by FROM alert_groups WHERE id = :i"), {"i": incident}
        ).scalar()
        last = conn.execute(text("SELECT actor, action FROM audit_log ORDER BY id DESC LIMIT 1")).one()
    assert acked_by == (person[0] if allowed else None)
    assert tuple(last) == (person[0], "acknowledged" if allowed else "refused")


def test_change_requests_are_limited_per_identity_with_retry_after(engine: Engine) -> None:
    """One limiter for every change route, API and forms together: past the limit a 429 that says
    when to come back, and nothing changed; another person is not held back."""
    identity = IDENTITY.model_copy(update={"change_requests_per_minute": 3})
    app = create_app(engine, stale_after=timedelta(minutes=5), silence_max_seconds=86400, identity=identity)
    carol, dave = Person(app, "carol", "payments"), Person(app, "dave", "payments")
    before = _count(engine, "silences")
    answers = [carol.http.post("/api/v1/silences", json=_silence(ORDERS)).status_code for _ in range(3)]
    assert answers == [201, 201, 201]

    limited = carol.http.post("/api/v1/silences", json=_silence(ORDERS))
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert "change_requests_per_minute" in limited.json()["error"]["message"]
    form = carol.http.post(
        "/alerts/silences",
        data={"matchers": "team=payments", "comment": "x", "duration": "1h", "csrf_token": carol.csrf},
        follow_redirects=False,
    )
    assert form.status_code == 429 and 1 <= int(form.headers["Retry-After"]) <= 60
    assert "Too many changes" in form.text
    ack = carol.http.post("/api/v1/incidents/1/ack", json={})
    assert ack.status_code == 429, "every change route counts against the same limit"
    assert _count(engine, "silences") == before + 3

    assert dave.http.post("/api/v1/silences", json=_silence(ORDERS)).status_code == 201
    assert carol.http.get("/api/v1/silences").status_code == 200, "reads are not limited"
