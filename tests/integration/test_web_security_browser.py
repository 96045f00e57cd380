"""Clickjacking and the Content-Security-Policy, in Debian's headless Chromium.

Another origin (a second local server, on another port) frames each page of the monitor: the
browser refuses every one (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), so no click inside
a frame can create a silence. And each page, visited directly, loads under the policy with no
violation (no `securitypolicyviolation` event, no console error): its styles and script come from
`/static`, the charts' scoped CSS carries the answer's nonce.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from sqlalchemy import Engine

from monitor.core.clock import FakeClock
from monitor.core.settings import IdentityConfig
from monitor.expose.web.app import create_app
from tests.fixtures.browser import BrowserPage, serve_app, sign_in
from tests.fixtures.read_model import T1, fill

pytestmark = pytest.mark.browser

PAGES = [
    "/",
    "/clusters/prod",
    "/clusters/prod/topics",
    "/clusters/prod/groups",
    "/clusters/prod/topics/orders",
    "/clusters/prod/groups/billing",
    "/clusters/prod/share-groups",
    "/alerts",
    "/collection",
    "/docs",
]
"""Every kind of page, the group's with its lag charts, the cluster's with its leader chart."""
WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective}: ${event.blockedURI} ${event.sample}`);
});
"""


@pytest.fixture(scope="module")
def monitor_url(engine: Engine) -> Iterator[str]:
    """The monitor's app over the synthetic cluster, behind a proxy on 127.0.0.1."""
    with engine.begin() as conn:
        fill(conn)
    identity = IdentityConfig(trusted_proxies=["127.0.0.1"], platform_teams=["kafka-platform"])
    app = create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(T1), identity=identity)
    with serve_app(app) as url:
        yield url


@pytest.fixture(scope="module")
def framing_url(monitor_url: str) -> Iterator[str]:
    """Another origin: a page that frames the monitor's page `?path=`."""
    other = FastAPI()

    @other.get("/frame", response_class=HTMLResponse)
    def frame(path: str) -> str:
        return f'<link rel="icon" href="data:,"><h1>another site</h1><iframe id="victim" src="{monitor_url}{path}" width="800"></iframe>'

    with serve_app(other) as url:
        assert url.rsplit(":", 1)[1] != monitor_url.rsplit(":", 1)[1]
        yield url


@pytest.mark.parametrize("path", PAGES)
def test_another_site_cannot_frame_a_page(
    browser_page: BrowserPage, monitor_url: str, framing_url: str, path: str
) -> None:
    sign_in(browser_page, "carol", "payments")
    browser_page.expect_problem("ERR_BLOCKED_BY_RESPONSE")  # how Chromium reports the refused frame,
    browser_page.expect_problem("frame-ancestors 'none'")  # and why, on the console
    browser_page.base_url = framing_url
    browser_page.goto(f"/frame?path={path}")
    frame = browser_page.page.frame_locator("#victim")
    browser_page.page.wait_for_function(
        "() => document.querySelector('#victim').contentWindow !== null", timeout=10_000
    )
    assert frame.locator("header, #swagger-ui").count() == 0, f"{path} rendered inside another site's frame"
    refused = [p for p in browser_page.problems if "ERR_BLOCKED_BY_RESPONSE" in p or "frame-ancestors" in p]
    assert refused, f"no refusal of {path} seen: {browser_page.problems}"


@pytest.mark.parametrize("path", [p for p in PAGES if p != "/docs"])
def test_our_pages_load_under_the_policy_without_a_violation(
    browser_page: BrowserPage, monitor_url: str, path: str
) -> None:
    sign_in(browser_page, "carol", "payments")
    browser_page.page.add_init_script(WATCH_VIOLATIONS)
    browser_page.base_url = monitor_url
    answer = browser_page.goto(path)
    headers = answer.headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    browser_page.page.wait_for_load_state("networkidle")
    assert browser_page.page.evaluate("window.__violations") == []
    styled = browser_page.page.evaluate("getComputedStyle(document.querySelector('header')).display")
    assert styled == "flex", "the stylesheet from /static did not apply"


def test_the_lag_charts_keep_their_style_and_the_window_menu_works(
    browser_page: BrowserPage, monitor_url: str
) -> None:
    """The charts' CSS (nonce) applies, and the window menu submits without an inline script."""
    browser_page.page.add_init_script(WATCH_VIOLATIONS)
    browser_page.base_url = monitor_url
    browser_page.goto("/clusters/prod/groups/billing")
    chart = browser_page.page.locator("[data-role=lag-chart-offsets] svg .background").first
    assert chart.evaluate("e => getComputedStyle(e).fill") == "rgb(255, 255, 255)"
    with browser_page.page.expect_navigation():
        browser_page.page.select_option("select[name=window]", "6h")
    assert browser_page.page.url.endswith("window=6h")
    assert browser_page.page.evaluate("window.__violations") == []


def test_the_cluster_charts_keep_their_bar_colours(browser_page: BrowserPage, monitor_url: str) -> None:
    """pygal's per-bar colours, inline styles the policy refuses, are presentation attributes."""
    browser_page.base_url = monitor_url
    browser_page.goto("/clusters/prod")
    fills = browser_page.page.locator(".chart svg .bar rect").evaluate_all(
        "rects => rects.map(r => getComputedStyle(r).fill)"
    )
    palette = {"rgb(30, 142, 62)", "rgb(227, 116, 0)", "rgb(197, 34, 31)", "rgb(154, 163, 174)"}
    assert set(fills) <= palette, fills
    assert "rgb(197, 34, 31)" in fills, "the synthetic cluster's bad broker is no longer red"
