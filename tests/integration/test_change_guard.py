"""Every route that changes state goes through the one guard: an identity (never anonymous, proxy
headers only from the trusted proxy, no unknown API token), and for a browser's request the CSRF
token and a same-site origin. The list of such routes is read from the app itself, so a new
POST/PUT/PATCH/DELETE route fails here until it is added to `CHANGES` and checked.

Then the repair buttons of the alerts page and the repair command line: who may approve and
reject (a reviewer other than the requester), refusals that change nothing, and the audit trail.
The authorization rule of each change is tested beside its stage: silences and acknowledgements in
`test_alert_api.py`, retention in `test_retention_api.py` and `test_retention.py`, the repair
carried out against Kafka in `test_repairs.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import Engine, text

from monitor.act import repair_request as store
from monitor.act.gitrepo import ConfigRepo
from monitor.act.ledger import SYSTEM_ACTOR
from monitor.act.policy import default_policy_path, load_policy
from monitor.act.repairs import RepairService
from monitor.act.service import RetentionService
from monitor.core.clock import SystemClock
from monitor.core.settings import ClusterConfig, IdentityConfig, RetentionConfig
from monitor.expose.web.app import create_app
from monitor.expose.web.pages import retention_views as views
from monitor.expose.web.pages.alerts import FLASH_COOKIE
from monitor.expose.web.pages.retention_views import read_flash
from monitor.store.audit import Audit

PROXY = ("10.1.2.3", 40000)
STRANGER = ("10.9.9.9", 40000)
CLUSTER = "guarded"
CHANGES: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/incidents/{incident_id}/ack"): "json",
    ("POST", "/ack/{token}"): "form",
    ("POST", "/api/v1/silences"): "json",
    ("DELETE", "/api/v1/silences/{silence_id}"): "json",
    ("POST", "/api/v1/retention-requests/preview"): "json",
    ("POST", "/api/v1/retention-requests"): "json",
    ("POST", "/api/v1/retention-requests/{request_id}/approve"): "json",
    ("POST", "/api/v1/retention-requests/{request_id}/reject"): "json",
    ("POST", "/api/v1/retention-requests/{request_id}/revert"): "json",
    ("POST", "/api/v1/retention-requests/{request_id}/extend"): "json",
    ("POST", "/api/v1/repairs/preview"): "json",
    ("POST", "/api/v1/repairs"): "json",
    ("POST", "/api/v1/repairs/{repair_id}/approve"): "json",
    ("POST", "/api/v1/repairs/{repair_id}/reject"): "json",
    ("POST", "/alerts/ack"): "form",
    ("POST", "/alerts/silences"): "form",
    ("POST", "/alerts/silences/{silence_id}/expire"): "form",
    ("POST", "/alerts/repairs"): "form",
    ("POST", "/alerts/repairs/{repair_id}/approve"): "form",
    ("POST", "/alerts/repairs/{repair_id}/reject"): "form",
    ("POST", "/clusters/{cluster}/topics/{topic}/retention/preview"): "form",
    ("POST", "/clusters/{cluster}/topics/{topic}/retention"): "form",
    ("POST", "/retention/{request_id}/{action}"): "form",
}
"""Every state-changing route (23), and how its body is sent: a JSON API call or an HTML form.
A preview changes nothing but reads Kafka on the caller's behalf, so it is guarded the same."""

PATH_VALUES = {
    "incident_id": "1",
    "token": "an-ack-token",
    "silence_id": "1",
    "request_id": "1",
    "repair_id": "1",
    "cluster": CLUSTER,
    "topic": "payments-orders",
    "action": "approve",
}
CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TABLES = ("audit_log", "silences", "acks", "retention_requests", "repair_requests")
"""What a change writes: none of them may move when a change is refused."""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("change-guard")
    (path / "owners.yaml").write_text("teams:\n  - name: payments\n    topics: ['payments-.*']\n")
    return path


