"""The offsets cycle of a cluster: partition_offsets, group_offsets, group_states,
commit_observations, group members, record_timestamps and data_loss_events, with the
latest_partition_offsets and latest_group_offsets they keep current (the commits observed as they
happen are `monitor.store.samples.commits`).

One cycle arrives as an `OffsetsBatch` (tens of thousands of rows every 15 s): each kind of record
goes over the wire once, through its staging table (`monitor.store.samples.staging`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.records import (
    CarriedGroupOffsets,
    DataLossEvent,
    GoneOffsets,
    GroupOffsetSample,
    OffsetsBatch,
    OffsetsHistory,
    RecordTimestamp,
)
from monitor.store.ingest import copy_rows
from monitor.store.partitions import day_of, ensure_days
from monitor.store.samples.commits import insert_commits, keep_newest_commits, lock_latest_groups
from monitor.store.samples.staging import (
    DAY_MS,
    Stage,
    insert_staged,
    on_conflict,
    rowcount,
    staged,
    to_datetime,
    tstz,
)

_PARTITIONS = Stage(
    "stage_partition_samples",
    "topic text, partition integer, start_offset bigint, end_offset bigint, "
    "max_timestamp_offset bigint, max_timestamp_ms bigint, start_ms bigint, latest_ms bigint, "
    "timestamp_type text, end_offset_method text, end_offset_listed_ms bigint",
)
_GROUP_OFFSETS = Stage(
    "stage_group_offsets",
    "group_id text, topic text, partition integer, committed_offset bigint, leader_epoch integer, "
    "end_offset bigint, start_offset bigint, lag bigint, lag_clamped boolean, committed_ms bigint, "
    "consumed_ms bigint, timestamp_method text, timestamp_error_ms bigint",
)
_GROUPS = Stage(
    "stage_group_states",
    "group_id text, state text, protocol_type text, protocol text, members integer, "
    "coordinator integer, is_simple boolean",
)
_MEMBERS = Stage(
    "stage_group_members",
    "group_id text, member_id text, client_id text, host text, group_instance_id text, assignment text[]",
)
_RECORDS = Stage(
    "stage_record_timestamps",
    "topic text, partition integer, at_offset bigint, record_offset bigint, timestamp_ms bigint, "
    "timestamp_type text",
)
_LOSSES = Stage(
    "stage_data_loss",
    "group_id text, topic text, partition integer, committed_offset bigint, start_offset bigint, "
    "messages_lost bigint, detected_ms bigint",
)


def write_offsets_batch(conn: Connection, batch: OffsetsBatch, *, idempotent: bool = False) -> dict[str, int]:
    """Write one offsets cycle; return the number of rows written (inserted or updated) per table.

    - appends to partition_offsets, group_offsets and group_states;
    - upserts latest_partition_offsets and latest_group_offsets (a batch with `history_after`
      leaves its group_offsets rows to `write_offsets_history`);
    - writes the batch's commit observations as `write_commit_observations` does, with
      latest_commits (the daemon's offsets job leaves them empty: it hands its observations to
      the commits job's writer, the one writer of those rows);
    - marks the latest group offsets the cluster no longer has (`batch.gone`: `gone_at`);
    - replaces the members of the batch's groups;
    - adds the record timestamps and data loss events not recorded yet.

    `idempotent` makes a replay of a batch already written a no-op instead of a duplicate-key
    error. Runs in a savepoint: a refused batch leaves the caller's transaction usable. Does not
    commit.
    """
    params = {"cluster": batch.cluster, "at": batch.sampled_at, "run_id": batch.run_id}
    day = day_of(batch.sampled_at)
    observed = {o.observed_at_ms // DAY_MS for o in batch.commit_observations}
    wanted = {
        "partition_offsets": {day} if batch.partitions else set(),
        "group_offsets": {day} if batch.group_offsets else set(),
        "group_states": {day} if batch.groups else set(),
        "commit_observations": {to_datetime(days * DAY_MS).date() for days in observed},
    }
    counts: dict[str, int] = {}
    with conn.begin_nested():
        lock_latest_groups(conn, batch.cluster)
        ensure_days(conn, wanted)
        counts.update(_write_partitions(conn, batch, params, idempotent))
        counts.update(_write_group_offsets(conn, batch, params, idempotent))
        counts["group_offsets_gone"] = _mark_gone(conn, batch.gone, params)
        counts["commit_observations"] = insert_commits(conn, batch.commit_observations, params, idempotent)
        keep_newest_commits(conn, batch.cluster, batch.commit_observations)
        counts.update(_write_groups(conn, batch, params, idempotent))
        counts["record_timestamps"] = insert_staged(
            conn, _RECORDS, [_record_row(r) for r in batch.record_timestamps], _INSERT_RECORDS, params
        )
        counts["data_loss_events"] = insert_staged(
            conn, _LOSSES, [_loss_row(e) for e in batch.data_loss], _INSERT_LOSSES, params
        )
    return counts


def write_offsets_history(conn: Connection, history: OffsetsHistory, *, idempotent: bool = False) -> int:
    """The history rows (group_offsets) of a batch written with `history_after`, copied from the
    latest group offset rows still sampled at its time; returns how many. A latest row a later
    batch has already moved on is not copied (the writer keeps batches in order, and the
    offsets job writes this before its next batch, so that only happens when another writer
    replaced the row). `idempotent` makes a replay a no-op. Does not commit."""
    params = {"cluster": history.cluster, "at": history.sampled_at, "run_id": history.run_id}
    with conn.begin_nested():
        ensure_days(conn, {"group_offsets": {day_of(history.sampled_at)}})
        return rowcount(conn, _INSERT_HISTORY_FROM_LATEST + on_conflict(idempotent), params)


def _write_partitions(
    conn: Connection, batch: OffsetsBatch, params: dict[str, Any], idempotent: bool
) -> dict[str, int]:
    rows = [
        (
            s.offsets.topic,
            s.offsets.partition,
            s.offsets.start,
            s.offsets.end,
            s.offsets.max_timestamp_offset,
            s.offsets.max_timestamp_ms,
            s.start_timestamp_ms,
            s.latest_timestamp_ms,
            s.timestamp_type,
            s.end_offset_method,
            s.end_offset_listed_at_ms,
        )
        for s in batch.partitions
    ]
    return _sample_and_latest(
        conn, "partition_offsets", _PARTITIONS, rows, (_INSERT_PARTITIONS, _UPSERT_LATEST_PARTITIONS),
        params, idempotent,
    )  # fmt: skip


def _mark_gone(conn: Connection, gone: GoneOffsets | None, params: dict[str, Any]) -> int:
    """Mark the latest rows of the committed offsets the cluster no longer has (`gone_at`), those
    not sampled by this batch; returns how many. A row sampled again later is not gone any more
    (the upsert clears it)."""
    if gone is None:
        return 0
    marked = 0
    if gone.keys:
        keys = {
            **params,
            "groups": [g for g, _, _ in gone.keys],
            "topics": [t for _, t, _ in gone.keys],
            "partitions": [p for _, _, p in gone.keys],
        }
        marked += rowcount(conn, _MARK_GONE_KEYS, keys)
    if gone.listed_groups is not None:
        marked += rowcount(conn, _MARK_GONE_UNLISTED, {**params, "listed": gone.listed_groups})
    return marked


def _write_group_offsets(
    conn: Connection, batch: OffsetsBatch, params: dict[str, Any], idempotent: bool
) -> dict[str, int]:
    """Group offsets, and the latest group offsets; in `group_offsets_carried`, how many group
    offset rows were copied in the store from the previous batch's rather than sent.

    A batch that carries its unmoved rows (`batch.carried`) sends only the moved ones; the others
    are copied from the latest rows the previous batch wrote. Should the store not hold exactly
    those rows (another writer replaced some), or on a replay, every sample is sent instead.
    """
    if not batch.group_offsets:
        return {"group_offsets": 0, "latest_group_offsets": 0, "group_offsets_carried": 0}
    if batch.history_after:
        with staged(conn, _GROUP_OFFSETS, _group_rows(batch.group_offsets)):
            latest = rowcount(conn, _UPSERT_LATEST_GROUP_OFFSETS, params)
        return {"group_offsets": 0, "latest_group_offsets": latest, "group_offsets_carried": 0}
    carried = None if idempotent else batch.carried
    if carried is not None:
        try:
            with conn.begin_nested():
                return _carry_group_offsets(conn, batch, carried, params)
        except _CarryMismatch:
            pass  # the savepoint is rolled back: send every sample
    counts = _sample_and_latest(
        conn, "group_offsets", _GROUP_OFFSETS, _group_rows(batch.group_offsets),
        (_INSERT_GROUP_OFFSETS, _UPSERT_LATEST_GROUP_OFFSETS), params, idempotent,
    )  # fmt: skip
    return {**counts, "group_offsets_carried": 0}


class _CarryMismatch(Exception):
    """The latest rows of the previous batch are not the ones the batch expects to carry."""


def _carry_group_offsets(
    conn: Connection,
    batch: OffsetsBatch,
    carried: CarriedGroupOffsets,
    params: dict[str, Any],
) -> dict[str, int]:
    """The moved samples from the wire; the rest copied in the store from the latest rows sampled
    at `carried.since` (new history rows, and the latest rows moved to this sample time)."""
    expected = len(batch.group_offsets) - len(carried.moved)
    gone = carried.gone
    carry = {
        **params,
        "since": carried.since,
        "gone_groups": [g for g, _, _ in gone],
        "gone_topics": [t for _, t, _ in gone],
        "gone_partitions": [p for _, _, p in gone],
    }
    # Created even when nothing moved: the carrying statements leave out the keys staged here.
    conn.execute(
        text(f"CREATE TEMPORARY TABLE {_GROUP_OFFSETS.name} ({_GROUP_OFFSETS.columns}) ON COMMIT DROP")
    )
    copy_rows(conn, _GROUP_OFFSETS.name, _GROUP_OFFSETS.names, _group_rows(carried.moved))
    conn.execute(text(f"ANALYZE {_GROUP_OFFSETS.name}"))
    # Hash anti-joins, never nested loops: the planner can take the staged or gone keys for a
    # handful and scan them once per latest row (10^5 x 10^4 comparisons, minutes).
    conn.execute(text("SET LOCAL enable_nestloop = off"))
    # One statement moves the unmoved latest rows to this sample time and copies them into the
    # history: one scan and one anti-join of the latest rows, not two.
    copied = rowcount(conn, _CARRY_GROUP_OFFSETS, carry)
    if copied != expected:
        raise _CarryMismatch(f"{copied} rows to carry, {expected} expected")
    conn.execute(text("SET LOCAL enable_nestloop TO DEFAULT"))
    counts = {
        "group_offsets": copied + rowcount(conn, _INSERT_GROUP_OFFSETS, params),
        "latest_group_offsets": copied + rowcount(conn, _UPSERT_LATEST_GROUP_OFFSETS, params),
        "group_offsets_carried": copied,
    }
    conn.execute(text(f"DROP TABLE pg_temp.{_GROUP_OFFSETS.name}"))
    return counts


def _group_rows(samples: Sequence[GroupOffsetSample]) -> Iterator[tuple[Any, ...]]:
    """The staging rows of `samples`, made as the COPY sends them (`copy_rows`)."""
    return (
        (
            s.committed.group_id,
            s.committed.topic,
            s.committed.partition,
            s.committed.offset,
            s.committed.leader_epoch,
            s.end_offset,
            s.start_offset,
            s.lag,
            s.lag_clamped,
            s.committed_timestamp_ms,
            s.consumed_timestamp_ms,
            s.timestamp_method,
            s.timestamp_error_ms,
        )
        for s in samples
    )


def _sample_and_latest(
    conn: Connection,
    table: str,
    stage: Stage,
    rows: Iterable[Sequence[Any]],
    statements: tuple[str, str],
    params: dict[str, Any],
    idempotent: bool,
) -> dict[str, int]:
    """`rows` staged once, appended to the sample table `table` and upserted into `latest_<table>`
    (`statements`: the append, then the upsert); rows written per table. The caller of an
    iterator of rows has checked that there are some."""
    if isinstance(rows, Sequence) and not rows:
        return {table: 0, f"latest_{table}": 0}
    append, upsert = statements
    with staged(conn, stage, rows):
        return {
            table: rowcount(conn, append + on_conflict(idempotent), params),
            f"latest_{table}": rowcount(conn, upsert, params),
        }


def _write_groups(
    conn: Connection, batch: OffsetsBatch, params: dict[str, Any], idempotent: bool
) -> dict[str, int]:
    """Group states (appended) and group members (replaced, unless newer members are stored)."""
    if not batch.groups:
        return {"group_states": 0, "group_members": 0}
    groups = [
        (g.group_id, g.state, g.protocol_type, g.protocol, len(g.members), g.coordinator, g.is_simple)
        for g in batch.groups
    ]
    members = [
        (
            g.group_id,
            m.member_id,
            m.client_id,
            m.host,
            m.group_instance_id,
            [f"{topic}:{partition}" for topic, partition in m.assignment],
        )
        for g in batch.groups
        for m in g.members
    ]
    counts = {
        "group_states": insert_staged(
            conn, _GROUPS, groups, _INSERT_GROUP_STATES + on_conflict(idempotent), params
        )
    }
    conn.execute(text(_DELETE_MEMBERS), {**params, "groups": [g.group_id for g in batch.groups]})
    counts["group_members"] = insert_staged(conn, _MEMBERS, members, _INSERT_MEMBERS, params)
    return counts


def _record_row(r: RecordTimestamp) -> tuple[Any, ...]:
    return (r.topic, r.partition, r.offset, r.record_offset, r.timestamp_ms, r.timestamp_type)


def _loss_row(e: DataLossEvent) -> tuple[Any, ...]:
    return (
        e.group_id,
        e.topic,
        e.partition,
        e.committed_offset,
        e.start_offset,
        e.messages_lost,
        e.detected_at_ms,
    )


_PARTITION_VALUES = """
    start_offset, end_offset, max_timestamp_offset, max_timestamp, start_timestamp, latest_timestamp,
    timestamp_type, end_offset_method, end_offset_listed_at"""
_PARTITION_SELECT = f"""
    SELECT :cluster, topic, partition, :at, start_offset, end_offset, max_timestamp_offset,
           {tstz("max_timestamp_ms")}, {tstz("start_ms")}, {tstz("latest_ms")}, timestamp_type,
           end_offset_method, {tstz("end_offset_listed_ms")}"""

_INSERT_PARTITIONS = f"""
INSERT INTO partition_offsets (cluster, topic, partition, sampled_at, {_PARTITION_VALUES}, run_id)
{_PARTITION_SELECT}, :run_id FROM stage_partition_samples"""

_UPSERT_LATEST_PARTITIONS = f"""
INSERT INTO latest_partition_offsets AS l (cluster, topic, partition, sampled_at, {_PARTITION_VALUES})
{_PARTITION_SELECT} FROM stage_partition_samples
ON CONFLICT (cluster, topic, partition) DO UPDATE SET
    sampled_at = excluded.sampled_at, start_offset = excluded.start_offset,
    end_offset = excluded.end_offset, max_timestamp_offset = excluded.max_timestamp_offset,
    max_timestamp = excluded.max_timestamp, start_timestamp = excluded.start_timestamp,
    latest_timestamp = excluded.latest_timestamp, timestamp_type = excluded.timestamp_type,
    end_offset_method = excluded.end_offset_method, end_offset_listed_at = excluded.end_offset_listed_at
WHERE l.sampled_at <= excluded.sampled_at"""

_GROUP_VALUES = """
    committed_offset, leader_epoch, end_offset, start_offset, lag, lag_clamped, committed_timestamp,
    consumed_timestamp, timestamp_method, timestamp_error_ms"""
_GROUP_SELECT = f"""
    SELECT :cluster, s.group_id, s.topic, s.partition, :at, s.committed_offset, s.leader_epoch,
           s.end_offset, s.start_offset, s.lag, s.lag_clamped, {tstz("s.committed_ms")},
           {tstz("s.consumed_ms")}, s.timestamp_method, s.timestamp_error_ms"""

_INSERT_GROUP_OFFSETS = f"""
INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES}, run_id)
{_GROUP_SELECT}, :run_id FROM stage_group_offsets AS s"""

_UPSERT_LATEST_GROUP_OFFSETS = f"""
INSERT INTO latest_group_offsets AS l (
    cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES})
{_GROUP_SELECT}
FROM stage_group_offsets AS s
ON CONFLICT (cluster, group_id, topic, partition) DO UPDATE SET
    sampled_at = excluded.sampled_at, committed_offset = excluded.committed_offset,
    leader_epoch = excluded.leader_epoch, end_offset = excluded.end_offset,
    start_offset = excluded.start_offset, lag = excluded.lag, lag_clamped = excluded.lag_clamped,
    committed_timestamp = excluded.committed_timestamp,
    consumed_timestamp = excluded.consumed_timestamp,
    timestamp_method = excluded.timestamp_method, timestamp_error_ms = excluded.timestamp_error_ms,
    gone_at = NULL
