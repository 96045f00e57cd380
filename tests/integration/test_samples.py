"""The offsets samples against a real PostgreSQL: a 60,000-row batch and its latest tables, replays,
the topic config history, the collector's reads, leases, and the buffered writer through a real
server stop and start."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from monitor.core.clock import FakeClock, to_millis
from monitor.core.errors import StoreUnavailableError
from monitor.core.records import (
    END_OFFSET_LAST_KNOWN,
    END_OFFSET_LISTED,
    METHOD_EXACT,
    METHOD_INTERPOLATED,
    METHOD_NONE,
    CarriedGroupOffsets,
    CommitObservation,
    CommittedOffset,
    DataLossEvent,
    GroupDescription,
    GroupMember,
    GroupOffsetSample,
    LogDirReplica,
    LogDirUsage,
    OffsetsBatch,
    OffsetsHistory,
    PartitionOffsets,
    PartitionSample,
    RecordTimestamp,
    TopicConfigEntry,
)
from monitor.devtools.paths import var_dir
from monitor.devtools.postgres import LocalPostgres
from monitor.store import leases
from monitor.store.buffer import BufferedWriter
from monitor.store.metadata import finish_run, prune_runs, start_run
from monitor.store.samples import (
    cached_offset_marks,
    cached_timestamps,
    latest_committed,
    latest_end_offsets,
    prune_record_timestamps,
    record_topic_configs,
    to_datetime,
    write_commit_observations,
    write_log_dirs,
    write_offsets_batch,
    write_offsets_history,
)
from tests.fixtures.postgres import DEFAULT_TEST_PORT, PgServer

T0 = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
TOPICS, PARTITIONS, GROUPS = 100, 100, 5  # 10,000 partitions, 50,000 group offsets
METHODS = (METHOD_EXACT, METHOD_INTERPOLATED, METHOD_NONE)


def _partition_sample(topic: int, partition: int, step: int, at_ms: int) -> PartitionSample:
    end = 1_000 * (step + 1) + topic + partition
    offsets = PartitionOffsets(f"topic-{topic}", partition, step, end, end - 1, at_ms - 7)
    if partition == 0:  # an empty partition: no record times
        return PartitionSample(offsets)
    return PartitionSample(offsets, at_ms - 86_400_123, at_ms - 7, "CreateTime")


def _group_sample(group: int, topic: int, partition: int, step: int, at_ms: int) -> GroupOffsetSample:
    end = 1_000 * (step + 1) + topic + partition
    committed = end - group - step
    method = METHODS[(topic + partition + group) % 3]
    exact_ms = at_ms - 60_001 * (group + 1) if method != METHOD_NONE else None
    return GroupOffsetSample(
        CommittedOffset(f"group-{group}", f"topic-{topic}", partition, committed, leader_epoch=step),
        end_offset=end,
        start_offset=step,
        lag=end - committed,
        lag_clamped=group == 0 and partition == 1,
        committed_timestamp_ms=exact_ms,
        consumed_timestamp_ms=exact_ms - 1 if exact_ms is not None else None,
        timestamp_method=method,
        timestamp_error_ms=15_000 if method == METHOD_INTERPOLATED else None,
    )


def _groups(step: int) -> list[GroupDescription]:
    """Each group has one member per step + 1, so a newer batch changes the membership."""
    return [
        GroupDescription(
            f"group-{g}",
            "Stable",
            "consumer",
            "range",
            coordinator=1,
            members=tuple(
                GroupMember(f"m-{g}-{m}", f"client-{m}", "/10.0.0.1", (("topic-0", m), ("topic-1", m)))
                for m in range(step + 1)
            ),
            is_simple=g == 4,
        )
        for g in range(GROUPS)
    ]


def _offsets_batch(cluster: str, step: int, *, observe: int = 0, records: range = range(0)) -> OffsetsBatch:
    """Cycle `step` (15 s apart) of a cluster with 10,000 partitions and 5 groups reading them all.

    `observe` group partitions (group-0, first topics) get a commit observation; `records` are
    cache entries for topic-0, partition 1 at those offsets.
    """
    at = T0 + timedelta(seconds=15 * step)
    at_ms = to_millis(at)
    partitions = [_partition_sample(t, p, step, at_ms) for t in range(TOPICS) for p in range(PARTITIONS)]
    group_offsets = [
        _group_sample(g, t, p, step, at_ms)
        for g in range(GROUPS)
        for t in range(TOPICS)
        for p in range(PARTITIONS)
    ]
    observations = [
        CommitObservation(
            s.committed.group_id, s.committed.topic, s.committed.partition, s.committed.offset, 1, at_ms
        )
        for s in group_offsets[:observe]
    ]
    cache = [RecordTimestamp("topic-0", 1, o, o, at_ms - 1_000 + o, "LogAppendTime") for o in records]
    losses = [DataLossEvent("group-3", "topic-9", 9, 5, 40, at_ms)]
    return OffsetsBatch(
        cluster, at, None, partitions, _groups(step), group_offsets, observations, cache, losses
    )


def _count(conn: Connection, table: str, cluster: str) -> int:
    return int(
        conn.execute(text(f"SELECT count(*) FROM {table} WHERE cluster = :c"), {"c": cluster}).scalar_one()
    )


def _latest_groups(conn: Connection, cluster: str) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    rows = conn.execute(
        text(
            "SELECT group_id, topic, partition, sampled_at, l.committed_offset, leader_epoch, end_offset, "
            "start_offset, lag, lag_clamped, committed_timestamp, consumed_timestamp, timestamp_method, "
            "timestamp_error_ms, c.observed_at FROM latest_group_offsets l "
            "LEFT JOIN latest_commits c USING (cluster, group_id, topic, partition) WHERE cluster = :c"
        ),
        {"c": cluster},
    )
    return {(r[0], r[1], r[2]): tuple(r[3:]) for r in rows}


def _expected_groups(batch: OffsetsBatch) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    def ts(ms: int | None) -> datetime | None:
        return to_datetime(ms) if ms is not None else None

    return {
        (s.committed.group_id, s.committed.topic, s.committed.partition): (
            batch.sampled_at,
            s.committed.offset,
            s.committed.leader_epoch,
            s.end_offset,
            s.start_offset,
            s.lag,
            s.lag_clamped,
            ts(s.committed_timestamp_ms),
            ts(s.consumed_timestamp_ms),
            s.timestamp_method,
            s.timestamp_error_ms,
        )
        for s in batch.group_offsets
    }


def _latest_partitions(conn: Connection, cluster: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    rows = conn.execute(
        text(
            "SELECT topic, partition, sampled_at, start_offset, end_offset, max_timestamp_offset, "
            "max_timestamp, start_timestamp, latest_timestamp, timestamp_type "
            "FROM latest_partition_offsets WHERE cluster = :c"
        ),
        {"c": cluster},
    )
    return {(r[0], r[1]): tuple(r[2:]) for r in rows}


def _expected_partitions(batch: OffsetsBatch) -> dict[tuple[str, int], tuple[Any, ...]]:
    def ts(ms: int | None) -> datetime | None:
        return to_datetime(ms) if ms is not None else None

    return {
        (s.offsets.topic, s.offsets.partition): (
            batch.sampled_at,
            s.offsets.start,
            s.offsets.end,
            s.offsets.max_timestamp_offset,
            ts(s.offsets.max_timestamp_ms),
            ts(s.start_timestamp_ms),
            ts(s.latest_timestamp_ms),
            s.timestamp_type,
        )
        for s in batch.partitions
    }


@pytest.fixture(scope="module")
def two_cycles(engine: Engine) -> tuple[OffsetsBatch, OffsetsBatch, dict[str, int], dict[str, int]]:
    """Cluster "big": cycle 0 with commit observations and 1,000 cache entries, then cycle 1
    without observations, 500 old and 500 new cache entries and the same data loss."""
    first = _offsets_batch("big", 0, observe=2_000, records=range(1_000))
    second = _offsets_batch("big", 1, records=range(500, 1_500))
    assert first.row_count == 10_000 + GROUPS + 50_000 + 2_000 + 1_000 + 1
    with engine.begin() as conn:
        first_counts = write_offsets_batch(conn, first)
    with engine.begin() as conn:
        second_counts = write_offsets_batch(conn, second)
    return first, second, first_counts, second_counts


def test_a_60000_row_batch_is_written_and_counted(
    engine: Engine, two_cycles: tuple[OffsetsBatch, OffsetsBatch, dict[str, int], dict[str, int]]
) -> None:
    first, _, counts, second_counts = two_cycles
    assert counts == {
        "partition_offsets": 10_000,
        "latest_partition_offsets": 10_000,
        "group_offsets": 50_000,
        "latest_group_offsets": 50_000,
        "group_offsets_carried": 0,
        "group_offsets_gone": 0,  # every group answered with every offset it had
        "commit_observations": 2_000,
        "group_states": GROUPS,
        "group_members": GROUPS,
        "record_timestamps": 1_000,
        "data_loss_events": 1,
    }
    assert second_counts["record_timestamps"] == 500  # the other 500 were cached already
    assert second_counts["data_loss_events"] == 0  # the same loss is recorded once
    assert second_counts["group_members"] == 2 * GROUPS
    with engine.connect() as conn:
        assert _count(conn, "partition_offsets", "big") == 20_000
        assert _count(conn, "group_offsets", "big") == 100_000
        assert _count(conn, "latest_partition_offsets", "big") == 10_000
        assert _count(conn, "latest_group_offsets", "big") == 50_000
        assert _count(conn, "group_states", "big") == 2 * GROUPS
        assert _count(conn, "commit_observations", "big") == 2_000
        assert _count(conn, "record_timestamps", "big") == 1_500
        loss = conn.execute(
            text(
                "SELECT group_id, topic, partition, committed_offset, start_offset, messages_lost, detected_at "
                "FROM data_loss_events WHERE cluster = 'big'"
            )
        ).one()
        assert tuple(loss) == ("group-3", "topic-9", 9, 5, 40, 35, first.sampled_at)
        sample = conn.execute(
            text(
                "SELECT committed_timestamp, consumed_timestamp, timestamp_method, lag, run_id FROM group_offsets "
                "WHERE cluster = 'big' AND group_id = 'group-1' AND topic = 'topic-0' AND partition = 2 "
                "AND sampled_at = :at"
            ),
            {"at": first.sampled_at},
        ).one()
    expected = _group_sample(1, 0, 2, 0, to_millis(first.sampled_at))
    assert expected.committed_timestamp_ms is not None and expected.consumed_timestamp_ms is not None
    assert tuple(sample) == (
        to_datetime(expected.committed_timestamp_ms),
        to_datetime(expected.consumed_timestamp_ms),
        METHOD_EXACT,
        expected.lag,
        None,
    )


def test_latest_tables_hold_the_newest_sample(
    engine: Engine, two_cycles: tuple[OffsetsBatch, OffsetsBatch, dict[str, int], dict[str, int]]
) -> None:
    first, second, _, _ = two_cycles
    with engine.connect() as conn:
        partitions = _latest_partitions(conn, "big")
        groups = _latest_groups(conn, "big")
        members = conn.execute(
            text(
                "SELECT group_id, member_id, assignment, updated_at FROM group_members WHERE cluster = 'big'"
            )
        ).all()
        simple = (
            conn.execute(
                text(
                    "SELECT group_id FROM group_states WHERE cluster = 'big' AND is_simple AND sampled_at = :at"
                ),
                {"at": second.sampled_at},
            )
            .scalars()
            .all()
        )
    assert partitions == _expected_partitions(second)
    observed = {
        (o.group_id, o.topic, o.partition): to_datetime(o.observed_at_ms) for o in first.commit_observations
    }
    # The second cycle observed no commit: the first cycle's observation times are kept.
    assert groups == {key: (*values, observed.get(key)) for key, values in _expected_groups(second).items()}
    assert sum(1 for values in groups.values() if values[-1] is not None) == 2_000
    assert len(members) == 2 * GROUPS
    assert {(g, m) for g, m, _, _ in members} == {
        (f"group-{g}", f"m-{g}-{m}") for g in range(GROUPS) for m in (0, 1)
    }
    assert {tuple(a) for _, _, a, _ in members} == {("topic-0:0", "topic-1:0"), ("topic-0:1", "topic-1:1")}
    assert {at for *_, at in members} == {second.sampled_at}
    assert simple == ["group-4"]


def test_a_newer_observation_replaces_the_kept_one(engine: Engine) -> None:
    at = T0 + timedelta(days=3)
    key = CommittedOffset("g", "t", 0, 10)
    sample = GroupOffsetSample(key, 20, 0, 10)
    observation = CommitObservation("g", "t", 0, 10, 5, to_millis(at))
    with engine.begin() as conn:
        write_offsets_batch(
            conn, OffsetsBatch("obs", at, group_offsets=[sample], commit_observations=[observation])
        )
        write_offsets_batch(conn, OffsetsBatch("obs", at + timedelta(seconds=15), group_offsets=[sample]))
        assert latest_committed(conn, "obs") == {("g", "t", 0): (10, at)}
        later = at + timedelta(seconds=30)
        moved = GroupOffsetSample(CommittedOffset("g", "t", 0, 12), 20, 0, 8)
        seen = CommitObservation("g", "t", 0, 12, 10, to_millis(later))
        write_offsets_batch(
            conn, OffsetsBatch("obs", later, group_offsets=[moved], commit_observations=[seen])
        )
        assert latest_committed(conn, "obs") == {("g", "t", 0): (12, later)}


def test_commit_observations_keep_names_with_quotes_backslashes_braces_and_the_word_null(
    engine: Engine,
) -> None:
    """The arrays the commit writes send are array literals made here (`staging.text_array`):
    every character a group or topic name may hold comes back as it was."""
    at = T0 + timedelta(days=4, hours=1)
    names = ['say "hi"', "back\\slash", "{br,ace}", "NULL", " spaced ", "ünï 漢", 'a\\"b', "x,y"]
    sent = [
        CommitObservation(name, f"t-{name}", n, 100 + n, None if n % 2 else n, to_millis(at) + n)
        for n, name in enumerate(names)
    ]
    with engine.begin() as conn:
        assert write_commit_observations(conn, "odd names", sent) == len(sent)
        stored = conn.execute(
            text(
                "SELECT group_id, topic, partition, committed_offset, previous_offset, observed_at"
                " FROM commit_observations WHERE cluster = 'odd names' ORDER BY partition"
            )
        ).all()
        latest = conn.execute(
            text("SELECT group_id, topic FROM latest_commits WHERE cluster = 'odd names' ORDER BY partition")
        ).all()
    assert [tuple(r) for r in stored] == [
        (
            o.group_id,
            o.topic,
            o.partition,
            o.committed_offset,
            o.previous_offset,
            to_datetime(o.observed_at_ms),
        )
        for o in sent
    ]
    assert [tuple(r) for r in latest] == [(name, f"t-{name}") for name in names]


def test_streamed_observations_are_stored_as_sent_and_kept_newest_per_key(
    engine: Engine,
) -> None:
    at = T0 + timedelta(days=4)
    sample = GroupOffsetSample(CommittedOffset("g", "t", 0, 10), 20, 0, 10)
    first_seen = CommitObservation("g", "t", 0, 10, None, to_millis(at))  # no previous offset
    other = CommitObservation("h", "t", 1, 7, None, to_millis(at))  # no latest row: only appended
    newer = CommitObservation("g", "t", 0, 11, 10, to_millis(at + timedelta(seconds=1)))
    with engine.begin() as conn:
        write_offsets_batch(conn, OffsetsBatch("streamed", at, group_offsets=[sample]))
        assert write_commit_observations(conn, "streamed", [first_seen, other, newer]) == 3
        assert write_commit_observations(conn, "streamed", [first_seen]) == 0, "a repeat is one row"
        latest = conn.execute(
            text(
                "SELECT group_id, committed_offset, observed_at FROM latest_commits"
                " WHERE cluster = 'streamed' ORDER BY group_id"
            )
        ).all()
        stored = conn.execute(
            text(
                "SELECT group_id, topic, partition, committed_offset, previous_offset, observed_at "
                "FROM commit_observations WHERE cluster = 'streamed' ORDER BY group_id, observed_at"
            )
        ).all()
        recalled = latest_committed(conn, "streamed")
    assert [tuple(r) for r in stored] == [
        ("g", "t", 0, 10, None, at),
        ("g", "t", 0, 11, 10, at + timedelta(seconds=1)),
        ("h", "t", 1, 7, None, at),
    ]
    assert recalled == {("g", "t", 0): (10, at + timedelta(seconds=1))}, "the newest observation of the key"
    assert [tuple(r) for r in latest] == [("g", 11, at + timedelta(seconds=1)), ("h", 7, at)], (
        "each key's newest commit, kept whether or not the key has a latest group offset row"
    )


def test_replaying_a_batch_neither_fails_nor_duplicates(
    engine: Engine, two_cycles: tuple[OffsetsBatch, OffsetsBatch, dict[str, int], dict[str, int]]
) -> None:
    first, second, _, _ = two_cycles
    tables = (
        "partition_offsets",
        "group_offsets",
        "group_states",
        "commit_observations",
        "record_timestamps",
    )
    with engine.connect() as conn:
        before = {table: _count(conn, table, "big") for table in tables}
        latest_before = _latest_groups(conn, "big")
    with engine.begin() as conn:
        replayed = write_offsets_batch(conn, second, idempotent=True)
        # An older batch replayed late does not move the latest rows back.
        write_offsets_batch(conn, first, idempotent=True)
    assert {table: replayed[table] for table in tables} == dict.fromkeys(tables, 0)
    assert replayed["data_loss_events"] == 0
    with engine.connect() as conn:
        assert {table: _count(conn, table, "big") for table in tables} == before
        assert _latest_groups(conn, "big") == latest_before
        assert _latest_partitions(conn, "big") == _expected_partitions(second)
        assert _count(conn, "group_members", "big") == 2 * GROUPS
    # Without idempotent mode the same batch is refused, and the caller's transaction survives.
    with engine.begin() as conn:
        with pytest.raises(IntegrityError, match="duplicate key"):
            write_offsets_batch(conn, second)
        assert _count(conn, "partition_offsets", "big") == 20_000


def _history_groups(
    conn: Connection, cluster: str, at: datetime
) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    rows = conn.execute(
        text(
            "SELECT group_id, topic, partition, sampled_at, committed_offset, leader_epoch, end_offset, "
            "start_offset, lag, lag_clamped, committed_timestamp, consumed_timestamp, timestamp_method, "
            "timestamp_error_ms FROM group_offsets WHERE cluster = :c AND sampled_at = :at"
        ),
        {"c": cluster, "at": at},
    )
    return {(r[0], r[1], r[2]): tuple(r[3:]) for r in rows}


def _carried_cycle(cluster: str, first: OffsetsBatch, since: datetime) -> OffsetsBatch:
    """The cycle after `first`: group-0 moved on topic-0 (its 100 partitions), group-4 is gone,
    every other group offset is unchanged; only the moved samples are sent."""
    at = first.sampled_at + timedelta(seconds=15)
    moved = [_group_sample(0, 0, p, 1, to_millis(at)) for p in range(PARTITIONS)]
    moved_keys = {(s.committed.group_id, s.committed.topic, s.committed.partition) for s in moved}
    kept = [
        s
        for s in first.group_offsets
        if s.committed.group_id != "group-4"
        and (s.committed.group_id, s.committed.topic, s.committed.partition) not in moved_keys
    ]
    gone = [
        (s.committed.group_id, s.committed.topic, s.committed.partition)
        for s in first.group_offsets
        if s.committed.group_id == "group-4"
    ]
    return OffsetsBatch(
        cluster,
        at,
        None,
        first.partitions,
        _groups(0),
        kept + moved,
        carried=CarriedGroupOffsets(since, moved, gone),
    )


@pytest.mark.parametrize("since_right", [True, False], ids=["carried", "previous-rows-missing"])
def test_unmoved_group_offsets_are_carried_from_the_previous_batch(engine: Engine, since_right: bool) -> None:
    cluster = f"carry-{since_right}"
    first = _offsets_batch(cluster, 0)
    with engine.begin() as conn:
        write_offsets_batch(conn, first)
    # When the store does not hold the previous batch's rows as said, every sample is sent.
    since = first.sampled_at if since_right else first.sampled_at - timedelta(seconds=1)
    second = _carried_cycle(cluster, first, since)
    assert second.carried is not None
    assert len(second.carried.moved) == PARTITIONS and len(second.carried.gone) == TOPICS * PARTITIONS
    with engine.begin() as conn:
        counts = write_offsets_batch(conn, second)
    written = (GROUPS - 1) * TOPICS * PARTITIONS
    assert counts["group_offsets"] == counts["latest_group_offsets"] == written
    assert counts["group_offsets_carried"] == (written - PARTITIONS if since_right else 0)
    expected = _expected_groups(second)
    with engine.connect() as conn:
        assert _history_groups(conn, cluster, second.sampled_at) == expected
        assert _history_groups(conn, cluster, first.sampled_at) == _expected_groups(first)
        latest = _latest_groups(conn, cluster)
    # The gone group's rows stay as they were (their sample time tells they are old).
    assert {key: values[:-1] for key, values in latest.items() if key[0] != "group-4"} == expected
    assert {values[0] for key, values in latest.items() if key[0] == "group-4"} == {first.sampled_at}


def test_carrying_when_many_group_offsets_moved_or_went_stays_quick(engine: Engine) -> None:
    """Of 50,000: 20,000 moved, 10,000 gone (group-4), 20,000 carried. The anti-joins of the
    latest rows against the staged and the gone keys must not scan either once per latest row
    (hundreds of millions of comparisons, minutes)."""
    first = _offsets_batch("carry-half", 0)
    with engine.begin() as conn:
        write_offsets_batch(conn, first)
    at = first.sampled_at + timedelta(seconds=15)
    moved = [
        _group_sample(g, t, p, 1, to_millis(at)) for g in range(GROUPS - 1) for t in range(TOPICS)
        for p in range(PARTITIONS) if (t + p) % 2 == 0
    ]  # fmt: skip
    gone = [(f"group-{GROUPS - 1}", f"topic-{t}", p) for t in range(TOPICS) for p in range(PARTITIONS)]
    left = {(s.committed.group_id, s.committed.topic, s.committed.partition) for s in moved} | set(gone)
    kept = [
        s
        for s in first.group_offsets
        if (s.committed.group_id, s.committed.topic, s.committed.partition) not in left
    ]
    second = OffsetsBatch(
        "carry-half",
        at,
        None,
        group_offsets=kept + moved,
        carried=CarriedGroupOffsets(first.sampled_at, moved, gone),
    )
    started = time.monotonic()
    with engine.begin() as conn:
        counts = write_offsets_batch(conn, second)
    assert time.monotonic() - started < 20
    assert counts["group_offsets_carried"] == len(kept) == 20_000
    with engine.connect() as conn:
        assert _history_groups(conn, "carry-half", at) == _expected_groups(second)


def test_a_carried_batch_replayed_sends_every_sample(engine: Engine) -> None:
    first = _offsets_batch("carry-replay", 0)
    second = _carried_cycle("carry-replay", first, first.sampled_at)
    with engine.begin() as conn:
        write_offsets_batch(conn, first)
        # A replay does not trust the previous rows: it sends every sample (again: a no-op).
        write_offsets_batch(conn, second, idempotent=True)
        write_offsets_batch(conn, second, idempotent=True)
    with engine.connect() as conn:
        assert _history_groups(conn, "carry-replay", second.sampled_at) == _expected_groups(second)


def test_a_cold_batch_answers_from_the_latest_rows_and_its_history_follows(engine: Engine) -> None:
    cluster = "history-after"
    first = dataclasses.replace(_offsets_batch(cluster, 0), history_after=True)
    history = OffsetsHistory(cluster, first.sampled_at, None, len(first.group_offsets))
    with engine.begin() as conn:
        counts = write_offsets_batch(conn, first)
    assert counts["group_offsets"] == 0 and counts["latest_group_offsets"] == len(first.group_offsets)
    with engine.connect() as conn:
        # Between the two transactions a reader finds every lag, and no history row yet.
        assert {key: values[:-1] for key, values in _latest_groups(conn, cluster).items()} == (
            _expected_groups(first)
        )
        assert _count(conn, "group_offsets", cluster) == 0

    with engine.begin() as conn:
        assert write_offsets_history(conn, history) == len(first.group_offsets)
        # A replay of it is a no-op.
        assert write_offsets_history(conn, history, idempotent=True) == 0
    with engine.connect() as conn:
        assert _history_groups(conn, cluster, first.sampled_at) == _expected_groups(first)

    # The next batch carries from those latest rows as from any written batch's.
    second = _carried_cycle(cluster, first, first.sampled_at)
    with engine.begin() as conn:
        counts = write_offsets_batch(conn, second)
    assert counts["group_offsets_carried"] == (GROUPS - 1) * TOPICS * PARTITIONS - PARTITIONS
    with engine.connect() as conn:
        assert _history_groups(conn, cluster, second.sampled_at) == _expected_groups(second)
        assert _history_groups(conn, cluster, first.sampled_at) == _expected_groups(first)


def test_a_batch_cannot_both_carry_and_leave_its_history_for_after() -> None:
    first = _offsets_batch("history-after-carried", 0)
    second = _carried_cycle("history-after-carried", first, first.sampled_at)
    with pytest.raises(ValueError, match="history_after cannot carry rows"):
        dataclasses.replace(second, history_after=True)


def test_collector_reads_round_trip(
    engine: Engine, two_cycles: tuple[OffsetsBatch, OffsetsBatch, dict[str, int], dict[str, int]]
) -> None:
    first, second, _, _ = two_cycles
    keys = [("topic-0", 1, o) for o in range(0, 50_000)]
    with engine.connect() as conn:
        cached = cached_timestamps(conn, "big", keys)
        committed = latest_committed(conn, "big")
        assert cached_timestamps(conn, "other-cluster", keys[:10]) == {}
    assert len(cached) == 1_500
    assert cached[("topic-0", 1, 1_200)] == RecordTimestamp(
        "topic-0", 1, 1_200, 1_200, to_millis(second.sampled_at) - 1_000 + 1_200, "LogAppendTime"
    )
    assert cached[("topic-0", 1, 7)].timestamp_ms == to_millis(first.sampled_at) - 1_000 + 7
    assert len(committed) == 50_000
    key = ("group-0", "topic-0", 0)
    expected = _group_sample(0, 0, 0, 1, 0).committed.offset
    assert committed[key] == (expected, to_datetime(first.commit_observations[0].observed_at_ms))
    assert committed[("group-4", "topic-99", 99)][1] is None


def test_prune_record_timestamps(engine: Engine) -> None:
    at = T0 + timedelta(days=5)
    old = OffsetsBatch(
        "prune", at, record_timestamps=[RecordTimestamp("t", 0, o, o, 1, "CreateTime") for o in range(3)]
    )
    new = OffsetsBatch(
        "prune", at + timedelta(hours=1), record_timestamps=[RecordTimestamp("t", 0, 9, None, None)]
    )
    with engine.begin() as conn:
        write_offsets_batch(conn, old)
        write_offsets_batch(conn, new)
        assert cached_offset_marks(conn, "prune") == {("t", 0): 9}
        assert prune_record_timestamps(conn, "prune", at + timedelta(minutes=1)) == 3
        assert cached_timestamps(conn, "prune", [("t", 0, o) for o in range(10)]) == {
            ("t", 0, 9): RecordTimestamp("t", 0, 9, None, None, "NotAvailable")
        }
        assert cached_offset_marks(conn, "prune") == {("t", 0): 9}
        assert cached_offset_marks(conn, "no-such-cluster") == {}


def test_log_dirs_append_and_replay(engine: Engine) -> None:
    at = T0 + timedelta(days=6)
    replicas = [LogDirReplica(b, "/data", "t", p, 1_000 * p, 0, False) for b in (1, 2) for p in range(3)]
    usages = [
        LogDirUsage(1, "/data", 10_000, 4_000),
        LogDirUsage(2, "/data", None, None, "KafkaStorageException"),
    ]
    with engine.begin() as conn:
        assert write_log_dirs(conn, "dirs", at, 7, replicas, usages) == {
            "log_dir_sizes": 6,
            "broker_disks": 2,
        }
    with engine.begin() as conn:
        replay = write_log_dirs(conn, "dirs", at, 7, replicas, usages, idempotent=True)
        assert replay == {"log_dir_sizes": 0, "broker_disks": 0}
        assert _count(conn, "log_dir_sizes", "dirs") == 6
        disk = conn.execute(
            text("SELECT usable_bytes, error FROM broker_disks WHERE cluster = 'dirs' AND broker_id = 2")
        )
        assert tuple(disk.one()) == (None, "KafkaStorageException")


# ---------------------------------------------------------------------------------------------
# Topic config history


def _configs(conn: Connection) -> list[tuple[Any, ...]]:
    rows = conn.execute(
        text(
            "SELECT topic, name, value, source, valid_from, valid_to FROM topic_configs "
            "WHERE cluster = 'cfgh' ORDER BY topic, name, valid_from"
        )
    )
    return [tuple(r) for r in rows]


def test_topic_config_history_records_changes_only(engine: Engine) -> None:
    t1, t2, t3, t4 = (T0 + timedelta(hours=h) for h in range(4))
    entries = [
        TopicConfigEntry("orders", "retention.ms", "604800000", "DYNAMIC_TOPIC_CONFIG"),
        TopicConfigEntry("orders", "cleanup.policy", "delete", "DEFAULT_CONFIG"),
        TopicConfigEntry("payments", "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"),
    ]
    with engine.begin() as conn:
        assert record_topic_configs(conn, "cfgh", entries, ["orders", "payments"], t1) == 3
        # Unchanged: nothing new, nothing closed.
        assert record_topic_configs(conn, "cfgh", entries, ["orders", "payments"], t2) == 0
        assert [row[-1] for row in _configs(conn)] == [None, None, None]

        # retention.ms of orders raised; payments not described this time (its rows stay open).
        raised = TopicConfigEntry("orders", "retention.ms", "1209600000", "DYNAMIC_TOPIC_CONFIG")
        assert record_topic_configs(conn, "cfgh", [entries[1], raised], ["orders"], t3) == 1
        # cleanup.policy no longer returned for orders: its row is closed, none opened.
        assert record_topic_configs(conn, "cfgh", [raised], ["orders"], t4) == 0
        assert _configs(conn) == [
            ("orders", "cleanup.policy", "delete", "DEFAULT_CONFIG", t1, t4),
            ("orders", "retention.ms", "604800000", "DYNAMIC_TOPIC_CONFIG", t1, t3),
            ("orders", "retention.ms", "1209600000", "DYNAMIC_TOPIC_CONFIG", t3, None),
            ("payments", "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG", t1, None),
        ]
        # The same value from another source is a change too; a topic described empty closes all.
        moved = TopicConfigEntry("orders", "retention.ms", "1209600000", "STATIC_BROKER_CONFIG")
        assert (
            record_topic_configs(conn, "cfgh", [moved], ["orders", "payments"], t4 + timedelta(hours=1)) == 1
        )
        open_rows = conn.execute(
            text("SELECT topic, source FROM topic_configs WHERE cluster = 'cfgh' AND valid_to IS NULL")
        ).all()
        assert [tuple(r) for r in open_rows] == [("orders", "STATIC_BROKER_CONFIG")]
        assert record_topic_configs(conn, "cfgh", [], [], t4) == 0


# ---------------------------------------------------------------------------------------------
# Leases


def _acquire(engine: Engine, holder: str, ttl: float) -> bool:
    with engine.begin() as conn:
        return leases.acquire(conn, "collect:c1", holder, ttl)


def _holders(engine: Engine) -> dict[str, tuple[str, datetime]]:
    with engine.begin() as conn:
        return leases.holders(conn)


def _acquired_at(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(text("SELECT acquired_at FROM leases WHERE name = 'collect:c1'")).scalar_one()


def test_a_lease_has_one_holder_until_it_expires(engine: Engine) -> None:
    assert _acquire(engine, "instance-a", 1.0)
    assert not _acquire(engine, "instance-b", 1.0)
    first_expiry = _holders(engine)["collect:c1"]
    assert first_expiry[0] == "instance-a"
    taken_at = _acquired_at(engine)

    time.sleep(0.05)
    assert _acquire(engine, "instance-a", 1.0)  # renewed by its holder
    renewed = _holders(engine)["collect:c1"]
    assert renewed[0] == "instance-a" and renewed[1] > first_expiry[1]
    assert _acquired_at(engine) == taken_at  # a renewal is not a new acquisition
    assert not _acquire(engine, "instance-b", 1.0)

    time.sleep(1.1)  # instance-a stopped renewing
    assert "collect:c1" not in _holders(engine)
    assert _acquire(engine, "instance-b", 30)
    assert not _acquire(engine, "instance-a", 30)
    assert _holders(engine)["collect:c1"][0] == "instance-b"
    assert _acquired_at(engine) > taken_at

    with engine.begin() as conn:
        leases.release(conn, "collect:c1", "instance-a")  # not the holder: no effect
    assert _holders(engine)["collect:c1"][0] == "instance-b"
    with engine.begin() as conn:
        leases.release(conn, "collect:c1", "instance-b")
    assert _holders(engine) == {}
    assert _acquire(engine, "instance-a", 30)  # released: free at once


# ---------------------------------------------------------------------------------------------
# Buffered writer


def _small_batch(cluster: str, step: int) -> OffsetsBatch:
    at = T0 + timedelta(days=10, seconds=15 * step)
    at_ms = to_millis(at)
    return OffsetsBatch(cluster, at, partitions=[_partition_sample(0, p, step, at_ms) for p in range(10)])


def _writer_for(batch: OffsetsBatch) -> BufferedWriter.Write:
    def write(conn: Connection, replay: bool) -> object:
        return write_offsets_batch(conn, batch, idempotent=replay)

    return write


def _samples_by_time(engine: Engine, cluster: str) -> dict[datetime, int]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT sampled_at, count(*) FROM partition_offsets WHERE cluster = :c GROUP BY 1"),
            {"c": cluster},
        )
        return {at: count for at, count in rows}


@pytest.fixture
def local_server(pg_server: PgServer) -> Iterator[LocalPostgres]:
    """The session's own PostgreSQL, to stop and start; always running again afterwards."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip(
            "test_buffered_writer_survives_a_postgresql_restart needs to stop and start the server; "
            "the server comes from DATABASE_URL, which this test does not control"
        )
    port = int(os.environ.get("KAFKA_HEALTH_TEST_PG_PORT", DEFAULT_TEST_PORT))
    server = LocalPostgres(var_dir() / "test" / "postgres", port)
    assert server.url("postgres") == pg_server.admin_url
    try:
        yield server
    finally:
        server.up()


