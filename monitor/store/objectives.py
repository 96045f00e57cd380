"""The per-minute record of the lag objectives (`objective_minutes`), written by the evaluate
stage: one row per (cluster, objective, group, minute), bad when an evaluation in that minute saw
the group's lag above the objective's threshold. The burn rates and error budgets of the next
evaluations are counted from it (monitor.evaluate.extract), not from the raw samples, so an
objective's 28 days cost one small row a minute per group, whatever the sample retention.

Which groups each objective applies to (`objective_groups`) is decided before each evaluation on
the driver, with RE2 (core.objectives.matching_groups), and read by the evaluation plan like its
clock: Spark's regular expressions are Java's, which backtrack, and a pattern the file accepts
could keep an evaluation busy for ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Boolean, Connection, DateTime, ForeignKey, Index, Text, delete, insert, text
from sqlalchemy.orm import Mapped, mapped_column

from monitor.core.derived import table_of
from monitor.core.objectives import LONGEST_BURN_WINDOW, MAX_WINDOW_DAYS, Objective, matching_groups
from monitor.store.base import Base

KEPT = max(timedelta(days=MAX_WINDOW_DAYS), LONGEST_BURN_WINDOW)
"""How long a minute is kept: the longest window an objective or a burn rate can look at."""


class ObjectiveMinute(Base):
    """Whether (cluster, objective, group_id) was bad in `minute` (truncated to the minute)."""

    __tablename__ = "objective_minutes"
    __table_args__ = (Index("ix_objective_minutes_minute", "minute"),)

    cluster: Mapped[str] = mapped_column(Text, primary_key=True)
    objective: Mapped[str] = mapped_column(Text, primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True)
    minute: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    bad: Mapped[bool] = mapped_column(Boolean)


def record_minutes(conn: Connection, clusters: Sequence[str], evaluated_at: datetime) -> int:
    """Record the minute of `evaluated_at` of every objective row of that evaluation with a known
    lag (`minute_bad` not null): bad if it or an earlier evaluation in the same minute saw it bad.
    Returns the rows written."""
    result = conn.execute(
        text(
            "INSERT INTO objective_minutes (cluster, objective, group_id, minute, bad)"
            " SELECT cluster, objective, group_id, date_trunc('minute', evaluated_at), minute_bad"
            f" FROM {table_of('lag_objective')}"
            " WHERE evaluated_at = :at AND cluster = ANY(:clusters) AND minute_bad IS NOT NULL"
            " ON CONFLICT (cluster, objective, group_id, minute)"
            " DO UPDATE SET bad = objective_minutes.bad OR excluded.bad"
        ),
        {"at": evaluated_at, "clusters": list(clusters)},
    )
    return result.rowcount


def prune_minutes(conn: Connection, now: datetime) -> int:
    """Delete the minutes older than any window looks at (`KEPT`); returns how many."""
    return conn.execute(delete(ObjectiveMinute).where(ObjectiveMinute.minute < now - KEPT)).rowcount


class ObjectiveGroup(Base):
    """An objective applies to (cluster, group_id) in the evaluations of plan `plan_id` (gone with
    the plan's clock)."""

    __tablename__ = "objective_groups"

    plan_id: Mapped[str] = mapped_column(
        Text, ForeignKey("evaluation_clocks.plan_id", ondelete="CASCADE"), primary_key=True
    )
    objective: Mapped[str] = mapped_column(Text, primary_key=True)
    cluster: Mapped[str] = mapped_column(Text, primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True)


_KNOWN_GROUPS = text(
    """
    WITH RECURSIVE g(cluster, group_id) AS (
        (SELECT cluster, group_id FROM latest_group_offsets WHERE cluster = ANY(:clusters)
         ORDER BY cluster, group_id LIMIT 1)
        UNION ALL
        SELECT n.cluster, n.group_id FROM g CROSS JOIN LATERAL (
            SELECT l.cluster, l.group_id FROM latest_group_offsets l
            WHERE l.cluster = ANY(:clusters) AND (l.cluster, l.group_id) > (g.cluster, g.group_id)
            ORDER BY l.cluster, l.group_id LIMIT 1
        ) n
    )
    SELECT cluster, group_id FROM g
    """
)
"""The (cluster, group_id) with committed offsets in the store: one descent of the primary key
per group (a loose index scan), not a read of its partitions."""


def set_objective_groups(
    conn: Connection, plan_id: str, clusters: Sequence[str], objectives: Sequence[Objective]
) -> int:
    """Decide which groups of `clusters` each objective applies to for the next evaluation of the
    plan `plan_id` (whose clock row exists); returns how many (objective, group) there are."""
    conn.execute(delete(ObjectiveGroup).where(ObjectiveGroup.plan_id == plan_id))
    if not objectives:
        return 0
    groups = [(str(c), str(g)) for c, g in conn.execute(_KNOWN_GROUPS, {"clusters": list(clusters)})]
    rows = [
        {"plan_id": plan_id, "objective": objective, "cluster": cluster, "group_id": group_id}
        for objective, cluster, group_id in matching_groups(objectives, groups)
    ]
    if rows:
        conn.execute(insert(ObjectiveGroup), rows)
    return len(rows)
