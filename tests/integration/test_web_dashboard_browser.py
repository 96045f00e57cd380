"""The dashboard pages in a real headless Chromium over the populated database (real collection,
Spark evaluation and alert cycle): each page renders with its key elements visible, its charts
drawn, no console error and no failed request; the screenshots are kept under
var/test/browser/ for a person to look at."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.fixtures.browser import BrowserPage
from tests.fixtures.populated import Populated

pytestmark = pytest.mark.browser


def _group_path(populated: Populated, role: str) -> str:
    return f"/clusters/{populated.cluster}/groups/{quote(populated.groups[role].name)}"


def test_overview_shows_the_cluster_card_with_its_charts(web: BrowserPage, populated: Populated) -> None:
    web.goto("/")
    card = f'[data-cluster="{populated.cluster}"]'
    web.shot(
        "dashboard-overview",
        card,
        f"{card} [data-role=brokers]",
        f"{card} [data-role=leader-chart] svg",
        f"{card} [data-role=disk-chart] svg",
        "p.fresh",
    )
    text = web.page.locator(card).inner_text()
    assert "3 / 3" in text, text  # the session's three brokers, all up
    assert "groups that lost data" in text  # the lost group
    assert "card-bad" in (web.page.locator(card).get_attribute("class") or "")
    title = web.page.locator(f"{card} [data-role=leader-chart] svg > title").text_content()
    assert title == f"Partition leaders per broker, {populated.cluster}"


def test_cluster_page_puts_the_worst_groups_first(web: BrowserPage, populated: Populated) -> None:
    web.goto(f"/clusters/{populated.cluster}")
    web.shot("dashboard-cluster", "h1", "#brokers", "#topics", "#groups", "figure.chart svg")
    rows = web.page.locator("#groups tr").all_inner_texts()[1:]
    names = [row.split("\t")[0] for row in rows]
    groups = populated.groups
    assert names.index(groups["lost"].name) < names.index(groups["caught_up"].name), names
    assert names[-1] == groups["caught_up"].name, names
    lost = web.page.locator("#groups tr", has_text=groups["lost"].name)
    assert "row-bad" in (lost.get_attribute("class") or "")
    assert "data lost" in lost.inner_text()
    lagging = web.page.locator("#groups tr", has_text=groups["lagging"].name).inner_text()
    assert "\t40\t" in lagging, lagging
    brokers = web.page.locator("#brokers tr").all_inner_texts()[1:]
    assert len(brokers) == 3 and all("\tup\t" in b for b in brokers), brokers


def test_topic_page_shows_the_group_about_to_lose_data(web: BrowserPage, populated: Populated) -> None:
    ledger = populated.topics["ledger"]
    web.goto(f"/clusters/{populated.cluster}/topics/{ledger}")
    web.shot(
        "dashboard-topic",
        "h1",
        "#retention",
        "[data-role=retention-button] button",
        "#topic-groups",
        "#partitions",
    )
    assert web.page.locator("[data-role=retention-button] button").is_disabled()
    at_risk = web.page.locator("#topic-groups tr", has_text=populated.groups["at_risk"].name)
    assert "row-bad" in (at_risk.get_attribute("class") or "")
    assert "min" in at_risk.inner_text() and "time limit" in at_risk.inner_text()
    assert "data-loss margin" in web.page.locator("#topic-groups tr").first.inner_text()
    partitions = web.page.locator("#partitions tr").all_inner_texts()[1:]
    assert any(row.startswith("0\t") for row in partitions), partitions


def test_group_page_shows_the_lag_and_reloads_on_another_window(
    web: BrowserPage, populated: Populated
) -> None:
    lagging = populated.groups["lagging"]
    web.goto(_group_path(populated, "lagging"))
    web.shot(
        "dashboard-group",
        "h1",
        "#group-facts",
        "[data-role=offset-lag]",
        "[data-role=lag-chart-offsets] svg",
        "[data-role=lag-chart-seconds] svg",
        "#group-partitions",
    )
    assert web.page.locator("[data-role=offset-lag]").inner_text().startswith(str(lagging.lag))
    assert "exact" in web.page.locator("#group-facts").inner_text()
    # What to do: the forecast in words, and where it has rates, the backlog's projection drawn.
    forecast = web.page.locator("[data-role=catch-up]").inner_text()
    assert forecast.startswith(("catches up in ~", "not catching up: ", "no catch-up forecast yet")), forecast
    if not forecast.startswith("no catch-up"):
        legend = web.page.locator("[data-role=lag-chart-offsets] svg").text_content() or ""
        assert "projected at the current rates" in legend, legend
    # A wider window than the default (1h), so the populated evaluation stays inside it however
    # late in the session this test runs (a 15m window emptied once the suite grew past that).
    with web.page.expect_navigation():
        web.page.select_option("select[name=window]", "6h")
    assert web.page.url.endswith("?window=6h")
    web.shot("dashboard-group-6h", "[data-role=lag-chart-offsets] svg")
    assert web.page.locator("select[name=window]").input_value() == "6h"


def test_the_group_that_lost_data_says_so(web: BrowserPage, populated: Populated) -> None:
    web.goto(_group_path(populated, "lost"))
    web.shot("dashboard-group-lost", "h1", "[data-role=data-loss]", "table.alerts")
    assert web.page.locator("[data-role=data-loss]").inner_text() == "data lost"
    assert "DataLossOccurred" in web.page.locator("table.alerts").inner_text()


def test_unknown_names_and_a_bad_window_are_pages_that_link_back(
    web: BrowserPage, populated: Populated
) -> None:
    web.expect_problem("404")
    web.expect_problem("422")
    for name, path, status in (
        ("dashboard-404-cluster", "/clusters/no-such-cluster", 404),
        ("dashboard-404-topic", f"/clusters/{populated.cluster}/topics/no-such-topic", 404),
        ("dashboard-404-group", f"/clusters/{populated.cluster}/groups/no-such-group", 404),
        ("dashboard-422-window", _group_path(populated, "lagging") + "?window=2w", 422),
    ):
        response = web.page.goto(web.base_url + path, wait_until="load")
        assert response is not None and response.status == status, path
        web.shot(name, "h1", "[data-role=error]", "ul.back a")
