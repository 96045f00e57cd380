"""The collection health page in a real headless Chromium over the populated database: the last
run of every job per cluster, their age against the job's interval, and the failed runs."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta

import pytest

from monitor.core.clock import FakeClock
from monitor.expose.web.app import create_app
from tests.fixtures.browser import BrowserPage, serve_app
from tests.fixtures.populated import UNREACHABLE, Populated

pytestmark = pytest.mark.browser

JOBS = ("configs", "log_dirs", "metadata", "offsets")


Serve = Callable[[timedelta], BrowserPage]


@pytest.fixture
def at(browser_page: BrowserPage, populated: Populated) -> Iterator[Serve]:
    """`at(offset)`: `browser_page` on an app whose clock reads `populated.collected_at + offset`."""
    with ExitStack() as servers:

        def serve(offset: timedelta) -> BrowserPage:
            clock = FakeClock(populated.collected_at + offset)
            app = create_app(populated.engine, stale_after=timedelta(minutes=5), clock=clock)
            browser_page.base_url = servers.enter_context(serve_app(app))
            return browser_page

        yield serve


def test_the_collection_page_shows_every_job_of_every_cluster(web: BrowserPage, populated: Populated) -> None:
    web.goto("/collection")
    cluster = f"section[data-cluster='{populated.cluster}']"
    offline = f"section[data-cluster='{UNREACHABLE}']"
    web.shot("collection", "h1", "[data-role=freshness]", cluster, offline, "#failures table")

    freshness = web.page.locator("[data-role=freshness]").inner_text()
    assert re.search(r"Data as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d+ s ago", freshness), freshness
    for job in JOBS:
        row = web.page.locator(f"{cluster} tr[data-job={job}]")
        text = row.inner_text()
        assert "ok" in row.locator(".pill").inner_text(), text
        assert re.search(r"\d+ ms", text) and "ago" in text and "every" in text, text
    counts = web.page.locator(f"{cluster} tr[data-job=offsets] td.counts").inner_text()
    assert counts.strip(), "the offsets run shows what it counted"

    failed = web.page.locator(f"{offline} tr[data-job=metadata]")
    assert failed.locator(".pill").inner_text() == "failed"
    assert failed.get_attribute("data-stale") == "true" and "never" in failed.inner_text()
    assert failed.locator("td.error").inner_text().strip(), "the failed run shows its error"
    failures = web.page.locator("#failures tr", has_text=UNREACHABLE)
    assert failures.count() >= 1 and "failed" in failures.first.inner_text()


def test_jobs_collected_seconds_ago_are_fresh(at: Serve, populated: Populated) -> None:
    page = at(timedelta(seconds=10))
    page.goto("/collection")
    cluster = f"section[data-cluster='{populated.cluster}']"
    page.shot("collection-fresh", cluster)
    for job in JOBS:
        assert page.page.locator(f"{cluster} tr[data-job={job}]").get_attribute("data-stale") == "false", job
    summary = page.page.locator("#stale-summary").inner_text()
    assert f"{UNREACHABLE}/metadata" in summary and f"{populated.cluster}/" not in summary, summary


def test_jobs_without_a_success_for_three_intervals_are_marked_stale(at: Serve, populated: Populated) -> None:
    page = at(timedelta(hours=1))
    page.goto("/collection")
    cluster = f"section[data-cluster='{populated.cluster}']"
    page.shot("collection-stale", "#stale-summary", f"{cluster} .stale-mark")
    for job in JOBS:
        row = page.page.locator(f"{cluster} tr[data-job={job}]")
        assert row.get_attribute("data-stale") == "true", job
        assert "stale" in row.locator("[data-role=age]").inner_text()
    summary = page.page.locator("#stale-summary").inner_text()
    assert all(f"{populated.cluster}/{job}" in summary for job in JOBS), summary
    freshness = page.page.locator("[data-role=freshness]").inner_text()
    assert re.search(r"(36\d\d|3[5-9]\d\d) s ago", freshness), freshness  # the newest run is an hour old
