"""The end offsets job's writes (`monitor.collect.jobs.end_offsets`): each partition's newest end
offset where it changed, and the cluster's listing time, in one transaction, so that a reader
never sees a listing's time with the offsets of the one before (`monitor.store.fresh_lag` reads
them).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, text

from monitor.core.records import EndOffsetRefresh, TopicPartition
from monitor.store.samples.staging import int_array, rowcount, text_array, tstz


def write_end_offset_refresh(conn: Connection, cluster: str, refresh: EndOffsetRefresh) -> int:
    """Write one listing of the cluster's end offsets (`EndOffsetRefresh`): the changed rows (in
    key order, as every writer of these rows), the missed ones marked, the gone ones deleted
    (every row of the cluster for the first listing of a run), and the listing's time. Never
    moves a row or the time back (a replay after a lost answer). Returns the partition rows
    written. Does not commit."""
    listed = {"cluster": cluster, "listed_ms": refresh.listed_at_ms}
    written = 0
    with conn.begin_nested():
        if refresh.replace:
            conn.execute(text("DELETE FROM refreshed_end_offsets WHERE cluster = :cluster"), listed)
        elif refresh.gone:
            conn.execute(text(_DELETE_GONE), {**listed, **_keys(sorted(refresh.gone))})
        if refresh.changed:
            changed = sorted(refresh.changed.items())
            offsets = {**_keys(k for k, _ in changed), "ends": int_array(v for _, v in changed)}
            written += rowcount(conn, _UPSERT_CHANGED, {**listed, **offsets})
        if refresh.missed:
            missed = sorted(refresh.missed.items())
            answered = {**_keys(k for k, _ in missed), "answered": int_array(v for _, v in missed)}
            written += rowcount(conn, _MARK_MISSED, {**listed, **answered})
        conn.execute(
            text(_UPSERT_LISTING),
            {**listed, "partitions": refresh.partitions, "missed": len(refresh.missed)},
        )
    return written


def _keys(keys: Iterable[TopicPartition]) -> dict[str, str]:
    keys = list(keys)
    return {"topics": text_array(t for t, _ in keys), "partitions": int_array(p for _, p in keys)}


_DELETE_GONE = """
DELETE FROM refreshed_end_offsets r
USING unnest(CAST(:topics AS text[]), CAST(:partitions AS integer[])) AS g(topic, partition)
WHERE r.cluster = :cluster AND r.topic = g.topic AND r.partition = g.partition"""

_UPSERT_CHANGED = f"""
INSERT INTO refreshed_end_offsets AS r (cluster, topic, partition, end_offset, answered_at, missed)
SELECT :cluster, s.topic, s.partition, s.end_offset, {tstz(":listed_ms")}, false
FROM unnest(CAST(:topics AS text[]), CAST(:partitions AS integer[]), CAST(:ends AS bigint[]))
     AS s(topic, partition, end_offset)
ON CONFLICT (cluster, topic, partition) DO UPDATE SET
    end_offset = excluded.end_offset, answered_at = excluded.answered_at, missed = false
WHERE r.answered_at <= excluded.answered_at"""

_MARK_MISSED = f"""
UPDATE refreshed_end_offsets AS r SET missed = true, answered_at = {tstz("s.answered_ms")}
FROM unnest(CAST(:topics AS text[]), CAST(:partitions AS integer[]), CAST(:answered AS bigint[]))
     AS s(topic, partition, answered_ms)
WHERE r.cluster = :cluster AND r.topic = s.topic AND r.partition = s.partition
  AND r.answered_at <= {tstz("s.answered_ms")}"""

_UPSERT_LISTING = f"""
INSERT INTO end_offset_refreshes AS l (cluster, listed_at, partitions, missed)
VALUES (:cluster, {tstz(":listed_ms")}, :partitions, :missed)
ON CONFLICT (cluster) DO UPDATE SET
    listed_at = excluded.listed_at, partitions = excluded.partitions, missed = excluded.missed
WHERE l.listed_at <= excluded.listed_at"""