@pytest.fixture(scope="module")
def app(engine: Engine, home: Path) -> Iterator[FastAPI]:
    """The app with every change it can carry: alerts, the retention button, repairs. The services
    are never started: a refused change must not reach them (their cluster does not exist)."""
    cluster = ClusterConfig(name=CLUSTER, bootstrap_servers=["127.0.0.1:9"], request_timeout_seconds=1)
    retention = RetentionService(
        RetentionConfig(), [cluster], lambda: engine, SystemClock(), ConfigRepo(home / "configs"),
        default_policy_path(), home / "owners.yaml",
    )  # fmt: skip
    repairs = RepairService(
        [cluster], lambda: engine, SystemClock(), lambda: load_policy(default_policy_path())
    )
    try:
        yield create_app(
            engine, stale_after=timedelta(minutes=5), retention=retention, repairs=repairs,
            # hundreds of refused changes by a few people: the rate limit has its own test
            # (test_alert_api.py) and would answer most of them with 429
            identity=IdentityConfig(trusted_proxies=["10.1.2.0/24"], platform_teams=["kafka-platform"],
                                    change_requests_per_minute=100_000),
        )  # fmt: skip
    finally:
        repairs.stop()


def _person(app: FastAPI, user: str, *teams: str) -> TestClient:
    """Someone signed in through the proxy, with the CSRF token the pages give them."""
    http = TestClient(app, client=PROXY)
    http.headers.update({"X-Forwarded-User": user, "X-Forwarded-Groups": ",".join(teams)})
    http.headers["X-CSRF-Token"] = http.get("/api/v1/csrf-token").json()["token"]
    return http


def _counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES}


def _send(http: TestClient, method: str, path: str, kind: str, **extra: Any) -> Response:
    url = path.format(**PATH_VALUES)
    body: dict[str, Any] = {"json": {}} if kind == "json" else {"data": {"comment": "x"}}
    return http.request(method, url, follow_redirects=False, **body, **extra)


