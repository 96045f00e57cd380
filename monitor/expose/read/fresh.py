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
they need the windows and record times only the evaluation has. Every query here is a range of
one group in the primary keys of the three latest tables: its cost follows the group's
partitions, never the fleet's (docs/bench/fresh-lag.md has the plans).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, text

FRESH_PARTITIONS = """
SELECT f.topic, f.partition, f.committed_offset, f.end_offset,
       greatest(f.end_offset - f.committed_offset, 0) AS offset_lag,
       f.committed_offset_as_of, f.end_offset_as_of,
       least(f.committed_offset_as_of, f.end_offset_as_of) AS offset_lag_as_of
FROM (
    SELECT o.topic, o.partition,
           CASE WHEN c.observed_at > o.sampled_at THEN c.committed_offset ELSE o.committed_offset END
               AS committed_offset,
           greatest(o.sampled_at, c.observed_at) AS committed_offset_as_of,
           p.end_offset, p.end_offset_as_of
    FROM latest_group_offsets o
    JOIN LATERAL (
        SELECT p.end_offset, coalesce(p.end_offset_listed_at, p.sampled_at) AS end_offset_as_of
        FROM latest_partition_offsets p
        WHERE p.cluster = o.cluster AND p.topic = o.topic AND p.partition = o.partition LIMIT 1
    ) p ON true
    LEFT JOIN LATERAL (
        SELECT c.committed_offset, c.observed_at FROM latest_commits c
        WHERE c.cluster = o.cluster AND c.group_id = o.group_id AND c.topic = o.topic
          AND c.partition = o.partition LIMIT 1
    ) c ON true
    WHERE o.cluster = :c AND o.group_id = :g AND o.gone_at IS NULL
) f"""
"""The fresh offset lag of each partition of group `:g` on cluster `:c` that the store holds a
committed and an end offset of (a partition gone from the group is left out). The lookups in
the partitions' and the commits' tables are one primary key probe per partition of the group
(LIMIT 1 keeps the planner from turning them into a scan of the cluster's rows for a hash join)."""


@dataclass(frozen=True, slots=True)
class FreshLag:
    """One group-partition's offset lag from the newest offsets stored."""

    committed_offset: int
    end_offset: int
    offset_lag: int
    committed_offset_as_of: datetime
    end_offset_as_of: datetime
    offset_lag_as_of: datetime


Key = tuple[str, int]
"""(topic, partition)"""


def partition_lags(conn: Connection, cluster: str, group_id: str) -> dict[Key, FreshLag]:
    """(topic, partition) -> the fresh offset lag of each partition of the group (see the module);
    empty when the store holds none (the group unknown, or gone)."""
    rows = conn.execute(text(FRESH_PARTITIONS), {"c": cluster, "g": group_id})
    return {
        (str(r.topic), int(r.partition)): FreshLag(
            int(r.committed_offset),
            int(r.end_offset),
            int(r.offset_lag),
            r.committed_offset_as_of,
            r.end_offset_as_of,
            r.offset_lag_as_of,
        )
        for r in rows
    }


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
