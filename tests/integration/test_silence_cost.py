"""What one team can cost the alert cycle is bounded where silences are made (the JSON API, the
alerts page's form, the command line): a regular expression whose compiled program is costly is
refused with the limit and how to stay under it, and a team has at most
`alert.max_silences_per_team` active or scheduled silences. The real alert cycle then matches the
silences that were accepted, and ignores a costly one stored before the limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from rich.console import Console
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.cycle import run_cycle
from monitor.cli import alerts as cli_alerts
from monitor.cli.main import app as cli
from monitor.core.clock import FakeClock
from monitor.core.patterns import MAX_PROGRAM_SIZE
from monitor.expose.web.app import create_app
from tests.integration.test_alert_api import IDENTITY, Person

T0 = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)
CAP = 3
HOSTILE = [
    "(?:.?){999}.*(?:.?){999}",
    "(?:.?){120}",
    "(x{1,100}){1,10}",
    "(a+b+){400}",
    ".{1000}",
    "(?i)(?:[a-z]?){300}payments",
]
"""Patterns RE2 accepts and runs in linear time, each compiling to more than the limit."""


@pytest.fixture
def app(engine: Engine) -> FastAPI:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE findings, alerts, alert_groups, acks, silences, audit_log"))
    return create_app(
        engine, stale_after=timedelta(minutes=5), clock=FakeClock(T0), silence_max_seconds=86400,
        identity=IDENTITY, max_silences_per_team=CAP,
    )  # fmt: skip


@pytest.fixture
def runner(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("KAFKA_HEALTH_ALERT__MAX_SILENCES_PER_TEAM", str(CAP))
    monkeypatch.setattr(cli_alerts, "out", Console(width=400, soft_wrap=True))
    yield CliRunner()


def _silences(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM silences")).scalar_one())


def _api(person: Person, matchers: list[str]) -> tuple[int, str]:
    body = {"matchers": matchers, "duration_seconds": 3600, "comment": "maintenance"}
    answer = person.http.post("/api/v1/silences", json=body)
    return answer.status_code, answer.json()["error"]["message"] if answer.status_code >= 400 else ""


def _form(person: Person, matchers: list[str]) -> tuple[int, str]:
    """The alerts page's form answers with the page again (303) and the outcome as a flash."""
    data = {
        "matchers": "\n".join(matchers),
        "duration": "1h",
        "comment": "maintenance",
        "csrf_token": person.csrf,
    }
    answer = person.http.post("/alerts/silences", data=data, follow_redirects=False)
    flash = json.loads(unquote(answer.cookies.get("kh_flash", "{}")))
    return answer.status_code, flash.get("text", "") if flash.get("kind") == "error" else ""


def _cli(runner: CliRunner, matchers: list[str], *who: str) -> tuple[int, str]:
    made = runner.invoke(cli, ["alerts", "silence", *matchers, "--for", "1h", "-m", "maintenance", *who])
    return made.exit_code, made.output if made.exit_code else ""


@pytest.mark.parametrize("via", ["api", "form", "cli"])
@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_costly_pattern_is_refused_naming_the_limit(
    app: FastAPI, runner: CliRunner, engine: Engine, via: str, pattern: str
) -> None:
    matchers = ["team=payments", f"group_id=~{pattern}"]
    if via == "cli":
        status, message = _cli(runner, matchers, "--as", "carol", "--team", "payments")
        assert status == 1
    else:
        carol = Person(app, "carol", "payments")
        status, message = _api(carol, matchers) if via == "api" else _form(carol, matchers)
        assert status == (422 if via == "api" else 303)
    assert f"at most {MAX_PROGRAM_SIZE:,} are accepted" in message and "instructions" in message, message
    assert "write .* or + instead" in message and "group_id" in message
    assert "Traceback" not in message
    assert _silences(engine) == 0


