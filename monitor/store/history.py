"""Just enough end-offset history to interpolate an append time, read in one statement.

For each (topic, partition, offset) target: the newest sample whose end offset is <= the offset
and the first sample after it whose end offset is > the offset (the pair that brackets the
append; the first in the window when none is <= it); and for each partition once, whatever the
number of its targets, the two oldest and the newest samples of the window (the average rate,
for offsets older than the window). Targets that are the same (two groups at one offset) are
probed once. At most two rows per distinct target and three per partition.

Each probe walks the samples from where its answer starts: the newest sample back to the
first <= the offset (as far as the group lags), then forward from there. The oldest sample > the
offset taken from the start of the window instead walked every sample of the window below the
offset, all of them for a group that keeps up: with a week of samples every 15 s (40,320 a
partition), 2 s for 200 targets on 50 partitions against 0.02 s (docs/bench/end-offset-history.md).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, text

_BRACKETS = text(
    """
    WITH t AS (
        SELECT DISTINCT * FROM unnest(
            CAST(:topics AS text[]), CAST(:partitions AS int[]), CAST(:offsets AS bigint[])
        ) AS t(topic, partition, target)
    ), w AS (SELECT DISTINCT topic, partition FROM t)
    SELECT t.topic, t.partition, x.end_offset, x.sampled_at
    FROM t
    LEFT JOIN LATERAL (
        SELECT end_offset, sampled_at FROM partition_offsets p
        WHERE p.cluster = :cluster AND p.topic = t.topic AND p.partition = t.partition
          AND p.sampled_at >= :since AND p.end_offset <= t.target
        ORDER BY p.sampled_at DESC LIMIT 1
    ) AS below ON true
    CROSS JOIN LATERAL (
        SELECT below.end_offset, below.sampled_at WHERE below.sampled_at IS NOT NULL
        UNION ALL
        (SELECT end_offset, sampled_at FROM partition_offsets p
          WHERE p.cluster = :cluster AND p.topic = t.topic AND p.partition = t.partition
            AND p.sampled_at >= :since AND p.sampled_at > coalesce(below.sampled_at, '-infinity')
            AND p.end_offset > t.target
          ORDER BY p.sampled_at ASC LIMIT 1)
    ) AS x
    UNION
    SELECT w.topic, w.partition, y.end_offset, y.sampled_at
    FROM w CROSS JOIN LATERAL (
        (SELECT end_offset, sampled_at FROM partition_offsets p
          WHERE p.cluster = :cluster AND p.topic = w.topic AND p.partition = w.partition
            AND p.sampled_at >= :since
          ORDER BY p.sampled_at ASC LIMIT 2)
        UNION ALL
        (SELECT end_offset, sampled_at FROM partition_offsets p
          WHERE p.cluster = :cluster AND p.topic = w.topic AND p.partition = w.partition
            AND p.sampled_at >= :since
          ORDER BY p.sampled_at DESC LIMIT 1)
    ) AS y
    """
)


def end_offset_brackets(
    conn: Connection, cluster: str, targets: Collection[tuple[str, int, int]], since: datetime
) -> dict[tuple[str, int], list[tuple[int, datetime]]]:
    """(topic, partition) -> the samples around each target's offset, ascending by time."""
    if not targets:
        return {}
    rows = conn.execute(
        _BRACKETS,
        {
            "cluster": cluster,
            "since": since,
            "topics": [t for t, _, _ in targets],
            "partitions": [p for _, p, _ in targets],
            "offsets": [o for _, _, o in targets],
        },
    )
    history: dict[tuple[str, int], list[tuple[int, datetime]]] = {}
    for topic, partition, end_offset, sampled_at in rows:
        history.setdefault((topic, partition), []).append((int(end_offset), sampled_at))
    for points in history.values():
        points.sort(key=lambda point: point[1])
    return history
