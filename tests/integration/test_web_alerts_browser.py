"""The alerts page in a real headless Chromium over the populated database: every section with
the alerts the collection, evaluation and alert cycle raised, and the forms that acknowledge an
incident, silence an alert and expire a silence as the person the proxy signed in (checked in the
database, then undone); a form on another site, and a silence wider than one's own team, change
nothing."""

from __future__ import annotations

import http.server
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import text

from tests.fixtures.browser import BrowserPage, sign_in
from tests.fixtures.populated import ACK_BY, SILENCE_BY, Populated
from tests.fixtures.receivers import free_port

pytestmark = pytest.mark.browser


def _row(web: BrowserPage, section: str, rule: str, group: str) -> str:
    return f"table[data-section={section}] tr[data-rule={rule}][data-group='{group}']"


def test_the_alerts_page_shows_every_section(web: BrowserPage, populated: Populated) -> None:
    groups = populated.groups
    web.goto("/alerts")
    firing = _row(web, "firing", "TimeUntilDataLoss", groups["at_risk"].name)
    pending = _row(web, "pending", "ConsumerAppendLag", groups["lagging"].name)
    acknowledged = _row(web, "acknowledged", "DataLossOccurred", groups["lost"].name)
    silenced = _row(web, "silenced", "TimeUntilDataLoss", groups["at_risk_silenced"].name)
    silence = f"tr[data-silence='{populated.silence_id}']"
    web.shot(
        "alerts",
        "h1",
        "[data-role=freshness]",
        "#alert-tabs",
        firing,
        pending,
        acknowledged,
        silenced,
        silence,
    )

    freshness = web.page.locator("[data-role=freshness]").inner_text()
    assert re.search(r"Data as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d+ s ago", freshness), freshness

    row = web.page.locator(firing)
    assert row.locator("[data-severity]").inner_text() == "critical"
    assert populated.cluster in row.inner_text() and f"topic={groups['at_risk'].topic}" in row.inner_text()
    receivers = row.locator("[data-role=receivers]").inner_text()
    assert "oncall-pager" in receivers and "ops-slack" in receivers, receivers
    loses = r"(lose unread messages to retention in about \d+ (s|min)|retention deletes its unread messages)"
    assert re.search(loses, row.inner_text()), row.inner_text()

    lagging = web.page.locator(pending).inner_text()
    assert f"({groups['lagging'].lag} messages)" in lagging, lagging  # the lagging group's offset lag
    gone = web.page.locator(_row(web, "pending", "ConsumerGroupNoMembers", groups["gone"].name))
    assert f"{groups['gone'].lag} messages waiting" in gone.inner_text()
    assert f"acknowledged by {ACK_BY}" in web.page.locator(acknowledged).inner_text()
    assert f"silence #{populated.silence_id}" in web.page.locator(silenced).inner_text()
    assert SILENCE_BY in web.page.locator(silence).inner_text()
    assert row.locator("td").nth(6).inner_text() == "none"  # the default pack's rule has no runbook


def test_a_runbook_is_linked(web: BrowserPage, populated: Populated) -> None:
    group = populated.groups["at_risk"].name
    url = "https://wiki.example.com/kafka/data-loss"
    with _runbook(populated, group, url):
        web.goto("/alerts")
        link = web.page.locator(f"{_row(web, 'firing', 'TimeUntilDataLoss', group)} a", has_text="runbook")
        assert link.get_attribute("href") == url


@pytest.fixture
def who(web: BrowserPage) -> str:
    """A person of the platform team, signed in through the proxy."""
    name = f"browser-{uuid.uuid4().hex[:8]}"
    sign_in(web, name, "kafka-platform")
    return name