def test_buffered_writer_survives_a_postgresql_restart(engine: Engine, local_server: LocalPostgres) -> None:
    batches = [_small_batch("restart", step) for step in range(6)]
    writer = BufferedWriter(engine, max_rows=30, clock=FakeClock())
    assert writer.submit("restart:0", 10, _writer_for(batches[0])) is True

    local_server.down()
    for step in range(1, 6):
        assert writer.submit(f"restart:{step}", batches[step].row_count, _writer_for(batches[step])) is False
    assert not writer.available
    assert writer.last_error is not None and "unavailable" in writer.last_error
    # The bound keeps the newest 30 rows: the writes of steps 1 and 2 were dropped.
    assert (writer.pending_writes, writer.pending_rows) == (3, 30)
    assert (writer.dropped_writes, writer.dropped_rows) == (2, 20)
    assert writer.flush() == 0  # still down: nothing lost, nothing reordered
    assert writer.pending_writes == 3

    local_server.up()
    assert writer.flush() == 3
    assert (writer.pending_writes, writer.pending_rows, writer.failed_writes) == (0, 0, 0)
    assert writer.available and writer.last_error is None
    assert _samples_by_time(engine, "restart") == {batches[s].sampled_at: 10 for s in (0, 3, 4, 5)}
    assert writer.flush() == 0


