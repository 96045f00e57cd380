"""Writes of the collect stage's samples, and the reads the offsets collector needs.

One offsets cycle of a cluster arrives as an `OffsetsBatch` (tens of thousands of rows every
15 s). `write_offsets_batch` sends each kind of record over the wire once, by COPY into a
temporary staging table dropped at the end of the write; set-based statements then fill the
sample table and upsert the latest table from it. Millisecond times stay integers on the wire and
become ``timestamptz`` in PostgreSQL.

Replays: a write queued during an outage may already have been committed by an attempt whose
answer was lost, so `idempotent=True` turns every append into ``INSERT ... ON CONFLICT DO
NOTHING``. Latest rows are only ever replaced by a sample at least as new as theirs, so a replay
of an older batch cannot move them back.

Every function takes a connection inside the caller's transaction and never commits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.records import (
    CarriedGroupOffsets,
    CommitObservation,
    DataLossEvent,
    GroupOffsetSample,
    LogDirReplica,
    LogDirUsage,
    OffsetsBatch,
    ProbeResult,
    RecordTimestamp,
    TopicConfigEntry,
)
from monitor.store.ingest import copy_rows
from monitor.store.partitions import create_day_partitions, day_of, partition_name

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_DAY_MS = 86_400_000

RecordKey = tuple[str, int, int]
"""(topic, partition, offset) of a record."""


def to_datetime(ms: int) -> datetime:
    """An epoch-milliseconds time as an aware UTC datetime (exact: no float on the way)."""
    return _EPOCH + ms * _MS


def to_ms(value: datetime) -> int:
    """An aware datetime as epoch milliseconds (exact: no float on the way)."""
    return (value - _EPOCH) // _MS


# ---------------------------------------------------------------------------------------------
# Staging


def _ts(column: str) -> str:
    """SQL turning an epoch-milliseconds column into timestamptz (NULL stays NULL)."""
    return f"(TIMESTAMPTZ 'epoch' + {column} * INTERVAL '1 millisecond')"


@dataclass(frozen=True)
class _Stage:
    """A temporary table holding one kind of record of a batch, as sent by COPY.

    `columns` is the column list of its CREATE TABLE: "name type, name type ...".
    """

    name: str
    columns: str

    @property
    def names(self) -> list[str]:
        return [column.split()[0] for column in self.columns.split(",")]


_PARTITIONS = _Stage(
    "stage_partition_samples",
    "topic text, partition integer, start_offset bigint, end_offset bigint, "
    "max_timestamp_offset bigint, max_timestamp_ms bigint, start_ms bigint, latest_ms bigint, "
    "timestamp_type text, end_offset_method text, end_offset_listed_ms bigint",
)
_GROUP_OFFSETS = _Stage(
    "stage_group_offsets",
    "group_id text, topic text, partition integer, committed_offset bigint, leader_epoch integer, "
    "end_offset bigint, start_offset bigint, lag bigint, lag_clamped boolean, committed_ms bigint, "
    "consumed_ms bigint, timestamp_method text, timestamp_error_ms bigint, observed_ms bigint",
)
_COMMITS = _Stage(
    "stage_commit_observations",
    "group_id text, topic text, partition integer, committed_offset bigint, previous_offset bigint, "
    "observed_ms bigint",
)
_GROUPS = _Stage(
    "stage_group_states",
    "group_id text, state text, protocol_type text, protocol text, members integer, "
    "coordinator integer, is_simple boolean",
)
_MEMBERS = _Stage(
    "stage_group_members",
    "group_id text, member_id text, client_id text, host text, group_instance_id text, assignment text[]",
)
_RECORDS = _Stage(
    "stage_record_timestamps",
    "topic text, partition integer, at_offset bigint, record_offset bigint, timestamp_ms bigint, "
    "timestamp_type text",
)
_LOSSES = _Stage(
    "stage_data_loss",
    "group_id text, topic text, partition integer, committed_offset bigint, start_offset bigint, "
    "messages_lost bigint, detected_ms bigint",
)


@contextmanager
def _staged(conn: Connection, stage: _Stage, rows: Sequence[Sequence[Any]]) -> Iterator[None]:
    """`rows` in the temporary table `stage.name` for the duration of the block.

    ON COMMIT DROP is the safety net; the table is dropped at the end of the block so that two
    writes in one transaction do not meet.
    """
    conn.execute(text(f"CREATE TEMPORARY TABLE {stage.name} ({stage.columns}) ON COMMIT DROP"))
    copy_rows(conn, stage.name, stage.names, rows)
    yield
    conn.execute(text(f"DROP TABLE pg_temp.{stage.name}"))


def _ensure_days(conn: Connection, wanted: dict[str, set[date]]) -> None:
    """Create the day partitions `wanted` ({table: days}) that do not exist yet.

    One catalog lookup when they all exist (the usual case); the partition lock is only taken
    when one is missing, so concurrent writers of other clusters are not serialised.
    """
    names = {partition_name(table, day): (table, day) for table, days in wanted.items() for day in days}
    if not names:
        return
    missing = conn.execute(
        text("SELECT n FROM unnest(CAST(:names AS text[])) AS n WHERE to_regclass(quote_ident(n)) IS NULL"),
        {"names": sorted(names)},
    ).scalars()
    by_table: dict[str, set[date]] = defaultdict(set)
    for name in missing:
        table, day = names[name]
        by_table[table].add(day)
    for table, days in sorted(by_table.items()):
        create_day_partitions(conn, table, days)


def _conflict(idempotent: bool) -> str:
    return " ON CONFLICT DO NOTHING" if idempotent else ""


# ---------------------------------------------------------------------------------------------
# The offsets batch


def write_offsets_batch(conn: Connection, batch: OffsetsBatch, *, idempotent: bool = False) -> dict[str, int]:
    """Write one offsets cycle; return the number of rows written (inserted or updated) per table,
    and in `group_offsets_carried` how many group offset rows were copied in the store from the
    previous batch's rather than sent (`batch.carried`).

    - appends to partition_offsets, group_offsets, group_states and commit_observations;
    - upserts latest_partition_offsets and latest_group_offsets: a latest group row takes
      last_commit_observed_at from this batch's commit observation of its key and keeps the one
      it had otherwise (an observation of a key without a group offset here is only appended);
    - replaces the members of the batch's groups;
    - adds the record timestamps and data loss events not recorded yet.

    `idempotent` makes a replay of a batch already written a no-op instead of a duplicate-key
    error. Runs in a savepoint: a refused batch leaves the caller's transaction usable. Does not
    commit.
    """
    params = {"cluster": batch.cluster, "at": batch.sampled_at, "run_id": batch.run_id}
    day = day_of(batch.sampled_at)
    observed = {o.observed_at_ms // _DAY_MS for o in batch.commit_observations}
    wanted = {
        "partition_offsets": {day} if batch.partitions else set(),
        "group_offsets": {day} if batch.group_offsets else set(),
        "group_states": {day} if batch.groups else set(),
        "commit_observations": {to_datetime(days * _DAY_MS).date() for days in observed},
    }
    counts: dict[str, int] = {}
    with conn.begin_nested():
        _ensure_days(conn, wanted)
        counts.update(_write_partitions(conn, batch, params, idempotent))
        counts.update(_write_group_offsets(conn, batch, params, idempotent))
        counts["commit_observations"] = _insert_staged(
            conn,
            _COMMITS,
            [_commit_row(o) for o in batch.commit_observations],
            _INSERT_COMMITS + _conflict(idempotent),
            params,
        )
        counts.update(_write_groups(conn, batch, params, idempotent))
        counts["record_timestamps"] = _insert_staged(
            conn, _RECORDS, [_record_row(r) for r in batch.record_timestamps], _INSERT_RECORDS, params
        )
        counts["data_loss_events"] = _insert_staged(
            conn, _LOSSES, [_loss_row(e) for e in batch.data_loss], _INSERT_LOSSES, params
        )
    return counts


def write_commit_observations(
    conn: Connection, cluster: str, observations: Sequence[CommitObservation]
) -> int:
    """Commits observed as they happened (the commit stream): appended to commit_observations
    (a second commit of the same key in the same millisecond is one row), and each key's newest
    commit time moved into its latest group offset row when that row exists (the offsets job
    writes the rest of the row). Returns the observation rows written. Does not commit."""
    if not observations:
        return 0
    days = {to_datetime((o.observed_at_ms // _DAY_MS) * _DAY_MS).date() for o in observations}
    newest: dict[tuple[str, str, int], int] = {}
    for o in observations:
        key = (o.group_id, o.topic, o.partition)
        newest[key] = max(o.observed_at_ms, newest.get(key, o.observed_at_ms))
    params = {"cluster": cluster}
    with conn.begin_nested():
        _ensure_days(conn, {"commit_observations": days})
        written = _insert_staged(
            conn, _COMMITS, [_commit_row(o) for o in observations], _INSERT_COMMITS + _conflict(True), params
        )
        rows = [(group, topic, partition, 0, None, at) for (group, topic, partition), at in newest.items()]
        _insert_staged(conn, _COMMITS, rows, _UPDATE_LAST_COMMIT, params)
    return written


def _insert_staged(
    conn: Connection, stage: _Stage, rows: Sequence[Sequence[Any]], statement: str, params: dict[str, Any]
) -> int:
    if not rows:
        return 0
    with _staged(conn, stage, rows):
        return _execute(conn, statement, params)


def _execute(conn: Connection, statement: str, params: dict[str, Any]) -> int:
    return int(conn.execute(text(statement), params).rowcount)


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
    if not rows:
        return {"partition_offsets": 0, "latest_partition_offsets": 0}
    with _staged(conn, _PARTITIONS, rows):
        return {
            "partition_offsets": _execute(conn, _INSERT_PARTITIONS + _conflict(idempotent), params),
            "latest_partition_offsets": _execute(conn, _UPSERT_LATEST_PARTITIONS, params),
        }


def _write_group_offsets(
    conn: Connection, batch: OffsetsBatch, params: dict[str, Any], idempotent: bool
) -> dict[str, int]:
    """Group offsets, and the latest group offsets with the batch's commit observation times.

    A batch that carries its unmoved rows (`batch.carried`) sends only the moved ones; the others
    are copied from the latest rows the previous batch wrote. Should the store not hold exactly
    those rows (another writer replaced some), or on a replay, every sample is sent instead.

    The observation time of each key is looked up here rather than joined in SQL: a join of two
    temporary tables without statistics is where the planner can go badly wrong.
    """
    if not batch.group_offsets:
        return {"group_offsets": 0, "latest_group_offsets": 0, "group_offsets_carried": 0}
    observed: dict[tuple[str, str, int], int] = {}
    for o in batch.commit_observations:
        key = (o.group_id, o.topic, o.partition)
        observed[key] = max(o.observed_at_ms, observed.get(key, o.observed_at_ms))
    carried = None if idempotent else batch.carried
    if carried is not None:
        try:
            with conn.begin_nested():
                return _carry_group_offsets(conn, batch, carried, observed, params)
        except _CarryMismatch:
            pass  # the savepoint is rolled back: send every sample
    with _staged(conn, _GROUP_OFFSETS, _group_rows(batch.group_offsets, observed)):
        return {
            "group_offsets": _execute(conn, _INSERT_GROUP_OFFSETS + _conflict(idempotent), params),
            "latest_group_offsets": _execute(conn, _UPSERT_LATEST_GROUP_OFFSETS, params),
            "group_offsets_carried": 0,
        }


class _CarryMismatch(Exception):
    """The latest rows of the previous batch are not the ones the batch expects to carry."""


def _carry_group_offsets(
    conn: Connection,
    batch: OffsetsBatch,
    carried: CarriedGroupOffsets,
    observed: dict[tuple[str, str, int], int],
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
    copy_rows(conn, _GROUP_OFFSETS.name, _GROUP_OFFSETS.names, _group_rows(carried.moved, observed))
    conn.execute(text(f"ANALYZE {_GROUP_OFFSETS.name}"))
    # Hash anti-joins, never nested loops: the planner can take the staged or gone keys for a
    # handful and scan them once per latest row (10^5 x 10^4 comparisons, minutes).
    conn.execute(text("SET LOCAL enable_nestloop = off"))
    copied = _execute(conn, _CARRY_GROUP_OFFSETS, carry)
    if copied != expected:
        raise _CarryMismatch(f"{copied} rows to carry, {expected} expected")
    touched = _execute(conn, _TOUCH_LATEST_GROUP_OFFSETS, carry)
    conn.execute(text("SET LOCAL enable_nestloop TO DEFAULT"))
    counts = {
        "group_offsets": copied + _execute(conn, _INSERT_GROUP_OFFSETS, params),
        "latest_group_offsets": touched + _execute(conn, _UPSERT_LATEST_GROUP_OFFSETS, params),
        "group_offsets_carried": copied,
    }
    conn.execute(text(f"DROP TABLE pg_temp.{_GROUP_OFFSETS.name}"))
    return counts


def _group_rows(
    samples: Sequence[GroupOffsetSample], observed: dict[tuple[str, str, int], int]
) -> list[tuple[Any, ...]]:
    return [
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
            observed.get((s.committed.group_id, s.committed.topic, s.committed.partition)),
        )
        for s in samples
    ]


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
        "group_states": _insert_staged(
            conn, _GROUPS, groups, _INSERT_GROUP_STATES + _conflict(idempotent), params
        )
    }
    conn.execute(text(_DELETE_MEMBERS), {**params, "groups": [g.group_id for g in batch.groups]})
    counts["group_members"] = _insert_staged(conn, _MEMBERS, members, _INSERT_MEMBERS, params)
    return counts


def _commit_row(o: CommitObservation) -> tuple[Any, ...]:
    return (o.group_id, o.topic, o.partition, o.committed_offset, o.previous_offset, o.observed_at_ms)


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
           {_ts("max_timestamp_ms")}, {_ts("start_ms")}, {_ts("latest_ms")}, timestamp_type,
           end_offset_method, {_ts("end_offset_listed_ms")}"""

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
           s.end_offset, s.start_offset, s.lag, s.lag_clamped, {_ts("s.committed_ms")},
           {_ts("s.consumed_ms")}, s.timestamp_method, s.timestamp_error_ms"""

_INSERT_GROUP_OFFSETS = f"""
INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES}, run_id)
{_GROUP_SELECT}, :run_id FROM stage_group_offsets AS s"""

_UPSERT_LATEST_GROUP_OFFSETS = f"""
INSERT INTO latest_group_offsets AS l (
    cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES}, last_commit_observed_at)
{_GROUP_SELECT}, {_ts("s.observed_ms")}
FROM stage_group_offsets AS s
ON CONFLICT (cluster, group_id, topic, partition) DO UPDATE SET
    sampled_at = excluded.sampled_at, committed_offset = excluded.committed_offset,
    leader_epoch = excluded.leader_epoch, end_offset = excluded.end_offset,
    start_offset = excluded.start_offset, lag = excluded.lag, lag_clamped = excluded.lag_clamped,
    committed_timestamp = excluded.committed_timestamp,
    consumed_timestamp = excluded.consumed_timestamp,
    timestamp_method = excluded.timestamp_method, timestamp_error_ms = excluded.timestamp_error_ms,
    last_commit_observed_at = coalesce(excluded.last_commit_observed_at, l.last_commit_observed_at)
