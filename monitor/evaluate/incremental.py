"""Whether an evaluation is incremental, and which groups it carries (monitor.store.carry decides
them in PostgreSQL; monitor.evaluate.job copies their rows beside the ones it computes)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.evaluate.engine import KEY_SEPARATOR
from monitor.evaluate.rules import Rule, match_columns
from monitor.evaluate.transforms.rollups import OFFSETS_JOB, REACHED, SAMPLE_STALE_AFTER
from monitor.store.carry import GROUP_ENTITIES, choose_carried, previous_evaluation

TIME_DEPENDENT = frozenset({"time_since_last_commit_seconds"})
"""The columns of a carried group's rows that move with the clock alone."""

Carry = tuple[str, datetime] | None
"""(plan_id, previous evaluation) of an incremental evaluation, whose carried rows are copied
beside the computed ones; None for a full one."""


def carries(rules: Sequence[Rule]) -> bool:
    """Whether an evaluation of `rules` may carry groups: no rule of a group entity decides on a
    column that moves with the clock alone (its match could change while the group stands still)."""
    return not any(rule.entity in GROUP_ENTITIES and match_columns(rule) & TIME_DEPENDENT for rule in rules)


def choose(
    conn: Connection,
    plan_id: str,
    clusters: Sequence[str],
    rules: Sequence[Rule],
    incremental: bool,
    evaluated_at: datetime,
    window: timedelta,
) -> tuple[Carry, int | None]:
    """The carry of the plan's evaluation at `evaluated_at` and how many groups it carries (None:
    a full evaluation), its groups written for the plan's inputs to leave out. Full unless
    `incremental` (a kept plan, not asked for a full evaluation), with `rules` that allow it
    (`carries`) and a previous evaluation of the plan within `window` (its rows are the ones
    copied; a plan's first evaluation, after a start or a change of its rules, has none)."""
    previous = previous_evaluation(conn, plan_id) if incremental and carries(rules) else None
    if previous is not None and not evaluated_at - window <= previous < evaluated_at:
        previous = None
    carried = choose_carried(
        conn,
        plan_id,
        clusters,
        previous,
        evaluated_at,
        window,
        stale_after=SAMPLE_STALE_AFTER,
        separator=KEY_SEPARATOR,
        offsets_job=OFFSETS_JOB,
        reached=REACHED,
    )
    if previous is None:
        return None, None
    return (plan_id, previous), carried