def test_buffered_writer_replays_in_order_before_a_new_write(engine: Engine) -> None:
    calls: list[tuple[str, bool]] = []

    def flaky(conn: Connection, replay: bool) -> object:
        calls.append(("flaky", replay))
        if len(calls) == 1:
            raise StoreUnavailableError("PostgreSQL at test is unavailable: connection refused")
        return write_offsets_batch(conn, _small_batch("order", 0), idempotent=replay)

    def fresh(conn: Connection, replay: bool) -> object:
        calls.append(("fresh", replay))
        return write_offsets_batch(conn, _small_batch("order", 1), idempotent=replay)

    writer = BufferedWriter(engine, max_rows=100, clock=FakeClock(), retry_seconds=0)
    assert writer.submit("order:0", 10, flaky) is False
    assert writer.pending_writes == 1 and not writer.available
    assert writer.submit("order:1", 10, fresh) is True
    assert calls == [("flaky", False), ("flaky", True), ("fresh", False)]
    assert writer.available and writer.pending_writes == 0
    assert len(_samples_by_time(engine, "order")) == 2


def test_buffered_writer_drops_a_write_that_is_wrong(engine: Engine) -> None:
    writer = BufferedWriter(engine, max_rows=100, clock=FakeClock())
    batch = _small_batch("wrong", 0)
    assert writer.submit("wrong:0", 10, _writer_for(batch)) is True
    # The same batch again, not as a replay: a duplicate key, which no retry can fix.
    assert writer.submit("wrong:0", 10, _writer_for(batch)) is False
    assert writer.submit("wrong:bug", 1, lambda conn, replay: conn.execute(text("SELECT 1 / 0"))) is False
    assert (writer.failed_writes, writer.pending_writes, writer.dropped_writes) == (2, 0, 0)
    assert writer.available
    assert writer.last_error is not None and "DivisionByZero" in writer.last_error
    assert _samples_by_time(engine, "wrong") == {batch.sampled_at: 10}