@pytest.mark.parametrize("via", ["api", "form", "cli"])
def test_a_team_has_at_most_the_cap_of_active_silences(
    app: FastAPI, runner: CliRunner, engine: Engine, via: str
) -> None:
    carol, erin, pat = (Person(app, "carol", "payments"), Person(app, "erin", "search"),
                        Person(app, "pat", "kafka-platform"))  # fmt: skip

    teams = {"carol": "payments", "erin": "search", "pat": "kafka-platform"}

    def make(person: Person, matchers: list[str]) -> tuple[int, str]:
        if via == "cli":
            return _cli(runner, matchers, "--as", person.user, "--team", teams[person.user])
        return _api(person, matchers) if via == "api" else _form(person, matchers)

    ok = {"api": 201, "form": 303, "cli": 0}[via]
    for n in range(CAP):
        assert make(carol, ["team=payments", f"group_id=g{n}"]) == (ok, "")
    status, message = make(carol, ["team=payments", "group_id=one-more"])
    assert status == {"api": 409, "form": 303, "cli": 1}[via]
    assert f"team payments has {CAP} active or scheduled silences" in message, message
    assert "alert.max_silences_per_team" in message and "expire" in message
    # another team, and the platform's silences that name no team, count apart
    assert make(erin, ["team=search", "group_id=~idx-.*"]) == (ok, "")
    for n in range(CAP):
        assert make(pat, [f"cluster=c{n}"]) == (ok, "")
    status, message = make(pat, ["cluster=one-more"])
    assert "the silences that name no team have" in message
    assert _silences(engine) == 2 * CAP + 1
    # an ended silence makes room
    with engine.begin() as conn:
        conn.execute(text("UPDATE silences SET expired_at = now() WHERE matchers ? 'group_id=g0'"))
    assert make(carol, ["team=payments", "group_id=one-more"]) == (ok, "")
    with engine.connect() as conn:
        refused = conn.execute(text("SELECT count(*) FROM audit_log WHERE action = 'refused'")).scalar_one()
    assert refused == 2, "each refusal of an identified person is audited"


def test_the_alert_cycle_mutes_by_the_accepted_silences_and_ignores_a_costly_one_stored_before(
    app: FastAPI, engine: Engine
) -> None:
    carol = Person(app, "carol", "payments")
    assert _api(carol, ["team=payments", "group_id=~billing-.*"])[0] == 201
    with engine.begin() as conn:
        for n, group in enumerate(["billing-1", "billing-2", "ledger", "x" * 300]):
            conn.execute(
                text(
                    "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                    " description, runbook, for_seconds, state, first_seen, last_seen, evaluated_at)"
                    " VALUES ('ConsumerAppendLag', 'group', :key, 'prod', CAST(:labels AS jsonb), 'warning', 1,"
                    " 'behind', '', NULL, 0, 'firing', :t, :t, :t)"
                ),
                {"key": f"prod/{n}", "t": T0 - timedelta(minutes=5),
                 "labels": json.dumps({"cluster": "prod", "group_id": group, "team": "payments"})},
            )  # fmt: skip
        costly = json.dumps(["team=payments", f"group_id=~{HOSTILE[0]}"])
        conn.execute(
            text(
                "INSERT INTO silences (matchers, starts_at, ends_at, created_by, comment, created_at)"
                " SELECT CAST(:m AS jsonb), :s, :e, 'mallory', 'stored before the limit', :s"
                " FROM generate_series(1, 20)"
            ),
            {"m": costly, "s": T0 - timedelta(minutes=1), "e": T0 + timedelta(hours=1)},
        )
        run_cycle(conn, load_routing(*default_routing_paths()), T0, "http://monitor.test")
    with engine.connect() as conn:
        muted = dict(conn.execute(text("SELECT labels->>'group_id', silenced_by FROM alerts")).all())
    first = min(v for v in muted.values() if v is not None)
    assert muted == {"billing-1": first, "billing-2": first, "ledger": None, "x" * 300: None}
