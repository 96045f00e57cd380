"""The group page's plots in a real headless Chromium: a lagging group of the populated database
(real collection and Spark evaluation) with its catch-up forecast, held to a lag objective whose
minutes of the last days and whose counted row of the newest evaluation are seeded here. The lag
chart draws the lag and its projection from the newest evaluation, the budget chart one bar per
recorded day, the objectives table the same numbers; no console error, and the screenshot is kept
under var/test/browser/ for a person to look at."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from sqlalchemy import text

from tests.fixtures.browser import BrowserPage, populated_app, serve_app
from tests.fixtures.objectives import forget_objective, objective_row, record_minutes
from tests.fixtures.populated import Populated

pytestmark = pytest.mark.browser

OBJECTIVE = "plots-fresh"
TARGET, WINDOW_DAYS = 99.0, 7
BAD = (20, 45)
"""Bad minutes on the first and the second recorded day (a budget of 7 x 1440 x 1 % = 100.8)."""


@pytest.fixture
def objective(populated: Populated) -> Iterator[list[datetime]]:
    """The lagging group's objective: two whole days of minutes and today's up to now recorded,
    and its row in the newest evaluation; removed afterwards. Yields the recorded days."""
    engine, cluster, group = populated.engine, populated.cluster, populated.groups["lagging"].name
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = [today - timedelta(days=2), today - timedelta(days=1), today]
    for day, bad in zip(days, (*BAD, 0), strict=True):
        minutes = 1440 if day < today else int((datetime.now(UTC) - day).total_seconds() // 60)
        record_minutes(
            engine, cluster, OBJECTIVE, group, day, minutes, [day + timedelta(minutes=n) for n in range(bad)]
        )
    with engine.connect() as conn:
        newest = conn.execute(
            text("SELECT evaluated_at FROM latest_evaluations WHERE cluster = :c"), {"c": cluster}
        ).scalar_one()
    spent = sum(BAD)
    objective_row(
        engine, cluster, OBJECTIVE, group, newest, lag_threshold_seconds=60.0, target=TARGET,
        window_days=WINDOW_DAYS, minute_bad=True, burn_rate_5m=100.0, burn_rate_30m=100.0,
        burn_rate_1h=100.0, burn_rate_6h=30.0, burn_rate_3d=2.5, bad_minutes=spent, recorded_minutes=4000,
        budget_remaining=1 - spent / (WINDOW_DAYS * 1440 * 0.01), compliance=100 * (1 - spent / 4000),
    )  # fmt: skip
    try:
        yield days
    finally:
        forget_objective(engine, cluster, OBJECTIVE)


@pytest.fixture
def web_url(populated: Populated, objective: list[datetime]) -> Iterator[str]:
    """An app of its own, started once the objective is seeded: the session's app may already
    keep the group's page as an earlier test read it, until the cluster's next evaluation, which
    seeding rows does not make."""
    with serve_app(populated_app(populated)) as url:
        yield url


def test_the_group_page_plots_the_lag_with_its_projection_and_the_objectives_budget(
    web: BrowserPage, populated: Populated, objective: list[datetime]
) -> None:
    group = populated.groups["lagging"]
    web.goto(f"/clusters/{populated.cluster}/groups/{quote(group.name)}?window=6h")
    lag_chart, budget_chart = "[data-role=lag-chart-offsets] svg", "[data-role=budget-chart] svg"
    web.shot("group-plots", "h1", "[data-role=catch-up]", lag_chart, "#group-objectives", budget_chart)

    # The lag chart: the lag and, dashed after it, the backlog's projection at the current rates.
    lag = web.page.locator(lag_chart)
    assert lag.locator("title").first.text_content() == f"Lag in messages of {group.name} over the last 6 h"
    legend = lag.locator(".legends").text_content() or ""
    assert "Lag in messages" in legend and "projected at the current rates" in legend, legend
    lines = lag.locator("g.series path.line")
    assert lines.count() == 2, "the lag and its projection"
    dashes = [lines.nth(n).evaluate("line => getComputedStyle(line).strokeDasharray") for n in (0, 1)]
    assert dashes == ["none", "6px, 4px"], dashes
    words = lag.locator("desc").first.text_content() or ""
    assert "projected: " in words, words
    forecast = web.page.locator("[data-role=catch-up]").inner_text()
    assert forecast.startswith(("catches up in ~", "not catching up: ")), forecast

    # The budget chart: one bar per recorded day, each day's budget left in its description.
    budget = web.page.locator(budget_chart)
    title = budget.locator("title").first.text_content()
    assert title == f"Error budget of objective {OBJECTIVE} left per day, group {group.name}", title
    assert budget.locator("g.series rect.rect").count() == len(objective)
    labels = budget.locator(".axis.x text").all_text_contents()
    assert [f"{d:%m-%d}" for d in objective] == [t for t in labels if t], labels
    described = budget.locator("desc").first.text_content() or ""
    left = [1 - sum(BAD[:n]) / (WINDOW_DAYS * 1440 * (100 - TARGET) / 100) for n in (1, 2, 2)]
    for day, bad, share in zip(objective, (*BAD, 0), left, strict=True):
        assert f"{day:%Y-%m-%d}: {bad} bad minutes, {share * 100:.0f}% of the budget left" in described, (
            described
        )

    row = web.page.locator("#group-objectives tr[data-role=objective]").inner_text()
    assert OBJECTIVE in row and "bad this minute" in row and "35.5 %" in row, row
