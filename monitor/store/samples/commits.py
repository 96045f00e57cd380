"""The commits observed as they happen (the commits job): commit_observations and each
group-partition's newest commit in latest_commits, written together; and the lock every writer of
the latest group offset rows takes first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.records import CommitObservation
from monitor.store.partitions import ensure_days
from monitor.store.samples.staging import (
    DAY_MS,
    int_array,
    on_conflict,
    rowcount,
    text_array,
    to_datetime,
    tstz,
)


def write_commit_observations(
    conn: Connection, cluster: str, observations: Sequence[CommitObservation]
) -> int:
    """Commits observed as they happened (the commit stream, or the offsets job's sampled ones
    while the stream is not live): appended to commit_observations (a second commit of the same
    key in the same millisecond is one row), and each key's newest one kept in latest_commits,
    which readers take the freshest committed offset and the last commit time from. Returns the
    observation rows written. Touches no latest group offset row: this write never waits for the
    offsets job. Does not commit."""
    if not observations:
        return 0
    days = {to_datetime((o.observed_at_ms // DAY_MS) * DAY_MS).date() for o in observations}
    with conn.begin_nested():
        ensure_days(conn, {"commit_observations": days})
        written = insert_commits(conn, observations, {"cluster": cluster}, True)
        keep_newest_commits(conn, cluster, observations)
    return written


def keep_newest_commits(conn: Connection, cluster: str, observations: Sequence[CommitObservation]) -> None:
    """Each key's newest observation of `observations` into latest_commits, where it is not older
    than the one kept. Does not commit."""
    newest = sorted(newest_observations(observations).values(), key=_key)
    if newest:
        conn.execute(text(_UPSERT_LATEST_COMMITS), {"cluster": cluster, **_arrays(newest)})


def write_commit_mark(
    conn: Connection, cluster: str, streaming_since: datetime, read_until: datetime
) -> None:
    """The cluster's commit stream read to the end at `read_until`, every commit since
    `streaming_since` read (`commit_stream_marks`); never moves `read_until` back. Does not
    commit."""
    conn.execute(
        text(
            "INSERT INTO commit_stream_marks AS m (cluster, streaming_since, read_until) "
            "VALUES (:c, :since, :until) ON CONFLICT (cluster) DO UPDATE SET "
            "streaming_since = excluded.streaming_since, read_until = excluded.read_until "
            "WHERE m.read_until <= excluded.read_until"
        ),
        {"c": cluster, "since": streaming_since, "until": read_until},
    )


LATEST_GROUPS_LOCK = 0x6B68_6C67  # pg_advisory_xact_lock(key, hashtext(cluster)) ("khlg")


def lock_latest_groups(conn: Connection, cluster: str) -> None:
    """Wait for, and hold until the transaction ends, the lock of the cluster's latest group
    offset rows. Every transaction that writes those rows takes it before its first row, so two
    never hold some rows each while waiting for the other's: the offsets job's batch moves every
    row of the cluster in several statements, each in a key order of its own. (The commits job
    wrote the commit times into those rows too, many times a second, and deadlocked with the
    batch before this lock; since migration 0039 the times are in `latest_commits` only.)"""
    conn.execute(
        text("SELECT pg_advisory_xact_lock(CAST(:k AS integer), hashtext(:c))"),
        {"k": LATEST_GROUPS_LOCK, "c": cluster},
    )


def _key(o: CommitObservation) -> tuple[str, str, int]:
    return (o.group_id, o.topic, o.partition)


def newest_observations(
    observations: Sequence[CommitObservation],
) -> dict[tuple[str, str, int], CommitObservation]:
    """(group, topic, partition) -> its newest observation of `observations` (of two at the same
    time, the later in the list: log order)."""
    newest: dict[tuple[str, str, int], CommitObservation] = {}
    for o in observations:
        held = newest.get(_key(o))
        if held is None or o.observed_at_ms >= held.observed_at_ms:
            newest[_key(o)] = o
    return newest


def _arrays(observations: Sequence[CommitObservation]) -> dict[str, str]:
    """The observations as the parallel arrays the statements unnest (array literals: see
    `staging.int_array`)."""
    return {
        "groups": text_array([o.group_id for o in observations]),
        "topics": text_array([o.topic for o in observations]),
        "partitions": int_array([o.partition for o in observations]),
        "committed": int_array([o.committed_offset for o in observations]),
        "previous": int_array([o.previous_offset for o in observations]),
        "observed": int_array([o.observed_at_ms for o in observations]),
    }


def insert_commits(
    conn: Connection, observations: Sequence[CommitObservation], params: dict[str, Any], idempotent: bool
) -> int:
    """Append commit observations, sent as arrays in one statement (in key order, as every
    writer of these rows does): the commit stream writes a few at a time, many times a minute,
    where a staging table would cost four statements a write."""
    if not observations:
        return 0
    arrays = _arrays(sorted(observations, key=lambda o: (_key(o), o.observed_at_ms)))
    return rowcount(conn, _INSERT_COMMITS + on_conflict(idempotent), {**params, **arrays})


_INSERT_COMMITS = f"""
INSERT INTO commit_observations (
    cluster, group_id, topic, partition, observed_at, committed_offset, previous_offset)
SELECT :cluster, s.group_id, s.topic, s.partition, {tstz("s.observed_ms")}, s.committed_offset,
       s.previous_offset
FROM unnest(CAST(:groups AS text[]), CAST(:topics AS text[]), CAST(:partitions AS integer[]),
            CAST(:committed AS bigint[]), CAST(:previous AS bigint[]), CAST(:observed AS bigint[]))
     AS s(group_id, topic, partition, committed_offset, previous_offset, observed_ms)"""

_UPSERT_LATEST_COMMITS = f"""
INSERT INTO latest_commits AS l (cluster, group_id, topic, partition, committed_offset, observed_at)
SELECT :cluster, s.group_id, s.topic, s.partition, s.committed_offset, {tstz("s.observed_ms")}
FROM unnest(CAST(:groups AS text[]), CAST(:topics AS text[]), CAST(:partitions AS integer[]),
            CAST(:committed AS bigint[]), CAST(:observed AS bigint[]))
     WITH ORDINALITY AS s(group_id, topic, partition, committed_offset, observed_ms, n)
ORDER BY s.n
ON CONFLICT (cluster, group_id, topic, partition) DO UPDATE SET
    committed_offset = excluded.committed_offset, observed_at = excluded.observed_at
WHERE l.observed_at <= excluded.observed_at"""
