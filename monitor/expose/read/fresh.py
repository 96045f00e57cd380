"""Read layer: a group's offset lag as fresh as the store holds it, between two evaluations.

The evaluation writes the offset lag with everything else it derives (`group_partition_lag`),
so read from there a commit would show only after the next evaluation: 30 s plus its own time.
The committed offset and the end offset are in the store long before: each group-partition's
newest commit in `latest_commits` (written by the commits job as the commit stream reads it,
within about a second), the offsets job's newest sample in `latest_group_offsets` (which holds
committed offsets corrected by OffsetFetch, and every committed offset when the stream is off)
and each partition's newest end offset in `latest_partition_offsets` (each offsets cycle) and
`refreshed_end_offsets` (the end offsets job, every second). This module reads them:

- the committed offset is the newer of the commit observed and the sample; it holds
  (`committed_offset_as_of`) until the commit stream's mark (`commit_stream_marks`: every commit
  made before it is stored) when the stream was live since the sample or the commit, else as of
  the newer of the two;
- the end offset is the partition's newest listing (`end_offset_as_of`: when it was listed);
- the offset lag is max(end - committed, 0), as of the older of the two (`offset_lag_as_of`):
  about a second old with the commit stream and the end offsets job running, as old as the
  offsets job's last cycle without them.

The lag in seconds, the status and the data-loss risk stay the evaluation's (`evaluated_at`):
they need the windows and record times only the evaluation has. The query
(`monitor.store.fresh_lag`) is a range of each group asked in the primary keys of the
latest tables: its cost follows those groups' partitions, never the fleet's
(docs/bench/fresh-lag.md has the plans).

The counts of lagging groups (a cluster's, a topic's) and the lists' `lagging` filter read every
group of the cluster the same way (`GROUP_LAGS`, `LAGGING_BY_TOPIC`): a group's offset lag is
the fresh one where the store holds its offsets, else its evaluation's (as `with_fresh_lag`
shows it), and the groups are those of the newest evaluation and those the store has offsets of
(before the first evaluation, the latter only). One pass over the cluster's rows of the latest
tables, never a read per group (a few topics' counts: their rows of `latest_group_offsets`' topic
index and a probe per partition); `offset_lag_as_of` says how old the count is (the oldest group
counted).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection, text

from monitor.core.vocabulary import lagging_sql
from monitor.store.evaluation import latest_rows
from monitor.store.fresh_lag import (
    FRESH_GROUP_TOPICS,
    FRESH_GROUP_TOPICS_OF_TOPICS,
    FRESH_GROUPS,
    FreshLag,
    Key,
    fleet_read,
    groups_lags,
)

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


def with_fresh_lag(record: R, lags: Iterable[FreshLag], evaluated_at: datetime | None) -> R:
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


def _or_evaluated(fresh: str, entity: str, keys: tuple[str, ...], only: str = "") -> str:
    """Each row of `fresh` (the store's offset lag by `keys`) or, where it has none, of the newest
    evaluation of `entity` on cluster `:c` (its rows that `only`, SQL conditions, keeps): the
    keys, `offset_lag` and `offset_lag_as_of`."""
    on = " AND ".join(f"e.{k} = f.{k}" for k in keys)
    return f"""
    SELECT {", ".join(f"coalesce(f.{k}, e.{k}) AS {k}" for k in keys)},
           CASE WHEN f.{keys[0]} IS NULL THEN e.offset_lag ELSE f.offset_lag END AS offset_lag,
           coalesce(f.offset_lag_as_of, e.evaluated_at) AS offset_lag_as_of
    FROM ({fresh}) f
    FULL JOIN (
        SELECT {", ".join(keys)}, offset_lag, evaluated_at FROM {latest_rows(entity)} d
        WHERE cluster = :c{only}
    ) e ON {on}"""


GROUP_LAGS = _or_evaluated(FRESH_GROUPS, "group", ("group_id",))
"""Every group of cluster `:c` with its offset lag (see the module): `group_id`, `offset_lag`,
`offset_lag_as_of`."""

LAGGING_GROUP_IDS = f"SELECT group_id FROM ({GROUP_LAGS}) l WHERE {lagging_sql()}"
"""The ids of the lagging groups of cluster `:c` (offset lag > 0)."""


def _lagging_by_topic(group_topic_lags: str) -> str:
    return f"""
    SELECT topic, count(*) FILTER (WHERE {lagging_sql()})::int AS lagging_groups,
           min(offset_lag_as_of) AS offset_lag_as_of
    FROM ({group_topic_lags}) l
    GROUP BY topic"""


_GROUP_TOPIC = ("group_id", "topic")
LAGGING_BY_TOPIC = _lagging_by_topic(_or_evaluated(FRESH_GROUP_TOPICS, "group_topic", _GROUP_TOPIC))
"""Per topic of cluster `:c` a group reads: its lagging groups (by their offset lag on the topic,
see the module), and how old the offset lag they are counted from is (the oldest group's)."""

LAGGING_OF_TOPICS = _lagging_by_topic(
    _or_evaluated(
        FRESH_GROUP_TOPICS_OF_TOPICS, "group_topic", _GROUP_TOPIC, " AND topic = ANY(CAST(:ts AS text[]))"
    )
)
"""LAGGING_BY_TOPIC of the topics `:ts` (an array) only: a topic's page, a page of topics."""


@dataclass(frozen=True, slots=True)
class GroupCount:
    """A cluster's groups and how many of them lag, as of the oldest offset lag counted."""

    consumer_groups: int
    lagging_groups: int
    offset_lag_as_of: datetime | None


GROUP_COUNT = f"""
    SELECT count(*)::int AS consumer_groups, count(*) FILTER (WHERE {lagging_sql()})::int AS lagging_groups,
           min(offset_lag_as_of) AS offset_lag_as_of
    FROM ({GROUP_LAGS}) l"""
"""`GroupCount` of cluster `:c`."""


def group_count(conn: Connection, cluster: str) -> GroupCount:
    """The groups of `cluster` and its lagging groups (see the module); as of None without groups."""
    with fleet_read(conn):
        row = conn.execute(text(GROUP_COUNT), {"c": cluster}).one()
    return GroupCount(row.consumer_groups, row.lagging_groups, row.offset_lag_as_of)


Counter = Callable[[Connection, str], GroupCount]
"""How a reader counts a cluster's groups: `group_count` (live), or `KeptCounts.count`."""

KEPT_AT_LEAST = 1.0
"""Seconds a kept count serves before it is counted again, however cheap the count."""
KEPT_COST_FACTOR = 10
"""A kept count also serves for this many times the time its count took: counting a cluster's
groups takes at most about a tenth of a core however often pages ask (1.5 s at 100,000
group-partitions, where a count takes about 150 ms; about 15 s at 1,000,000)."""


@dataclass(frozen=True, slots=True)
class _Kept:
    count: GroupCount
    counted_at: float
    serves_for: float


class KeptCounts:
    """`group_count` of each cluster, kept for a moment: the overview and the cluster pages (and
    their API resources) are asked many times a second, and a cluster's count is one pass over
    its rows of the latest tables. A count is counted again once it is older than the larger of
    `KEPT_AT_LEAST` and `KEPT_COST_FACTOR` times what its count took; meanwhile one request
    counts and the others serve the kept count. Its `offset_lag_as_of` still says how old the
    offset lag counted is. Thread-safe; a count that fails keeps nothing and raises."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kept: dict[str, _Kept] = {}
        self._lock = threading.Lock()
        self._counting: dict[str, threading.Lock] = {}

    def count(self, conn: Connection, cluster: str) -> GroupCount:
        kept = self._fresh(cluster)
        if kept is not None:
            return kept.count
        with self._lock:
            counting = self._counting.setdefault(cluster, threading.Lock())
            previous = self._kept.get(cluster)
        if not counting.acquire(blocking=previous is None):
            assert previous is not None
            return previous.count  # another request counts: serve the last count
        try:
            kept = self._fresh(cluster)
            if kept is not None:
                return kept.count
            started = self._clock()
            counted = group_count(conn, cluster)
            now = self._clock()
            serves_for = max(KEPT_AT_LEAST, KEPT_COST_FACTOR * (now - started))
            with self._lock:
                self._kept[cluster] = _Kept(counted, now, serves_for)
            return counted
        finally:
            counting.release()

    def forget(self, cluster: str) -> None:
        """Count `cluster` again at the next ask (a cluster removed, a test's store replaced)."""
        with self._lock:
            self._kept.pop(cluster, None)

    def _fresh(self, cluster: str) -> _Kept | None:
        with self._lock:
            kept = self._kept.get(cluster)
        if kept is None or self._clock() - kept.counted_at >= kept.serves_for:
            return None
        return kept