def test_buffered_writer_takes_concurrent_submissions(engine: Engine) -> None:
    writer = BufferedWriter(engine, max_rows=1_000, clock=FakeClock())
    results: list[bool] = []

    def collector(thread: int) -> None:
        for step in range(5):
            batch = _small_batch(f"threads-{thread}", step)
            results.append(writer.submit(f"threads-{thread}:{step}", 10, _writer_for(batch)))

    threads = [threading.Thread(target=collector, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 20
    for n in range(4):
        assert sum(_samples_by_time(engine, f"threads-{n}").values()) == 50


def test_prune_runs_keeps_recent_and_unfinished_runs(engine: Engine) -> None:
    at = T0 + timedelta(days=9)
    with engine.begin() as conn:
        old = start_run(conn, "prune-runs", "offsets", "a", at - timedelta(days=2))
        finish_run(conn, old, finished_at=at, duration_ms=5, status="ok", counts={}, error=None)
        stuck = start_run(conn, "prune-runs", "offsets", "a", at - timedelta(days=2))
        recent = start_run(conn, "prune-runs", "offsets", "a", at)
        assert prune_runs(conn, at - timedelta(days=1)) == 1
        left = conn.execute(
            text("SELECT id FROM collection_runs WHERE cluster = 'prune-runs' ORDER BY id")
        ).scalars()
        assert list(left) == [stuck, recent]


def test_a_last_known_end_offset_is_stored_with_its_method_and_age(engine: Engine) -> None:
    listed_at = T0 - timedelta(minutes=3)
    first = OffsetsBatch(
        "held", T0 - timedelta(minutes=3), None, [PartitionSample(PartitionOffsets("t", 0, 5, 80))]
    )
    held = PartitionSample(
        PartitionOffsets("t", 0, 7, 80), end_offset_method=END_OFFSET_LAST_KNOWN,
        end_offset_listed_at_ms=to_millis(listed_at),
    )  # fmt: skip
    second = OffsetsBatch("held", T0, None, [held, PartitionSample(PartitionOffsets("t", 1, 0, 3))])
    with engine.begin() as conn:
        write_offsets_batch(conn, first)
        write_offsets_batch(conn, second)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT partition, sampled_at, end_offset_method, end_offset_listed_at "
                "FROM partition_offsets WHERE cluster = 'held' ORDER BY partition, sampled_at"
            )
        ).all()
        latest = latest_end_offsets(conn, "held", [("t", 0), ("t", 1), ("t", 9)])
    assert [tuple(r) for r in rows] == [
        (0, listed_at, END_OFFSET_LISTED, None),
        (0, T0, END_OFFSET_LAST_KNOWN, listed_at),
        (1, T0, END_OFFSET_LISTED, None),
    ]
    assert latest == {("t", 0): (7, 80, listed_at), ("t", 1): (0, 3, T0)}, "listed when it was listed"
