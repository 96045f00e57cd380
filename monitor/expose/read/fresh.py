"""Read layer: a group's offset lag as fresh as the store holds it, between two evaluations.

The evaluation writes the offset lag with everything else it derives (`group_partition_lag`),
so read from there a commit would show only after the next evaluation: 30 s plus its own time.
The committed offset and the end offset are in the store long before: each group-partition's
newest commit in `latest_commits` (written by the commits job as the commit stream reads it,
within about a second), the offsets job's newest sample in `latest_group_offsets` (which holds
committed offsets corrected by OffsetFetch, and every committed offset when the stream is off)
and each partition's newest end offset in `latest_partition_offsets`. This module reads them:

- the committed offset is the newer of the commit observed and the sample (`committed_offset_as_of`);
- the end offset is the partition's newest listing (`end_offset_as_of`: when it was listed);
- the offset lag is max(end - committed, 0), as of the older of the two (`offset_lag_as_of`).

The lag in seconds, the status and the data-loss risk stay the evaluation's (`evaluated_at`):
they need the windows and record times only the evaluation has. The query
(`monitor.store.fresh_lag`) is a range of each group asked in the primary keys of the three
latest tables: its cost follows those groups' partitions, never the fleet's
(docs/bench/fresh-lag.md has the plans).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection

from monitor.store.fresh_lag import FreshLag, Key, groups_lags

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R", bound="DataclassInstance")


def partition_lags(conn: Connection, cluster: str, group_id: str) -> dict[Key, FreshLag]:
    """(topic, partition) -> the fresh offset lag of each partition of the group (see the module);
    empty when the store holds none (the group unknown, or gone)."""
    return groups_lags(conn, cluster, [group_id]).get(group_id, {})


@dataclass(frozen=True, slots=True)
class LagTotal:
    """The fresh offset lag of several partitions: summed, the largest, as of the oldest."""

    offset_lag: int
    max_offset_lag: int
    offset_lag_as_of: datetime


def total(lags: list[FreshLag]) -> LagTotal | None:
    """The total of `lags`; None when there are none."""
    if not lags:
        return None
    return LagTotal(
        sum(lag.offset_lag for lag in lags),
        max(lag.offset_lag for lag in lags),
        min(lag.offset_lag_as_of for lag in lags),
    )


def with_fresh_lag(record: R, lags: Iterable[FreshLag], evaluated_at: datetime) -> R:
    """`record` (a read record with `offset_lag`, `max_offset_lag` and `offset_lag_as_of`) with
    the total of `lags`; without fresh lags, its evaluation's offset lag, as of `evaluated_at`."""
    fresh = total(list(lags))
    if fresh is None:
        return replace(record, offset_lag_as_of=evaluated_at)
    return replace(
        record,
        offset_lag=fresh.offset_lag,
        max_offset_lag=fresh.max_offset_lag,
        offset_lag_as_of=fresh.offset_lag_as_of,
    )
