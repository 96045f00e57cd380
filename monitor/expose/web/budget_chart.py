"""The error budget chart of a lag objective on the group page: the budget left at the end of
each day of the objective's window (inline SVG, drawn like every chart of the pages: charts.py)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from monitor.core.formatting import percent_filter
from monitor.expose.read.objectives import BudgetDay
from monitor.expose.web import charts


def budget(group: str, objective: str, days: Sequence[BudgetDay]) -> charts.Chart | None:
    """The budget left per day, in percent (negative: overspent); None without a recorded day."""
    return _budget(group, objective, tuple(days))


@lru_cache(maxsize=64)
def _budget(group: str, objective: str, days: tuple[BudgetDay, ...]) -> charts.Chart | None:
    if not days:
        return None
    lowest = min(0.0, *(d.budget_remaining * 100 for d in days))
    import pygal

    chart = pygal.Bar(
        title="Error budget left",
        width=900,
        height=200,
        range=(lowest, 100),
        show_legend=False,
        x_label_rotation=0,
        truncate_label=-1,
        value_formatter=lambda v: f"{v:.1f}%",
        style=charts.budget_style(),
        **charts.COMMON,
    )
    chart.x_labels = [f"{d.day:%m-%d}" for d in days]
    chart.add(
        "budget left",
        [
            {"value": d.budget_remaining * 100, "color": charts.budget_colour(d.budget_remaining)}
            for d in days
        ],
    )
    alt = "; ".join(
        f"{d.day:%Y-%m-%d}: {d.bad_minutes} bad minutes, {percent_filter(d.budget_remaining)} of the budget "
        "left"
        for d in days
    )
    title = f"Error budget of objective {objective} left per day, group {group}"
    return charts.finish(chart, ("budget", group, objective, days), title, alt)