WHERE l.sampled_at <= excluded.sampled_at"""

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
INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, {_GROUP_VALUES}, run_id)
SELECT l.cluster, l.group_id, l.topic, l.partition, :at, l.committed_offset, l.leader_epoch,
       l.end_offset, l.start_offset, l.lag, l.lag_clamped, l.committed_timestamp, l.consumed_timestamp,
       l.timestamp_method, l.timestamp_error_ms, :run_id
FROM latest_group_offsets AS l{_UNMOVED}"""

_TOUCH_LATEST_GROUP_OFFSETS = f"""
UPDATE latest_group_offsets AS l SET sampled_at = :at{_UNMOVED}"""

_INSERT_COMMITS = f"""
INSERT INTO commit_observations (
    cluster, group_id, topic, partition, observed_at, committed_offset, previous_offset)
SELECT :cluster, group_id, topic, partition, {_ts("observed_ms")}, committed_offset, previous_offset
FROM stage_commit_observations"""

_UPDATE_LAST_COMMIT = f"""
UPDATE latest_group_offsets AS l
SET last_commit_observed_at = {_ts("s.observed_ms")}
FROM stage_commit_observations AS s
WHERE l.cluster = :cluster AND l.group_id = s.group_id AND l.topic = s.topic AND l.partition = s.partition
  AND (l.last_commit_observed_at IS NULL OR l.last_commit_observed_at < {_ts("s.observed_ms")})"""

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
SELECT :cluster, topic, partition, at_offset, record_offset, {_ts("timestamp_ms")}, timestamp_type, :at
FROM stage_record_timestamps
ON CONFLICT DO NOTHING"""

_INSERT_LOSSES = f"""
INSERT INTO data_loss_events (
    cluster, group_id, topic, partition, committed_offset, start_offset, messages_lost, detected_at)
