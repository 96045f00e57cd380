"""A group's lag objectives as of the newest evaluation, and how its error budget went day by
day (the `lag_objective_daily` view): what the group page and the API's group resource show."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, text

from monitor.core.objectives import budget_fraction
from monitor.expose.read.derived_records import GroupObjectiveColumns
from monitor.expose.read.fields import Described
from monitor.expose.read.queries import records
from monitor.expose.read.record_columns import select_list
from monitor.store.evaluation import latest_rows


@dataclass(frozen=True, slots=True)
class GroupObjective(GroupObjectiveColumns, Described):
    """One lag objective of a group, as the newest evaluation counted it."""

    __entity__ = "lag_objective"

    evaluated_at: datetime


def group_objectives(conn: Connection, cluster: str, group_id: str) -> list[GroupObjective]:
    """The group's objectives in the newest evaluation of its cluster, by name."""
    return records(
        conn,
        GroupObjective,
        f"SELECT {select_list(GroupObjectiveColumns)}, evaluated_at FROM {latest_rows('lag_objective')} o"
        " WHERE cluster = :c AND group_id = :g ORDER BY objective",
        {"c": cluster, "g": group_id},
    )


@dataclass(frozen=True, slots=True)
class BudgetDay:
    """One day of an objective: its bad minutes and the budget left at its end, over the
    objective's window (of the days recorded)."""

    day: datetime
    bad_minutes: int
    recorded_minutes: int
    budget_remaining: float


def budget_days(
    conn: Connection, cluster: str, group_id: str, objective: GroupObjective, until: datetime
) -> list[BudgetDay]:
    """The last `window_days` days of `objective` up to `until`, oldest first: each day's bad
    minutes, and the budget left at its end counting the bad minutes of the window's days up to
    it (each day's budget remaining against the whole window's budget)."""
    rows = conn.execute(
        _DAYS,
        {
            "c": cluster,
            "g": group_id,
            "o": objective.objective,
            "since": until - timedelta(days=objective.window_days),
        },
    ).all()
    allowed = objective.window_days * 1440 * budget_fraction(objective.target)
    spent = 0
    days = []
    for day, bad, recorded in rows:
        spent += bad
        days.append(BudgetDay(day, bad, recorded, 1.0 - spent / allowed))
    return days


_DAYS = text(
    "SELECT day, bad_minutes, good_minutes + bad_minutes FROM lag_objective_daily"
    " WHERE cluster = :c AND group_id = :g AND objective = :o AND day >= date_trunc('day', :since, 'UTC')"
    " ORDER BY day"
)
