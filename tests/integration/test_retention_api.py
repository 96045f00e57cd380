"""The retention API's identity rules over the real app, PostgreSQL and cluster: nothing anonymous,
proxy headers only from the trusted proxy, CSRF on browser requests, hashed API tokens, and the
labelled development mode."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from monitor.act.gitrepo import ConfigRepo
from monitor.act.service import RetentionService
from monitor.act.tokens import create_token, revoke_token
from monitor.core.clock import SystemClock
from monitor.core.settings import ClusterConfig, IdentityConfig, RetentionConfig
from monitor.expose.web.app import create_app
from tests.fixtures.kafka import KafkaTestHelper

CLUSTER = "api-test"
DAY_MS = 86_400_000
PROXY = ("10.1.2.3", 40000)
STRANGER = ("10.9.9.9", 40000)
ALICE = {"X-Forwarded-User": "alice", "X-Forwarded-Groups": "payments, other"}
POLICY = """
limits: {max_retention_ms: 30d, max_retention_bytes: 1TiB, max_multiple: 10, max_duration: 14d}
instant: {max_retention_ms: 7d, max_retention_bytes: 100GiB, max_multiple: 3, max_duration: 2d}
disk_usage_ceiling: 0.8
reviewers: [kafka-platform]
"""


@pytest.fixture(scope="module")
def service(
    kafka: KafkaTestHelper, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RetentionService]:
    home = tmp_path_factory.mktemp("retention-api")
    (home / "policy.yaml").write_text(POLICY)
    (home / "owners.yaml").write_text("teams:\n  - name: payments\n    topics: ['payments-.*']\n")
    cluster = ClusterConfig(name=CLUSTER, bootstrap_servers=kafka.bootstrap_servers.split(","))
    svc = RetentionService(RetentionConfig(), [cluster], lambda: engine, SystemClock(),
                           ConfigRepo(home / "configs"), home / "policy.yaml", home / "owners.yaml")  # fmt: skip
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def _app(engine: Engine, service: RetentionService, **identity: object) -> object:
    config = IdentityConfig(**identity)  # type: ignore[arg-type]
    return create_app(engine, stale_after=timedelta(minutes=5), retention=service, identity=config)


@pytest.fixture
def topic(kafka: KafkaTestHelper) -> str:
    return kafka.create_topic(f"payments-{uuid.uuid4().hex[:8]}", config={"retention.ms": str(DAY_MS)})


def _body(topic: str, retention_ms: str = "2d") -> dict[str, str]:
    return {
        "cluster": CLUSTER,
        "topic": topic,
        "retention_ms": retention_ms,
        "duration": "12h",
        "reason": "lag",
    }


def test_changes_need_an_identity_and_a_csrf_token(
    engine: Engine, service: RetentionService, topic: str
) -> None:
    app = _app(engine, service, trusted_proxies=["10.1.2.0/24"])
    anonymous = TestClient(app, client=PROXY).post("/api/v1/retention-requests", json=_body(topic))  # type: ignore[arg-type]
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthenticated"

    # Anyone can send the headers; only the proxy's are believed.
    spoofed = TestClient(app, client=STRANGER).post(
        "/api/v1/retention-requests", json=_body(topic), headers=ALICE
    )  # type: ignore[arg-type]
    assert spoofed.status_code == 401

    browser = TestClient(app, client=PROXY, headers=ALICE)  # type: ignore[arg-type]
    no_token = browser.post("/api/v1/retention-requests", json=_body(topic))
    assert no_token.status_code == 403 and no_token.json()["error"]["code"] == "csrf_failed"
    forged = browser.post("/api/v1/retention-requests", json=_body(topic), headers={"X-CSRF-Token": "1.abc"})
    assert forged.status_code == 403
    other_user = TestClient(app, client=PROXY, headers={"X-Forwarded-User": "mallory"})  # type: ignore[arg-type]
    stolen = other_user.get("/api/v1/csrf-token").json()["token"]
    assert (
        browser.post(
            "/api/v1/retention-requests", json=_body(topic), headers={"X-CSRF-Token": stolen}
        ).status_code
        == 403
    )

    token = browser.get("/api/v1/csrf-token").json()["token"]
    created = browser.post("/api/v1/retention-requests", json=_body(topic), headers={"X-CSRF-Token": token})
    assert created.status_code == 201, created.json()
    request = created.json()
    # Nothing collected about disks and produce rates here: the disk cost is unknown, so a reviewer decides.
    assert request["display_state"] == "awaiting-approval"
    assert request["requested_by"] == "alice"
    shown = browser.get(f"/api/v1/retention-requests/{request['id']}").json()
    assert [a["action"] for a in shown["audit"]][:2] == ["requested", "awaiting_approval"]
    assert shown["audit"][0]["detail"] == "via proxy"


def test_api_tokens_are_hashed_need_no_csrf_and_can_be_revoked(
    engine: Engine, service: RetentionService, topic: str
) -> None:
    with engine.begin() as conn:
        token = create_token(conn, name="ci", user="ci-bot", teams=["payments"], created_by="test",
                             now=datetime.now(UTC))  # fmt: skip
        stored = conn.execute(text("SELECT token_hash FROM api_tokens WHERE name = 'ci'")).scalar_one()
    assert token not in stored and len(stored) == 64
    client = TestClient(_app(engine, service), headers={"Authorization": f"Bearer {token}"})  # type: ignore[arg-type]
    lower = client.post("/api/v1/retention-requests", json=_body(topic, "1h"))
    assert lower.status_code == 422
    error = lower.json()["error"]
    assert error["code"] == "refused" and "higher_than_current" in error["message"]
    assert [c["rule"] for c in error["details"]["checks"] if not c["ok"]] == ["higher_than_current"]
    with engine.begin() as conn:
        revoke_token(conn, "ci", datetime.now(UTC))
    revoked = client.post("/api/v1/retention-requests", json=_body(topic))
    assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]["message"]


def test_development_mode_is_labelled(engine: Engine, service: RetentionService, tmp_path: Path) -> None:
    app = _app(engine, service, mode="development", development_user="dev", development_teams=["payments"])
    answer = TestClient(app).get("/api/v1/whoami")  # type: ignore[arg-type]
    assert answer.headers["X-Kafka-Health-Identity"] == "development"
    assert answer.json() == {"identity": {"user": "dev", "teams": ["payments"], "source": "development"},
                             "platform_role": False,
                             "development": True}  # fmt: skip
    assert (
        TestClient(app).get("/api/v1/retention-requests").headers["X-Kafka-Health-Identity"] == "development"
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("retention_ms", 10**400),
        ("retention_bytes", int("9" * 401)),
        ("retention_ms", "99999999999999999999d"),
        ("retention_bytes", "1e5000GiB"),
        ("duration", "99999999999999999999d"),
    ],
    ids=["ms-10^400", "bytes-401-digits", "ms-duration-overflow", "bytes-exponent", "duration-overflow"],
)
def test_numbers_no_config_can_hold_are_refused_with_a_reason(
    engine: Engine, service: RetentionService, topic: str, field: str, value: object
) -> None:
    with engine.begin() as conn:
        token = create_token(conn, name=f"big-{field}", user="ci-bot", teams=["payments"], created_by="test",
                             now=datetime.now(UTC))  # fmt: skip
    client = TestClient(_app(engine, service), headers={"Authorization": f"Bearer {token}"})  # type: ignore[arg-type]
    body = {**_body(topic), field: value}
    answer = client.post("/api/v1/retention-requests", json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.text
    with engine.connect() as conn:
        assert (
            conn.execute(
                text("SELECT count(*) FROM retention_requests WHERE topic = :t"), {"t": topic}
            ).scalar()
            == 0
        )
    for raw in ('{"cluster": NaN}', '{"retention_ms": Infinity}', '{"retention_ms": 1e400}'):
        odd = client.post(
            "/api/v1/retention-requests", content=raw, headers={"Content-Type": "application/json"}
        )
        assert odd.status_code == 422, (raw, odd.text)