WHERE l.sampled_at <= excluded.sampled_at"""

_MARK_GONE_KEYS = """
UPDATE latest_group_offsets AS l SET gone_at = :at
FROM unnest(CAST(:groups AS text[]), CAST(:topics AS text[]), CAST(:partitions AS integer[]))
     AS g(group_id, topic, partition)
WHERE l.cluster = :cluster AND l.group_id = g.group_id AND l.topic = g.topic
  AND l.partition = g.partition AND l.gone_at IS NULL AND l.sampled_at < :at"""

_MARK_GONE_UNLISTED = """
UPDATE latest_group_offsets AS l SET gone_at = :at
WHERE l.cluster = :cluster AND l.gone_at IS NULL AND l.sampled_at < :at
  AND NOT EXISTS (
    SELECT 1 FROM unnest(CAST(:listed AS text[])) AS g(group_id) WHERE g.group_id = l.group_id)"""

# The rows of the previous batch (latest, sampled at :since) that neither moved (staged) nor went.
_UNMOVED = """
WHERE l.cluster = :cluster AND l.sampled_at = :since
  AND NOT EXISTS (
    SELECT 1 FROM stage_group_offsets AS s
    WHERE s.group_id = l.group_id AND s.topic = l.topic AND s.partition = l.partition)
  AND NOT EXISTS (
    SELECT 1 FROM unnest(CAST(:gone_groups AS text[]), CAST(:gone_topics AS text[]),
                         CAST(:gone_partitions AS integer[])) AS g(group_id, topic, partition)
    WHERE g.group_id = l.group_id AND g.topic = l.topic AND g.partition = l.partition)"""

_CARRY_GROUP_OFFSETS = f"""
WITH carried AS (
    UPDATE latest_group_offsets AS l SET sampled_at = :at{_UNMOVED}
    RETURNING l.*)
INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES}, run_id)
SELECT c.cluster, c.group_id, c.topic, c.partition, :at, c.committed_offset, c.leader_epoch,
       c.end_offset, c.start_offset, c.lag, c.lag_clamped, c.committed_timestamp, c.consumed_timestamp,
       c.timestamp_method, c.timestamp_error_ms, :run_id
FROM carried AS c"""

_INSERT_HISTORY_FROM_LATEST = f"""
INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES}, run_id)
SELECT l.cluster, l.group_id, l.topic, l.partition, l.sampled_at, l.committed_offset, l.leader_epoch,
       l.end_offset, l.start_offset, l.lag, l.lag_clamped, l.committed_timestamp, l.consumed_timestamp,
       l.timestamp_method, l.timestamp_error_ms, :run_id
FROM latest_group_offsets AS l
WHERE l.cluster = :cluster AND l.sampled_at = :at"""

_INSERT_GROUP_STATES = """
INSERT INTO group_states (
    cluster, group_id, sampled_at, state, protocol_type, protocol, members, coordinator, is_simple, run_id)
SELECT :cluster, group_id, :at, state, protocol_type, protocol, members, coordinator, is_simple, :run_id
FROM stage_group_states"""

# Members stored by a newer sample (another instance, after a failover) are left alone.
_DELETE_MEMBERS = """
DELETE FROM group_members
WHERE cluster = :cluster AND group_id = ANY(CAST(:groups AS text[])) AND updated_at <= :at"""

_INSERT_MEMBERS = """
INSERT INTO group_members (cluster, group_id, member_id, client_id, host, group_instance_id, assignment,
                           updated_at)
SELECT :cluster, s.group_id, s.member_id, s.client_id, s.host, s.group_instance_id, s.assignment, :at
FROM stage_group_members AS s
WHERE NOT EXISTS (
    SELECT 1 FROM group_members AS m
    WHERE m.cluster = :cluster AND m.group_id = s.group_id AND m.updated_at > :at)
ON CONFLICT DO NOTHING"""

_INSERT_RECORDS = f"""
INSERT INTO record_timestamps (
    cluster, topic, partition, "offset", record_offset, "timestamp", timestamp_type, fetched_at)
SELECT :cluster, topic, partition, at_offset, record_offset, {tstz("timestamp_ms")}, timestamp_type, :at
FROM stage_record_timestamps
ON CONFLICT DO NOTHING"""

_INSERT_LOSSES = f"""
INSERT INTO data_loss_events (
    cluster, group_id, topic, partition, committed_offset, start_offset, messages_lost, detected_at)
SELECT :cluster, group_id, topic, partition, committed_offset, start_offset, messages_lost,
       {tstz("detected_ms")}
FROM stage_data_loss
ON CONFLICT DO NOTHING"""