def test_acknowledge_an_incident_from_the_alerts_page(
    web: BrowserPage, populated: Populated, who: str
) -> None:
    group = populated.groups["at_risk"].name
    web.goto("/alerts")
    row = web.page.locator(_row(web, "firing", "TimeUntilDataLoss", group))
    incidents = [
        int(v) for v in row.locator("input[name=incident]").evaluate_all("els => els.map(e => e.value)")
    ]
    assert len(incidents) == 2, incidents  # the pager's and Slack's
    try:
        row.locator("details.ack summary").click()
        row.locator("details.ack input[name=comment]").fill("looking at the ledger consumer")
        web.shot("alerts-ack-form", "details.ack[open] form")
        with web.page.expect_navigation():
            row.locator("details.ack button[type=submit]").click()
        web.shot("alerts-acked", "#flash", _row(web, "acknowledged", "TimeUntilDataLoss", group))
        flash = web.page.locator("#flash").inner_text()
        assert f"Acknowledged incidents {incidents[0]}, {incidents[1]} as {who}" in flash, flash
        assert web.page.locator(_row(web, "firing", "TimeUntilDataLoss", group)).count() == 0
        with populated.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT g.id, g.acknowledged_by, a.via, a.comment FROM alert_groups g"
                     " JOIN acks a ON a.alert_group_id = g.id WHERE a.acknowledged_by = :by ORDER BY g.id"),
                {"by": who},
            ).all()  # fmt: skip
        assert [tuple(r) for r in rows] == [
            (i, who, "web", "looking at the ledger consumer") for i in incidents
        ]
        web.goto("/alerts")  # the flash is shown once
        assert web.page.locator("#flash").count() == 0
    finally:
        with populated.engine.begin() as conn:  # undo: the incidents are unacknowledged again
            conn.execute(text("DELETE FROM acks WHERE acknowledged_by = :by"), {"by": who})
            conn.execute(
                text("UPDATE alert_groups SET acknowledged_at = NULL, acknowledged_by = NULL"
                     " WHERE id = ANY(:ids)"),
                {"ids": incidents},
            )  # fmt: skip


def test_silence_an_alert_then_expire_the_silence(web: BrowserPage, populated: Populated, who: str) -> None:
    group = populated.groups["lagging"].name
    web.goto("/alerts")
    row = web.page.locator(_row(web, "pending", "ConsumerAppendLag", group))
    row.locator("details.silence summary").click()
    matchers = row.locator("details.silence textarea[name=matchers]").input_value().splitlines()
    assert f"group_id={group}" in matchers and "rule=ConsumerAppendLag" in matchers, matchers
    assert f"cluster={populated.cluster}" in matchers and not any(m.startswith("severity") for m in matchers)
    row.locator("details.silence input[name=duration]").fill("30m")
    row.locator("details.silence input[name=comment]").fill("consumer being redeployed")
    web.shot("alerts-silence-form", "details.silence[open] textarea")
    with web.page.expect_navigation():
        row.locator("details.silence button[type=submit]").click()

    with populated.engine.connect() as conn:
        made = conn.execute(
            text(
                "SELECT id, matchers, ends_at - starts_at AS span, comment FROM silences WHERE created_by = :by"
            ),
            {"by": who},
        ).one()
    assert (
        made.matchers == matchers
        and made.span.total_seconds() == 1800
        and made.comment == "consumer being redeployed"
    )
    listed = f"tr[data-silence='{made.id}']"
    web.shot("alerts-silenced", "#flash", listed)
    assert f"Silence {made.id} created for 30m" in web.page.locator("#flash").inner_text()
    assert who in web.page.locator(listed).inner_text()
    assert f"Signed in as {who}" in web.page.locator("[data-role=identity]").inner_text()

    with web.page.expect_navigation():
        web.page.locator(f"{listed} button", has_text="Expire now").click()
    assert f"Silence {made.id} expired" in web.page.locator("#flash").inner_text()
    assert web.page.locator(listed).count() == 0
    with populated.engine.connect() as conn:
        expired = conn.execute(text("SELECT expired_at FROM silences WHERE id = :i"), {"i": made.id}).scalar()
    assert expired is not None


