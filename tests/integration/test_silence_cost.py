"""What one team can cost the alert cycle is bounded where silences are made (the JSON API, the
alerts page's form, the command line): a regular expression whose compiled program is costly is
refused with the limit and how to stay under it, and a team has at most
`alert.max_silences_per_team` active or scheduled silences. The real alert cycle then matches the
silences that were accepted, and ignores a costly one stored before the limit."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
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
from tests.fixtures.people import IDENTITY, Person

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


def _form(
    person: Person, matchers: list[str], duration: str = "1h", comment: str = "maintenance"
) -> tuple[int, str]:
    """The alerts page's form: input it can correct answers 422 with the form again and the
    reason; anything else goes back to the page (303) with the outcome as a flash."""
    answer = _post_form(person, matchers, duration, comment)
    if answer.status_code == 422:
        return 422, _form_error(answer.text)
    flash = json.loads(unquote(answer.cookies.get("kh_flash", "{}")))
    return answer.status_code, flash.get("text", "") if flash.get("kind") == "error" else ""


def _post_form(person: Person, matchers: list[str], duration: str, comment: str) -> Any:
    data = {"matchers": "\n".join(matchers), "duration": duration, "comment": comment}
    return person.http.post(
        "/alerts/silences", data={**data, "csrf_token": person.csrf}, follow_redirects=False
    )


def _form_error(page: str) -> str:
    found = re.search(r'data-role="error">(.*?)</p>', page, re.DOTALL)
    assert found, page[:500]
    return html.unescape(found.group(1))


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
        assert status == 422
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
                    " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                    " VALUES ('ConsumerAppendLag', 'group', :key, 'prod', CAST(:labels AS jsonb), 'warning', 1,"
                    " 'behind', '', 0, 'firing', :t, :t, :t)"
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


FORM_INPUTS = [
    (["team=payments", "group_id=~(?:.?){999}"], "1h", "why", "instructions"),
    (["team=payments", "group_id=~(unclosed"], "2h", "why", "group_id"),
    (["team=payments", "not a matcher <b>"], "1h", "why", "bad matcher"),
    (["team=payments", 'topic="quoted & <tag>"', "rule=~Consumer.*"], "٣h", "why", "duration"),
    (["team=payments"], "1h", "   ", "say why"),
    (["team=payments"], "30d", "a comment with <b>markup</b> & quotes \"'", "at most"),
]
"""Input the form can correct: a costly or invalid pattern, a matcher that does not parse, a
duration in other digits, no comment, a duration over the limit."""


@pytest.mark.parametrize(("matchers", "duration", "comment", "reason"), FORM_INPUTS)
def test_the_silence_form_answers_input_it_refuses_with_the_form_as_typed(
    app: FastAPI, engine: Engine, matchers: list[str], duration: str, comment: str, reason: str
) -> None:
    answer = _post_form(Person(app, "carol", "payments"), matchers, duration, comment)
    assert answer.status_code == 422 and "kh_flash" not in answer.cookies
    assert reason in _form_error(answer.text)
    form = re.search(r'<form method="post" action="/alerts/silences".*?</form>', answer.text, re.DOTALL)
    assert form is not None, answer.text[:500]
    typed = re.search(r'<textarea name="matchers"[^>]*>(.*?)</textarea>', form.group(0), re.DOTALL)
    assert typed is not None and html.unescape(typed.group(1)) == "\n".join(matchers)
    values = {
        n: html.unescape(v) for n, v in re.findall(r'<input name="(\w+)" value="([^"]*)"', form.group(0))
    }
    assert (values["duration"], values["comment"]) == (duration, comment)
    assert 'name="csrf_token"' in form.group(0) and "<b>" not in answer.text, "what was typed is data"
    assert _silences(engine) == 0


def test_a_silence_refused_for_who_asks_goes_back_to_the_alerts_page(app: FastAPI, engine: Engine) -> None:
    """Not input the form can correct: the refusal comes back to the alerts page as a flash."""
    erin = Person(app, "erin", "search")
    status, message = _form(erin, ["team=payments"])
    assert status == 303 and "only the alerts of their own teams" in message
    assert _silences(engine) == 0