SELECT :cluster, group_id, topic, partition, committed_offset, start_offset, messages_lost,
       {_ts("detected_ms")}
FROM stage_data_loss
ON CONFLICT DO NOTHING"""


# ---------------------------------------------------------------------------------------------
# Log dirs


_LOG_DIR_COLUMNS = (
    "cluster",
    "broker_id",
    "log_dir",
    "topic",
    "partition",
    "sampled_at",
    "size_bytes",
    "offset_lag",
    "is_future",
    "run_id",
)
_DISK_COLUMNS = (
    "cluster",
    "broker_id",
    "log_dir",
    "sampled_at",
    "total_bytes",
    "usable_bytes",
    "error",
    "run_id",
)


def write_log_dirs(
    conn: Connection,
    cluster: str,
    sampled_at: datetime,
    run_id: int | None,
    replicas: Sequence[LogDirReplica],
    usages: Sequence[LogDirUsage],
    *,
    idempotent: bool = False,
) -> dict[str, int]:
    """Append one DescribeLogDirs sample: replica sizes to log_dir_sizes, volumes to broker_disks.

    Returns rows written per table; `idempotent` as for `write_offsets_batch`. Does not commit.
    """
    sizes = [
        (
            cluster,
            r.broker_id,
            r.log_dir,
            r.topic,
            r.partition,
            sampled_at,
            r.size_bytes,
            r.offset_lag,
            r.is_future,
            run_id,
        )
        for r in replicas
    ]
    disks = [
        (cluster, u.broker_id, u.log_dir, sampled_at, u.total_bytes, u.usable_bytes, u.error, run_id)
        for u in usages
    ]
    with conn.begin_nested():
        return {
            "log_dir_sizes": _append(conn, "log_dir_sizes", _LOG_DIR_COLUMNS, sizes, sampled_at, idempotent),
            "broker_disks": _append(conn, "broker_disks", _DISK_COLUMNS, disks, sampled_at, idempotent),
        }


# ---------------------------------------------------------------------------------------------
# End-to-end probe

_PROBE_COLUMNS = (
    "cluster",
    "topic",
    "partition",
    "sampled_at",
    "broker_id",
    "leader",
    "ok",
    "produce_seconds",
    "end_to_end_seconds",
    "commit_seconds",
    "error",
    "run_id",
)


def write_probe(
    conn: Connection,
    cluster: str,
    topic: str,
    sampled_at: datetime,
    run_id: int | None,
    results: Sequence[tuple[ProbeResult, int | None]],
    *,
    idempotent: bool = False,
) -> int:
    """Append one probe round: each (result, the partition's leader then) to probe_samples.
    Returns rows written; `idempotent` as for `write_offsets_batch`. Does not commit."""
    rows = [
        (
            cluster,
            topic,
            r.partition,
            sampled_at,
            r.broker_id,
            leader,
            r.ok,
            r.produce_seconds,
            r.end_to_end_seconds,
            r.commit_seconds,
            r.error,
            run_id,
        )
        for r, leader in results
    ]
    with conn.begin_nested():
        return _append(conn, "probe_samples", _PROBE_COLUMNS, rows, sampled_at, idempotent)


def _append(
    conn: Connection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    sampled_at: datetime,
    idempotent: bool,
) -> int:
    """COPY `rows` into the sample table `table`; when `idempotent`, through a staging table and
    ``INSERT ... ON CONFLICT DO NOTHING``, returning the rows actually inserted."""
    if not rows:
        return 0
    if not idempotent:
        return copy_rows(conn, table, columns, rows)
    _ensure_days(conn, {table: {day_of(sampled_at)}})
    stage = f"stage_{table}"
    names = ", ".join(columns)
    conn.execute(text(f"CREATE TEMPORARY TABLE {stage} (LIKE {table}) ON COMMIT DROP"))
    copy_rows(conn, stage, columns, rows)
    inserted = _execute(
        conn, f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage} ON CONFLICT DO NOTHING", {}
    )
    conn.execute(text(f"DROP TABLE pg_temp.{stage}"))
    return inserted


# ---------------------------------------------------------------------------------------------
# Topic configs: history rows only on change


def record_topic_configs(
    conn: Connection,
    cluster: str,
    entries: Sequence[TopicConfigEntry],
    described_topics: Collection[str],
    now: datetime,
) -> int:
    """Bring the open topic_configs rows of the described topics in line with `entries`.

    For each topic in `described_topics` (and each topic an entry names): an open row whose value,
    source or sensitivity changed, or whose key is no longer described, is closed (valid_to =
    `now`) and, for a changed key, a new open row starts at `now`; new keys get an open row;
    unchanged rows are left alone. Topics not described (their DescribeConfigs failed) are not
    touched. Returns the number of rows opened. Does not commit.
    """
    topics = set(described_topics) | {e.topic for e in entries}
    if not topics:
        return 0
    current = {
        (row.topic, row.name): row
        for row in conn.execute(
            text(
                "SELECT id, topic, name, value, source, sensitive FROM topic_configs "
                "WHERE cluster = :cluster AND valid_to IS NULL AND topic = ANY(CAST(:topics AS text[]))"
            ),
            {"cluster": cluster, "topics": sorted(topics)},
        )
    }
    wanted = {(e.topic, e.name): e for e in entries}
    to_close = []
    to_open = []
    for key, entry in wanted.items():
        row = current.get(key)
        if row is not None and (row.value, row.source, row.sensitive) == (
            entry.value,
            entry.source,
            entry.sensitive,
        ):
            continue
        if row is not None:
            to_close.append(row.id)
        to_open.append(entry)
    to_close.extend(row.id for key, row in current.items() if key not in wanted)
    if to_close:
        conn.execute(
            text("UPDATE topic_configs SET valid_to = :now WHERE id = ANY(CAST(:ids AS bigint[]))"),
            {"now": now, "ids": to_close},
        )
    if to_open:
        conn.execute(
            text(
                "INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive, valid_from) "
                "VALUES (:cluster, :topic, :name, :value, :source, :sensitive, :now)"
            ),
            [
                {
                    "cluster": cluster,
                    "topic": e.topic,
                    "name": e.name,
                    "value": e.value,
                    "source": e.source,
                    "sensitive": e.sensitive,
                    "now": now,
                }
                for e in to_open
            ],
        )
    return len(to_open)


# ---------------------------------------------------------------------------------------------
# Reads for the offsets collector


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


def latest_committed(
    conn: Connection, cluster: str
) -> dict[tuple[str, str, int], tuple[int, datetime | None]]:
    """(group, topic, partition) -> (committed offset, when a commit was last observed), from the
    latest group offsets: what the collector needs to observe commits after a restart."""
    rows = conn.execute(
        text(
            "SELECT group_id, topic, partition, committed_offset, last_commit_observed_at "
            "FROM latest_group_offsets WHERE cluster = :cluster"
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
