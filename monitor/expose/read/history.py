"""Read layer: a consumer group's lag over time, and its recent commits.

History comes from `group_lag_history` and `lag_history` (every stored evaluation). A long window
is summarised into at most `max_points` time buckets: lags and ages take the worst value of a
bucket, the time until data loss the smallest, rates the mean, the status the worst, the state and
offsets the newest. A bucket narrower than the evaluation interval holds one evaluation, so a
short window returns the raw points. See `monitor.expose.read.queries` for the conventions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, text

from monitor.expose.read.fields import Described
from monitor.expose.read.lag import WORST_STATUS_FIRST
from monitor.expose.read.queries import records

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class GroupLagPoint(Described):
    """A group's lag at one evaluation (or the worst of a time bucket)."""

    __entity__ = "group"
    __overrides__ = {"evaluated_at": "the (newest) evaluation this point summarises"}

    evaluated_at: datetime
    offset_lag: int | None
    max_offset_lag: int | None
    lag_seconds: float | None
    max_lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_until_data_loss_seconds: float | None
    data_loss_occurred: bool | None
    status: str | None
    group_state: str | None
    members: int | None


@dataclass(frozen=True, slots=True)
class PartitionLagPoint(Described):
    """A group's lag on one partition at one evaluation (or the worst of a time bucket)."""

    __entity__ = "group_partition"
    __overrides__ = {"evaluated_at": "the (newest) evaluation this point summarises"}

    evaluated_at: datetime
    committed_offset: int | None
    end_offset: int | None
    offset_lag: int | None
    lag_seconds: float | None
    lag_seconds_method: str | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_until_data_loss_seconds: float | None
    data_loss_occurred: bool | None
    status: str | None


@dataclass(frozen=True, slots=True)
class LagHistory(Described, Generic[P]):
    """Lag over a time window, oldest point first."""

    since: datetime
    until: datetime
    step_seconds: int
    points: list[P]


def _bucketed(table: str, last: Sequence[str], worst_max: Sequence[str], mean: Sequence[str]) -> str:
    """Points of `table` in (since, until] grouped into buckets of :step seconds counted back
    from `until`, so the window makes at most `max_points` buckets."""
    columns = [
        "max(evaluated_at) AS evaluated_at",
        *(f"(array_agg({c} ORDER BY evaluated_at DESC))[1] AS {c}" for c in last),
        *(f"max({c}) AS {c}" for c in worst_max),
        *(f"avg({c}) AS {c}" for c in mean),
        "min(time_until_data_loss_seconds) AS time_until_data_loss_seconds",
        "bool_or(data_loss_occurred) AS data_loss_occurred",
        f"(array_agg(status ORDER BY {WORST_STATUS_FIRST}))[1] AS status",
    ]
    return f"""
        SELECT {", ".join(columns)} FROM {table}
        WHERE cluster = :c AND group_id = :g AND evaluated_at > :since AND evaluated_at <= :until
          {{extra}}
        GROUP BY floor(extract(epoch FROM CAST(:until AS timestamptz) - evaluated_at) / :step) ORDER BY 1
    """


_GROUP_HISTORY = _bucketed(
    "group_lag_history",
    last=("group_state", "members"),
    worst_max=("offset_lag", "max_offset_lag", "lag_seconds", "max_lag_seconds", "append_lag_seconds",
               "commit_lag_seconds"),
    mean=("consume_rate", "produce_rate"),
)  # fmt: skip
_PARTITION_HISTORY = _bucketed(
    "lag_history",
    last=("committed_offset", "end_offset", "lag_seconds_method"),
    worst_max=("offset_lag", "lag_seconds", "append_lag_seconds", "commit_lag_seconds"),
    mean=("consume_rate", "produce_rate"),
)


def group_history(
    conn: Connection, cluster: str, group_id: str, since: datetime, until: datetime, max_points: int = 500
) -> LagHistory[GroupLagPoint]:
    """A group's lag in (since, until], in at most `max_points` points."""
    step, params = _step(since, until, max_points), {"c": cluster, "g": group_id}
    sql = _GROUP_HISTORY.format(extra="")
    points = records(conn, GroupLagPoint, sql, {**params, "since": since, "until": until, "step": step})
    return LagHistory(since, until, step, points)


def partition_history(
    conn: Connection,
    cluster: str,
    group_id: str,
    topic: str,
    partition: int,
    since: datetime,
    until: datetime,
    max_points: int = 500,
) -> LagHistory[PartitionLagPoint]:
    """A group's lag on one partition in (since, until], in at most `max_points` points."""
    params: dict[str, Any] = {"c": cluster, "g": group_id, "t": topic, "p": partition}
    step = _step(since, until, max_points)
    sql = _PARTITION_HISTORY.format(extra="AND topic = :t AND partition = :p")
    points = records(conn, PartitionLagPoint, sql, {**params, "since": since, "until": until, "step": step})
    return LagHistory(since, until, step, points)


def _step(since: datetime, until: datetime, max_points: int) -> int:
    """Bucket width in whole seconds so that (since, until] makes at most `max_points` buckets.
    A bucket narrower than the evaluation interval holds one evaluation: the points are raw."""
    if until <= since:
        raise ValueError("the window must end after it starts")
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    return max(1, math.ceil((until - since).total_seconds() / max_points))


@dataclass(frozen=True, slots=True)
class Commit:
    """A committed offset seen to change: the offset, when it was seen, the lag at that time."""

    offset: int
    seen_at: datetime
    lag: int | None


def recent_commits(
    conn: Connection, cluster: str, group_id: str, since: datetime, per_partition: int = 10
) -> dict[tuple[str, int], list[Commit]]:
    """The last `per_partition` commits of each partition of a group since `since`, oldest
    first: the first evaluation in the window, then each evaluation whose committed offset
    differs from the one before (commits are observed by sampling, as the evaluation does)."""
    rows = conn.execute(
        text(
            """
            WITH h AS (
                SELECT topic, partition, evaluated_at, committed_offset, offset_lag,
                       lag(committed_offset) OVER w AS previous,
                       row_number() OVER w AS n
                FROM lag_history
                WHERE cluster = :c AND group_id = :g AND evaluated_at >= :since
                  AND committed_offset IS NOT NULL
                WINDOW w AS (PARTITION BY topic, partition ORDER BY evaluated_at)
            ), commits AS (
                SELECT *, row_number() OVER (PARTITION BY topic, partition
                                             ORDER BY evaluated_at DESC) AS age
                FROM h WHERE n = 1 OR previous IS DISTINCT FROM committed_offset
            )
            SELECT topic, partition, evaluated_at, committed_offset, offset_lag FROM commits
            WHERE age <= :keep ORDER BY topic, partition, evaluated_at
            """
        ),
        {"c": cluster, "g": group_id, "since": since, "keep": per_partition},
    )
    commits: dict[tuple[str, int], list[Commit]] = {}
    for row in rows:
        key = (str(row.topic), int(row.partition))
        commits.setdefault(key, []).append(
            Commit(int(row.committed_offset), row.evaluated_at, row.offset_lag)
        )
    return commits
