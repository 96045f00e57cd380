"""The overview page and the acknowledgement link, in a real headless Chromium over the populated
database; and the browser rig itself (a page with a console error fails the test)."""

from __future__ import annotations

import uuid

import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from sqlalchemy import text

from tests.fixtures.browser import BrowserPage, serve_app, sign_in
from tests.fixtures.populated import Populated

pytestmark = pytest.mark.browser


def test_the_rig_records_console_errors_and_failed_requests(browser_page: BrowserPage) -> None:
    app = FastAPI()

    @app.get("/broken", response_class=HTMLResponse)
    def broken() -> str:
        return "<h1>broken</h1><img src='/missing.png' alt=''><script>console.error('boom')</script>"

    with serve_app(app) as url:
        browser_page.base_url = url
        browser_page.goto("/broken")
        browser_page.page.wait_for_load_state("networkidle")
    problems = "\n".join(browser_page.problems)
    assert "console error: boom" in problems and "HTTP 404: GET" in problems, problems
    browser_page.expect_problem("boom")
    browser_page.expect_problem("404")
    assert browser_page.unexpected_problems() == []


def test_overview_shows_the_cluster_and_its_collection(web: BrowserPage, populated: Populated) -> None:
    web.goto("/")
    web.shot("overview", "h1", "#clusters", "#runs")
    clusters = web.page.locator("#clusters").inner_text()
    assert populated.cluster in clusters
    runs = web.page.locator("#runs tr", has_text=populated.cluster)
    jobs = {line.split("\t")[1] for line in runs.all_inner_texts()}
    assert {"metadata", "configs", "log_dirs", "offsets"} <= jobs, jobs


def test_the_acknowledgement_link_asks_then_acknowledges(web: BrowserPage, populated: Populated) -> None:
    """Signed in through the proxy, the link acknowledges as that person, once; then it is spent."""
    with populated.engine.connect() as conn:
        incident, token = conn.execute(
            text("SELECT id, ack_token FROM alert_groups WHERE closed_at IS NULL AND acknowledged_at IS NULL"
                 " ORDER BY id LIMIT 1")
        ).one()  # fmt: skip
    who = f"browser-{uuid.uuid4().hex[:6]}"
    sign_in(web, who, "payments", "kafka-platform")  # the populated incidents have no team: platform's
    try:
        web.goto(f"/ack/{token}")
        web.shot("ack-form", "form", "button[type=submit]")
        assert f"Acknowledge as {who}" in web.page.locator("form").inner_text()
        web.page.fill("input[name=comment]", "seen in the browser")
        with web.page.expect_navigation():
            web.page.click("button[type=submit]")
        web.shot("ack-done", "p.ok")
        assert f"Acknowledged incident {incident} as {who}" in web.page.locator("p.ok").inner_text()
        with populated.engine.connect() as conn:
            row = conn.execute(
                text("SELECT via, comment FROM acks WHERE alert_group_id = :i AND acknowledged_by = :by"),
                {"i": incident, "by": who},
            ).one()
        assert tuple(row) == ("link", "seen in the browser")

        web.expect_problem("409")  # the spent link answers 409, and the browser reports it
        web.page.goto(web.base_url + f"/ack/{token}")
        with web.page.expect_navigation():
            web.page.click("button[type=submit]")
        assert "works once" in web.page.locator("p.bad").inner_text()
    finally:
        with populated.engine.begin() as conn:  # undo: the incident is unacknowledged again
            conn.execute(text("DELETE FROM acks WHERE acknowledged_by = :by"), {"by": who})
            conn.execute(
                text("UPDATE alert_groups SET acknowledged_at = NULL, acknowledged_by = NULL WHERE id = :i"),
                {"i": incident},
            )


def test_an_acknowledgement_link_needs_a_sign_in_and_a_known_token(web: BrowserPage) -> None:
    web.expect_problem("401")
    web.page.goto(web.base_url + "/ack/not-a-token")
    assert "Sign in first" in web.page.locator("p.bad").inner_text()
    assert web.page.locator("form").count() == 0

    sign_in(web, f"browser-{uuid.uuid4().hex[:6]}", "payments")
    web.goto("/ack/not-a-token")
    web.expect_problem("404")  # the page answers 404, and the browser reports it
    with web.page.expect_navigation():
        web.page.click("button[type=submit]")
    web.shot("ack-unknown", "p.bad")
    assert "no open incident" in web.page.locator("p.bad").inner_text()