def _served(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of every route of `app` that may change something."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # a FastAPI that lists every included route in `app.routes` itself
        routes = [(r.path, r.methods) for r in app.routes if isinstance(r, APIRoute)]
    else:
        routes = [(c.path, c.methods) for c in iter_route_contexts(app.routes)]
    return {(method, str(path)) for path, methods in routes for method in (methods or set()) & CHANGING}


def test_every_state_changing_route_is_listed_here(app: FastAPI) -> None:
    served = _served(app)
    assert served == set(CHANGES), (
        "a state-changing route is missing from (or gone from) CHANGES; add it there once it goes "
        f"through the identity + CSRF guard: {sorted(served ^ set(CHANGES))}"
    )
    assert len(CHANGES) == 23


@pytest.mark.parametrize(("method", "path"), list(CHANGES), ids=[f"{m} {p}" for m, p in CHANGES])
def test_a_change_without_identity_or_csrf_is_refused_and_changes_nothing(
    app: FastAPI, engine: Engine, method: str, path: str
) -> None:
    kind = CHANGES[(method, path)]
    before = _counts(engine)

    anonymous = _send(TestClient(app, client=PROXY), method, path, kind)
    assert anonymous.status_code == 401, anonymous.text
    spoofed = TestClient(app, client=STRANGER, headers={"X-Forwarded-User": "mallory"})
    assert _send(spoofed, method, path, kind).status_code == 401, "proxy headers from a stranger"
    unknown_token = TestClient(app, client=PROXY, headers={"Authorization": "Bearer not-a-token"})
    assert _send(unknown_token, method, path, kind).status_code == 401

    carol = _person(app, "carol", "payments", "kafka-platform")
    no_token = _send(carol, method, path, kind, headers={"X-CSRF-Token": ""})
    assert no_token.status_code == 403, no_token.text
    forged = _send(carol, method, path, kind, headers={"X-CSRF-Token": "1700000000.forged"})
    assert forged.status_code == 403
    someone_elses = _person(app, "dave", "payments").headers["X-CSRF-Token"]
    assert _send(carol, method, path, kind, headers={"X-CSRF-Token": someone_elses}).status_code == 403
    cross_site = _send(carol, method, path, kind, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross_site.status_code == 403
    other_origin = _send(carol, method, path, kind, headers={"Origin": "http://evil.example"})
    assert other_origin.status_code == 403

    assert _counts(engine) == before


HOSTILE_STAMPS = ["²", "1" * 5_000, "٣" * 10, "9" * 30, "-1", "1e9", " 1"]
"""CSRF token stamps (the time before the dot) that are no time: each used to answer 500 or read
as a number."""


@pytest.mark.parametrize(("method", "path"), list(CHANGES), ids=[f"{m} {p}" for m, p in CHANGES])
def test_a_csrf_token_whose_stamp_is_no_time_is_refused(
    app: FastAPI, engine: Engine, method: str, path: str
) -> None:
    before = _counts(engine)
    carol = _person(app, "carol", "payments", "kafka-platform")
    url = path.format(**PATH_VALUES)
    for stamp in HOSTILE_STAMPS:
        token = f"{stamp}.ab"
        body: dict[str, Any] = (
            {"json": {}}
            if CHANGES[(method, path)] == "json"
            else {"data": {"comment": "x", "csrf_token": token}}
        )
        answer = carol.request(method, url, headers={"X-CSRF-Token": token.encode()}, **body)
        assert answer.status_code == 403, f"{stamp[:20]!r}: {answer.status_code} {answer.text[:200]}"
    assert _counts(engine) == before


NOT_NUMBERS = ["²", "٣", "1" * 5_000, "1_0", "+1", " 1", "1.0"]
"""Path, query and form numbers that are not ASCII digits, or too long to convert."""
JSON_NOT_NUMBERS: list[Any] = [True, "60", 60.0, "٣", 10**30]
"""JSON body numbers that pydantic would read as numbers (`true` as 1)."""


def _bad_requests() -> list[tuple[str, str, dict[str, Any]]]:
    """(method, url, request arguments) for every way a bad number reaches the API."""
    group = "/api/v1/clusters/guarded/groups/billing"
    cases: list[tuple[str, str, dict[str, Any]]] = []
    for bad in NOT_NUMBERS:
        cases += [
            ("GET", f"/api/v1/retention-requests/{bad}", {}),
            ("DELETE", f"/api/v1/silences/{bad}", {}),
            ("GET", "/api/v1/alerts", {"params": {"limit": bad}}),
            ("GET", "/api/v1/silences", {"params": {"offset": bad}}),
            ("GET", f"{group}/history", {"params": {"max_points": bad}}),
            ("GET", f"{group}/lag/orders/{bad}/history", {}),
        ]
    for bad in JSON_NOT_NUMBERS:
        cases += [
            ("POST", "/api/v1/silences", {"json": {"matchers": ["team=payments"], "duration_seconds": bad,
                                                   "comment": "x"}}),
            ("POST", "/api/v1/retention-requests", {"json": {"cluster": CLUSTER, "topic": "payments-orders",
                                                             "retention_ms": bad, "duration": "1d"}}),
            ("POST", "/api/v1/repairs", {"json": {"finding_id": bad, "kind": "preferred_election"}}),
        ]  # fmt: skip
    for until in ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-11-21T22:00:00", "1700000000",
                  "٢٠٢٦-11-21T22:00:00Z"]:  # fmt: skip
        cases.append(("GET", f"{group}/history", {"params": {"until": until}}))
    cases.append(("POST", "/api/v1/silences", {"json": {"matchers": ["team=payments"], "duration_seconds": 60,
                                                        "comment": "x", "starts_at": "0001-01-01T00:00:00Z"}}))  # fmt: skip
    return cases


BAD_REQUESTS = _bad_requests()


@pytest.mark.parametrize(
    ("method", "url", "args"), BAD_REQUESTS, ids=[f"{m} {u[:60]} {a}"[:120] for m, u, a in BAD_REQUESTS]
)
def test_a_number_or_time_that_is_not_one_is_a_422_naming_it(
    app: FastAPI, engine: Engine, method: str, url: str, args: dict[str, Any]
) -> None:
    before = _counts(engine)
    answer = _person(app, "carol", "payments", "kafka-platform").request(method, url, **args)
    assert answer.status_code == 422, f"{answer.status_code} {answer.text[:300]}"
    assert answer.json()["error"]["code"] == "invalid_parameter"
    assert _counts(engine) == before


FORM_NUMBERS = [("/alerts/ack", {"incident": bad}) for bad in NOT_NUMBERS] + [
    ("/alerts/ack", {"incident": str(2**63)}),
    ("/clusters/guarded/topics/payments-orders/retention/preview",
     {"retention_ms_value": "٣", "retention_ms_unit": "days", "duration_value": "1", "duration_unit": "days",
      "reason": "x"}),
]  # fmt: skip


@pytest.mark.parametrize(("url", "form"), FORM_NUMBERS, ids=[f"{u} {f}"[:80] for u, f in FORM_NUMBERS])
def test_a_form_number_that_is_not_one_is_said_on_the_page(
    app: FastAPI, engine: Engine, url: str, form: dict[str, str]
) -> None:
    before = _counts(engine)
    carol = _person(app, "carol", "payments", "kafka-platform")
    answer = carol.post(
        url, data={**form, "csrf_token": carol.headers["X-CSRF-Token"]}, follow_redirects=False
    )
    assert answer.status_code < 500, answer.text[:300]
    if url.startswith("/alerts"):
        said = _flash(answer)["text"]
    else:  # the retention pages' flash, back on the topic page
        said = str((read_flash(answer.cookies.get(FLASH_COOKIE)) or {}).get("text"))
    assert "is not a number" in said or "must be a whole number from 1" in said, said[:300]
    assert _counts(engine) == before


ID_PARAMETERS = ("incident_id", "silence_id", "request_id", "repair_id")
WITH_AN_ID = [key for key in CHANGES if any(f"{{{name}}}" in key[1] for name in ID_PARAMETERS)]


@pytest.mark.parametrize(("method", "path"), WITH_AN_ID, ids=[f"{m} {p}" for m, p in WITH_AN_ID])
def test_an_id_past_the_largest_is_bad_input_and_changes_nothing(
    app: FastAPI, engine: Engine, method: str, path: str
) -> None:
    before = _counts(engine)
    carol = _person(app, "carol", "payments", "kafka-platform")
    url = path.format(**{**PATH_VALUES, **dict.fromkeys(ID_PARAMETERS, str(2**63))})
    body: dict[str, Any] = {"json": {}} if CHANGES[(method, path)] == "json" else {"data": {"comment": "x"}}

    answer = carol.request(method, url, follow_redirects=False, **body)

    assert answer.status_code == 422, f"{url}: {answer.status_code} {answer.text[:200]}"
    assert _counts(engine) == before


# -- the repair buttons of the alerts page and the repair command line ---------------------------


def _waiting_repair(engine: Engine, requested_by: str) -> int:
    """A repair awaiting approval, as `RepairService.request` stores one."""
    now = datetime.now(UTC)
    plan = {"partitions": [{"topic": "orders", "partition": 0, "leader": 2, "new_leader": 1,
                            "replicas": [1, 2], "new_replicas": [1, 2]}],
            "leaders_before": {"1": 0, "2": 1}, "leaders_after": {"1": 1, "2": 0}}  # fmt: skip
    values = {
        "cluster": CLUSTER, "kind": "preferred_election", "state": "awaiting_approval", "finding_id": 1,
        "rule": "NonPreferredLeaders", "broker_id": 1, "requested_by": requested_by, "reason": "leaders back",
        "plan": plan, "refusal": None,
    }  # fmt: skip
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM repair_requests WHERE state = 'awaiting_approval'"))
        asked = Audit(requested_by, "requested", new_value=plan, reason="leaders back", via="proxy")
        return store.insert_repair(conn, values, [asked, Audit(SYSTEM_ACTOR, "awaiting_approval")], now)


def _repair(engine: Engine, repair_id: int) -> tuple[str, list[tuple[str, str]]]:
    with engine.connect() as conn:
        audit = [(a["actor"], a["action"]) for a in store.audit_of(conn, repair_id)]
        return store.get(conn, repair_id).state, audit


def _flash(response: Response) -> dict[str, str]:
    assert response.status_code == 303 and response.headers["location"] == "/alerts", response.text
    return json.loads(unquote(response.cookies[FLASH_COOKIE]))  # type: ignore[no-any-return]


def test_repair_buttons_on_the_alerts_page_follow_the_review_rule(app: FastAPI, engine: Engine) -> None:
    repair_id = _waiting_repair(engine, "carol")
    carol = _person(app, "carol", "kafka-platform")
    token = carol.headers["X-CSRF-Token"]

    # The requester cannot approve her own repair, nor can someone outside the reviewers.
    own = _flash(carol.post(f"/alerts/repairs/{repair_id}/approve", data={"csrf_token": token},
                            follow_redirects=False))  # fmt: skip
    assert own["kind"] == "error"
    assert f"forbidden: carol asked for repair {repair_id} and cannot approve it" in own["text"]
    dave = _person(app, "dave", "payments")
    outsider = _flash(dave.post(f"/alerts/repairs/{repair_id}/approve",
                                data={"csrf_token": dave.headers["X-CSRF-Token"]}, follow_redirects=False))  # fmt: skip
    assert outsider["kind"] == "error" and "only members of kafka-platform may approve" in outsider["text"]
    refused_reject = _flash(dave.post(f"/alerts/repairs/{repair_id}/reject",
                                      data={"reason": "no", "csrf_token": dave.headers["X-CSRF-Token"]},
                                      follow_redirects=False))  # fmt: skip
    assert refused_reject["kind"] == "error" and "may reject" in refused_reject["text"]
    # Nothing changed, and each refusal is on the audit trail.
    assert _repair(engine, repair_id) == ("awaiting_approval", [
        ("carol", "requested"), (SYSTEM_ACTOR, "awaiting_approval"),
        ("carol", "refused"), ("dave", "refused"), ("dave", "refused"),
    ])  # fmt: skip

    # A form from another site, or without the token, changes nothing even for a reviewer.
    bob = _person(app, "bob", "kafka-platform")
    bob_token = bob.headers["X-CSRF-Token"]
    forged = bob.post(f"/alerts/repairs/{repair_id}/reject", data={"reason": "x"},
                      headers={"X-CSRF-Token": ""}, follow_redirects=False)  # fmt: skip
    assert forged.status_code == 403 and "Form expired or forged" in forged.text
    assert _repair(engine, repair_id)[0] == "awaiting_approval"

    # Another reviewer rejects it: done as bob, and audited as bob, through the proxy.
    no_reason = _flash(bob.post(f"/alerts/repairs/{repair_id}/reject", data={"csrf_token": bob_token},
                                follow_redirects=False))  # fmt: skip
    assert no_reason["kind"] == "error" and "say why" in no_reason["text"]
    rejected = _flash(bob.post(f"/alerts/repairs/{repair_id}/reject",
                               data={"reason": "not now", "csrf_token": bob_token}, follow_redirects=False))  # fmt: skip
    assert rejected == {"kind": "ok", "text": f"Repair {repair_id} rejected."}
    state, audit = _repair(engine, repair_id)
    assert state == "rejected" and audit[-1] == ("bob", "rejected")
    with engine.connect() as conn:
        via = conn.execute(
            text("SELECT via, reason FROM audit_log WHERE subject = 'repair_request' AND subject_id = :i"
                 " AND action = 'rejected'"), {"i": repair_id},
        ).one()  # fmt: skip
    assert tuple(via) == ("proxy", "not now")

    # Asking for a repair needs a kind of repair this monitor knows; nothing is stored otherwise.
    unknown = _flash(bob.post("/alerts/repairs", data={"kind": "reboot", "csrf_token": bob_token},
                              follow_redirects=False))  # fmt: skip
    assert unknown["kind"] == "error" and "choose a repair" in unknown["text"]


def test_the_repair_command_line_needs_someone_and_another_reviewer(
    engine: Engine, db_url: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line trusts `--as` and `--team` (it holds the database's credentials), but the
    review rule is the same as on the web, and who acted is audited with `via` cli."""
    import getpass

    from typer.testing import CliRunner

    from monitor.cli.main import app as cli

    monkeypatch.setenv("DATABASE_URL", db_url)
    runner = CliRunner()
    repair_id = _waiting_repair(engine, "carol")

    def no_login_name() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr(getpass, "getuser", no_login_name)
    nobody = runner.invoke(cli, ["repair", "approve", str(repair_id), "--team", "kafka-platform"])
    assert nobody.exit_code == 2 and "no login name: say who acts with --as NAME" in nobody.output
    nobody = runner.invoke(cli, ["repair", "reject", str(repair_id), "-m", "no"])
    assert nobody.exit_code == 2 and "--as NAME" in nobody.output

    own = runner.invoke(cli, ["repair", "approve", str(repair_id), "--as", "carol", "-t", "kafka-platform"])
    assert own.exit_code == 1, own.output
    assert f"forbidden: carol asked for repair {repair_id} and cannot approve it" in own.output
    outsider = runner.invoke(cli, ["repair", "approve", str(repair_id), "--as", "dave", "-t", "payments"])
    assert outsider.exit_code == 1 and "only members of kafka-platform may approve" in outsider.output
    assert _repair(engine, repair_id)[0] == "awaiting_approval"

    withdrawn = runner.invoke(
        cli, ["repair", "reject", str(repair_id), "--as", "carol", "-m", "wrong broker"]
    )
    assert withdrawn.exit_code == 0, withdrawn.output
    assert f"repair {repair_id}: cancelled" in withdrawn.output
    with engine.connect() as conn:
        last = conn.execute(
            text("SELECT actor, action, via, address FROM audit_log WHERE subject = 'repair_request'"
                 " AND subject_id = :i ORDER BY id DESC LIMIT 1"), {"i": repair_id},
        ).one()  # fmt: skip
    assert tuple(last[:3]) == ("carol", "cancelled", "cli") and str(last.address).startswith("cli@")


# -- refused decisions are on the audit trail, through the API and the forms -----------------------


def _retention_request(engine: Engine, topic: str, state: str) -> int:
    """A raise on `topic` of team payments asked by alice, stored in `state` (no Kafka needed)."""
    from monitor.act import ledger
    from monitor.act.request import Draft

    draft = Draft(
        cluster=CLUSTER, topic=topic, state="awaiting_approval", tier="reviewed", team="payments", requested_by="alice",
        reason="ledger behind", old_configs={"retention.ms": {"value": "86400000", "source": "DEFAULT"}},
        new_configs={"retention.ms": "172800000"}, duration_ms=86_400_000, disk={},
    )  # fmt: skip
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM retention_requests WHERE topic = :t"), {"t": topic})
        request_id = ledger.insert_request(conn, draft, [Audit("alice", "requested")], now)
        conn.execute(
            text("UPDATE retention_requests SET state = :s, expires_at = :e WHERE id = :i"),
            {"s": state, "e": now + timedelta(days=1), "i": request_id},
        )
    return request_id


API = "/api/v1/retention-requests/{id}/"
REPAIR_API = "/api/v1/repairs/{id}/"
REFUSED_DECISIONS = [
    # (what, person and teams, route, body, the refusal's code)
    ("waiting", ("dave", "payments"), API + "approve", {}, "forbidden"),
    ("waiting", ("alice", "kafka-platform"), API + "approve", {}, "forbidden"),  # her own request
    ("waiting", ("bob", "kafka-platform"), API + "reject", {"reason": " "}, "invalid"),
    ("waiting", ("dave", "payments"), API + "revert", {"reason": "done"}, "conflict"),  # not in force
    ("in_force", ("erin", "search"), API + "revert", {"reason": "done"}, "forbidden"),
    (
        "in_force",
        ("bob", "kafka-platform"),
        API + "extend",
        {"duration": "1d", "reason": "more"},
        "forbidden",
    ),
    ("missing", ("bob", "kafka-platform"), API + "approve", {}, "not_found"),
    ("waiting", ("dave", "payments"), "/retention/{id}/approve", {}, "forbidden"),
    ("waiting", ("bob", "kafka-platform"), "/retention/{id}/reject", {"reason": ""}, "invalid"),
    ("in_force", ("erin", "search"), "/retention/{id}/revert", {"reason": "x"}, "forbidden"),
    (
        "in_force",
        ("bob", "kafka-platform"),
        "/retention/{id}/extend",
        {"duration_value": "1", "duration_unit": "days", "reason": "more"},
        "forbidden",
    ),
    ("missing", ("bob", "kafka-platform"), "/retention/{id}/revert", {"reason": "x"}, "not_found"),
    ("repair", ("carol", "kafka-platform"), REPAIR_API + "approve", {}, "forbidden"),  # her own
    ("repair", ("dave", "payments"), REPAIR_API + "approve", {}, "forbidden"),
    ("repair", ("bob", "kafka-platform"), REPAIR_API + "reject", {"reason": ""}, "invalid"),
    ("missing_repair", ("bob", "kafka-platform"), REPAIR_API + "reject", {"reason": "no"}, "not_found"),
    ("repair", ("bob", "kafka-platform"), "/alerts/repairs/{id}/reject", {"reason": ""}, "invalid"),
    ("repair", ("dave", "payments"), "/alerts/repairs/{id}/approve", {}, "forbidden"),
]


@pytest.mark.parametrize(
    ("what", "person", "route", "body", "code"),
    REFUSED_DECISIONS,
    ids=[f"{r[2].split('/')[-1]}-{r[0]}-{r[1][0]}-{'api' if r[2].startswith('/api') else 'form'}"
         for r in REFUSED_DECISIONS],
)  # fmt: skip
def test_a_refused_decision_is_on_the_audit_trail_and_changes_nothing(
    app: FastAPI,
    engine: Engine,
    what: str,
    person: tuple[str, ...],
    route: str,
    body: dict[str, str],
    code: str,
) -> None:
    subject_id = {
        "waiting": lambda: _retention_request(engine, "payments-waiting", "awaiting_approval"),
        "in_force": lambda: _retention_request(engine, "payments-raised", "verified"),
        "repair": lambda: _waiting_repair(engine, "carol"),
        "missing": lambda: 2**63 - 1,
        "missing_repair": lambda: 2**63 - 1,
    }[what]()
    subject = "repair_request" if "repair" in what else "retention_request"
    http = _person(app, *person)
    http.headers["X-Forwarded-For"] = "203.0.113.9"
    before = _counts(engine)
    url = route.format(id=subject_id)
    if route.startswith("/api"):
        answer = http.post(url, json=body)
        assert answer.status_code in (403, 404, 409, 422), answer.text
        assert answer.json()["error"]["code"] == code
    else:
        answer = http.post(
            url, data={**body, "csrf_token": http.headers["X-CSRF-Token"]}, follow_redirects=False
        )
        assert answer.status_code == 303, answer.text
        flash = answer.cookies[FLASH_COOKIE]
        shown = views.read_flash(flash) if url.startswith("/retention") else json.loads(unquote(flash))
        assert shown is not None and shown["kind"] == "error", shown

    after = _counts(engine)
    assert after == {**before, "audit_log": before["audit_log"] + 1}, "one audit row, nothing else"
    with engine.connect() as conn:
        row = conn.execute(
            text("SELECT subject, subject_id, actor, via, address, action, detail FROM audit_log"
                 " ORDER BY id DESC LIMIT 1"),
        ).one()  # fmt: skip
    verb = route.rsplit("/", 1)[-1]
    assert tuple(row[:6]) == (subject, subject_id, person[0], "proxy", "203.0.113.9", "refused")
    assert row.detail.startswith(f"{verb}: {code}: ")


CLI_CHANGES = [
    ["alerts", "ack", "1", "-m", "looking"],
    ["alerts", "silence", "cluster=guarded", "--for", "1h", "-m", "upgrade"],
    ["alerts", "expire", "1"],
    ["retention", "raise", CLUSTER, "orders", "--retention-ms", "7d", "--for", "1d", "-m", "replay"],
    ["retention", "approve", "1"],
    ["retention", "reject", "1", "-m", "no"],
    ["retention", "revert", "1", "-m", "done"],
    ["retention", "extend", "1", "--for", "1d", "-m", "longer"],
    ["repair", "request", "1", "-m", "lopsided"],
    ["repair", "approve", "1"],
    ["repair", "reject", "1", "-m", "no"],
]


def test_the_command_line_holds_a_name_to_the_change_limit(
    engine: Engine, db_url: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script in a loop through the command line is held to `change_requests_per_minute` per
    `--as` name, as the web is per identity: counted in the audit trail (across processes), it
    refuses every change command past the limit, exit status 1, saying when to ask again, and
    writes nothing. Another name, or the same one a minute later, is not held."""
    from typer.testing import CliRunner

    from monitor.cli.main import app as cli

    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("KAFKA_HEALTH_WEB__IDENTITY__CHANGE_REQUESTS_PER_MINUTE", "3")
    runner = CliRunner()
    now = datetime.now(UTC)

    def audited(actor: str, *ago_seconds: float) -> None:
        with engine.begin() as conn:
            for ago in ago_seconds:
                conn.execute(
                    text(
                        "INSERT INTO audit_log (at, subject, actor, via, address, action)"
                        " VALUES (:at, 'silence', :actor, 'cli', 'cli@host', 'silence_created')"
                    ),
                    {"at": now - timedelta(seconds=ago), "actor": actor},
                )

    def entries() -> int:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM audit_log")).scalar_one())

    # erin made three changes in the last minute through the command line, the oldest 20 s ago;
    # on the web as many (the web counts its own); fay made three more than a minute ago.
    audited("erin", 20, 10, 5)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO audit_log (at, subject, actor, via, address, action)"
                " VALUES (now(), 'silence', 'gil', 'proxy', '10.1.2.3', 'silence_created')"
            )
        )
    audited("fay", 61, 70, 80)
    before = entries()
    for command in CLI_CHANGES:
        held = runner.invoke(cli, [*command, "--as", "erin", "-t", "kafka-platform"])
        assert held.exit_code == 1, (command, held.output)
        assert "rate_limited: erin asked for 3 changes in the last minute" in held.output, command
        assert "web.identity.change_requests_per_minute" in held.output
        wait = int(held.output.split("ask again in ")[1].split(" s")[0])
        assert 20 <= wait <= 40, (command, held.output)  # when the oldest of the three leaves the minute
    assert entries() == before, "a held change writes nothing"

    for who in ("fay", "gil"):
        free = runner.invoke(cli, ["alerts", "silence", "cluster=guarded", "--for", "1h", "-m", "x",
                                   "--as", who, "-t", "kafka-platform"])  # fmt: skip
        assert free.exit_code == 0 and "rate_limited" not in free.output, (who, free.output)
    assert entries() == before + 2