def test_a_refused_silence_comes_back_as_the_form_as_typed(
    web: BrowserPage, populated: Populated, who: str
) -> None:
    web.expect_problem("HTTP 422: POST")  # the form again, answered 422 (twice here)
    web.expect_problem("responded with a status of 422")
    web.goto("/alerts")
    form = web.page.locator("#silences details.silence")
    form.locator("summary").click()
    form.locator("textarea[name=matchers]").fill("cluster=~(unclosed")
    form.locator("input[name=comment]").fill("typo in the matcher")
    with web.page.expect_navigation():
        form.locator("button[type=submit]").click()
    web.shot("alerts-refused", "[data-role=error]", "form[data-role=silence-form]")
    assert "Not done: bad matcher" in web.page.locator("[data-role=error]").inner_text()
    again = web.page.locator("form[data-role=silence-form]")
    assert again.locator("textarea[name=matchers]").input_value() == "cluster=~(unclosed"
    assert again.locator("input[name=comment]").input_value() == "typo in the matcher"

    again.locator("textarea[name=matchers]").fill("cluster=prod")
    again.locator("input[name=duration]").fill("30d")
    with web.page.expect_navigation():
        again.locator("button[type=submit]").click()
    assert "may last at most" in web.page.locator("[data-role=error]").inner_text()
    assert (
        web.page.locator("form[data-role=silence-form] textarea[name=matchers]").input_value()
        == "cluster=prod"
    )
    with populated.engine.connect() as conn:
        assert (
            conn.execute(text("SELECT count(*) FROM silences WHERE created_by = :by"), {"by": who}).scalar()
            == 0
        )


def test_without_sign_in_the_page_offers_no_action(web: BrowserPage, populated: Populated) -> None:
    web.goto("/alerts")
    assert "Not signed in" in web.page.locator("[data-role=identity]").inner_text()
    assert web.page.locator("form[action='/alerts/silences']").count() == 0
    assert web.page.locator("form[action='/alerts/ack']").count() == 0


def test_a_team_member_may_silence_only_their_team(web: BrowserPage, populated: Populated) -> None:
    name = f"browser-{uuid.uuid4().hex[:8]}"
    sign_in(web, name, "payments")
    web.goto("/alerts")
    assert "payments" in web.page.locator("[data-role=silence-scope]").inner_text()
    form = web.page.locator("#silences details.silence")
    form.locator("summary").click()
    form.locator("textarea[name=matchers]").fill(f"cluster={populated.cluster}")
    form.locator("input[name=comment]").fill("everything of the cluster")
    with web.page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert (
        "may silence only the alerts of their own teams"
        in web.page.locator("#flash.flash-error").inner_text()
    )
    with populated.engine.connect() as conn:
        made = conn.execute(
            text("SELECT count(*) FROM silences WHERE created_by = :by"), {"by": name}
        ).scalar()
        refused = conn.execute(
            text("SELECT count(*) FROM audit_log WHERE actor = :by AND action = 'refused'"), {"by": name}
        ).scalar()
    assert (made, refused) == (0, 1)


def test_a_form_on_another_site_changes_nothing(web: BrowserPage, populated: Populated, who: str) -> None:
    """A page of another origin that a signed-in engineer opens posts a silence of every alert:
    refused (no CSRF token, a cross-site origin), nothing stored."""
    target = web.base_url + "/alerts/silences"
    evil = (
        "<!doctype html><title>cat pictures</title><body>"
        f'<form id=f method=post action="{target}">'
        '<input name=matchers value="severity=~.*"><input name=duration value=7d>'
        '<input name=comment value=oops></form><script>document.getElementById("f").submit()</script>'
    ).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(evil)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", free_port()), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    web.expect_problem("HTTP 403: POST " + target)
    web.expect_problem(f"403 (Forbidden) ({target})")
    try:
        with web.page.expect_navigation(url=target):
            web.page.goto(f"http://127.0.0.1:{server.server_port}/")
        web.page.wait_for_load_state()
        assert "Form expired or forged" in web.page.content()
    finally:
        server.shutdown()
        server.server_close()
    with populated.engine.connect() as conn:
        made = conn.execute(
            text("SELECT count(*) FROM silences WHERE created_by = :by"), {"by": who}
        ).scalar()
    assert made == 0


@contextmanager
def _runbook(populated: Populated, group: str, url: str) -> Iterator[None]:
    """Give the open alerts of `group` a runbook for the duration of a block, then take it back."""

    def set_to(value: str | None) -> None:
        with populated.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE alerts SET annotations = jsonb_strip_nulls(jsonb_build_object('runbook', CAST(:u AS text)))"
                    " WHERE state <> 'resolved' AND labels->>'group_id' = :g"
                ),
                {"u": value, "g": group},
            )

    set_to(url)
    try:
        yield
    finally:
        set_to(None)
