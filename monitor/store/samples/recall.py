"""Reads for the offsets collector: what it needs back after a restart (the latest committed and end
offsets) and its cache of record timestamps, with that cache's pruning."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, text

from monitor.core.records import (
    RecordTimestamp,
)
from monitor.store.samples.staging import (
    to_ms,
)

RecordKey = tuple[str, int, int]
"""(topic, partition, offset) of a record."""


def cached_timestamps(
    conn: Connection, cluster: str, keys: Collection[RecordKey]
) -> dict[RecordKey, RecordTimestamp]:
    """The cached record timestamps of `keys` ((topic, partition, offset)); absent keys are not
    cached. One query whatever the number of keys."""
    if not keys:
        return {}
    topics, partitions, offsets = zip(*keys, strict=True)
    rows = conn.execute(
        text(
            'SELECT r.topic, r.partition, r."offset", r.record_offset, r."timestamp", r.timestamp_type '
            "FROM unnest(CAST(:topics AS text[]), CAST(:partitions AS integer[]), "
            "            CAST(:offsets AS bigint[])) AS k(topic, partition, record) "
            "JOIN record_timestamps AS r ON r.cluster = :cluster AND r.topic = k.topic "
            'AND r.partition = k.partition AND r."offset" = k.record'
        ),
        {
            "cluster": cluster,
            "topics": list(topics),
            "partitions": list(partitions),
            "offsets": list(offsets),
        },
    )
    found = {}
    for topic, partition, offset, record_offset, timestamp, timestamp_type in rows:
        ms = to_ms(timestamp) if timestamp is not None else None
        found[(topic, partition, offset)] = RecordTimestamp(
            topic, partition, offset, record_offset, ms, timestamp_type
        )
    return found


def cached_offset_marks(conn: Connection, cluster: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the highest offset whose record timestamp the store holds for
    `cluster`. One query (a pass over the cluster's cached timestamps)."""
    rows = conn.execute(
        text(
            'SELECT topic, partition, max("offset") FROM record_timestamps WHERE cluster = :cluster '
            "GROUP BY topic, partition"
        ),
        {"cluster": cluster},
    )
    return {(topic, partition): int(offset) for topic, partition, offset in rows}


def latest_committed(
    conn: Connection, cluster: str
) -> dict[tuple[str, str, int], tuple[int, datetime | None]]:
    """(group, topic, partition) -> (committed offset, when a commit was last observed), from the
    latest group offsets and commits: what the collector needs to observe commits after a
    restart."""
    rows = conn.execute(
        text(
            "SELECT l.group_id, l.topic, l.partition, l.committed_offset, c.observed_at "
            "FROM latest_group_offsets l LEFT JOIN latest_commits c ON c.cluster = l.cluster "
            "AND c.group_id = l.group_id AND c.topic = l.topic AND c.partition = l.partition "
            "WHERE l.cluster = :cluster"
        ),
        {"cluster": cluster},
    )
    return {
        (group, topic, partition): (offset, observed) for group, topic, partition, offset, observed in rows
    }


def latest_end_offsets(
    conn: Connection, cluster: str, partitions: Collection[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int, datetime]]:
    """(topic, partition) -> (start offset, end offset, when that end offset was listed) from the
    latest partition offsets: the last end offset known for a partition whose leader cannot give
    one now, after a restart. Partitions without a sample are absent. One query."""
    if not partitions:
        return {}
    topics, numbers = zip(*partitions, strict=True)
    rows = conn.execute(
        text(
            "SELECT o.topic, o.partition, o.start_offset, o.end_offset, "
            "coalesce(o.end_offset_listed_at, o.sampled_at) "
            "FROM unnest(CAST(:topics AS text[]), CAST(:partitions AS integer[])) AS k(topic, partition) "
            "JOIN latest_partition_offsets AS o ON o.cluster = :cluster AND o.topic = k.topic "
            "AND o.partition = k.partition"
        ),
        {"cluster": cluster, "topics": list(topics), "partitions": list(numbers)},
    )
    return {(topic, partition): (start, end, at) for topic, partition, start, end, at in rows}


def prune_record_timestamps(conn: Connection, cluster: str, older_than: datetime) -> int:
    """Delete the cache entries of `cluster` fetched before `older_than`; return how many went.

    An entry still needed is read again from Kafka (or found gone, which the collector handles).
    """
    result = conn.execute(
        text("DELETE FROM record_timestamps WHERE cluster = :cluster AND fetched_at < :older_than"),
        {"cluster": cluster, "older_than": older_than},
    )
    return int(result.rowcount)
