"""The two writers of a cluster's latest rows on the real PostgreSQL: the offsets job's batch
(every latest group offset row moved to its sample time) and the commits job's observations (each
key's newest commit, which the stream writes many times a second). At 1,000,000 group-partitions
they deadlocked on `latest_group_offsets`, each holding rows the other wanted, when the commits
job also wrote the commit times there; now each writes rows of its own. Here they write the same
keys in opposite orders side by side, many times, and PostgreSQL must never report a deadlock
(its own count, `pg_stat_database.deadlocks`, and its log when the server is ours)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from monitor.core.records import (
    CarriedGroupOffsets,
    CommitObservation,
    CommittedOffset,
    GroupOffsetSample,
    OffsetsBatch,
    PartitionOffsets,
    PartitionSample,
)
from monitor.store.samples import write_commit_observations, write_offsets_batch
from tests.fixtures.postgres import PgServer

CLUSTER = "writers"
GROUPS = 40
PARTITIONS = 25
ROUNDS = 12
T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)

Key = tuple[str, str, int]
KEYS: list[Key] = [(f"g{g:03d}", "t", p) for g in range(GROUPS) for p in range(PARTITIONS)]


def _batch(round_: int) -> OffsetsBatch:
    """Every key sampled again, as the offsets job sends a cycle: the even groups moved (sent,
    upserted in key order), the odd ones carried (their rows moved to the new time in the
    store, in the table's order), so the batch takes its rows in two statements."""
    at = T0 + timedelta(seconds=15 * round_)
    end = 1_000 + 100 * round_
    samples = [GroupOffsetSample(CommittedOffset(g, t, p, end - 10), end, 0, 10) for g, t, p in KEYS]
    partitions = [PartitionSample(PartitionOffsets("t", p, 0, end)) for p in range(PARTITIONS)]
    moved = [s for s in samples if int(s.committed.group_id[1:]) % 2 == 0]
    carried = None if round_ == 0 else CarriedGroupOffsets(at - timedelta(seconds=15), moved, [])
    return OffsetsBatch(CLUSTER, at, partitions=partitions, group_offsets=samples, carried=carried)


def _observations(round_: int) -> list[CommitObservation]:
    """A commit of every key during the round, in the opposite (descending) key order."""
    at_ms = int((T0 + timedelta(seconds=15 * round_ + 7)).timestamp() * 1000)
    offset = 1_000 + 100 * round_ - 5
    return [CommitObservation(g, t, p, offset, offset - 5, at_ms) for g, t, p in reversed(KEYS)]


def _deadlocks(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
            ).scalar_one()
        )


def _log_size(pg_server: PgServer) -> tuple[Path, int] | None:
    local = pg_server.local
    if local is None:
        return None
    log = local.log_file
    return log, log.stat().st_size if log.exists() else 0


def _side_by_side(*writes: Callable[[], None]) -> list[BaseException]:
    """Run the writes on threads started together; the errors they raised."""
    barrier = threading.Barrier(len(writes))
    errors: list[BaseException] = []

    def run(write: Callable[[], None]) -> None:
        barrier.wait()
        try:
            write()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in writes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


@pytest.mark.timeout(600)
def test_the_offsets_batch_and_the_commit_stream_never_deadlock(engine: Engine, pg_server: PgServer) -> None:
    with engine.begin() as conn:
        write_offsets_batch(conn, _batch(0))
    before, log = _deadlocks(engine), _log_size(pg_server)

    errors: list[BaseException] = []
    for round_ in range(1, ROUNDS + 1):

        def offsets(r: int = round_) -> None:
            with engine.begin() as conn:
                write_offsets_batch(conn, _batch(r))

        def commits(r: int = round_) -> None:
            with engine.begin() as conn:  # as the commits job hands them over
                write_commit_observations(conn, CLUSTER, _observations(r))

        errors += _side_by_side(offsets, commits)

    assert not errors, [str(e).splitlines()[0] for e in errors]
    assert _deadlocks(engine) == before
    if log is not None:
        path, offset = log
        with path.open("rb") as f:
            f.seek(offset)
            assert b"deadlock detected" not in f.read()
    with engine.connect() as conn:
        latest = conn.execute(
            text(
                "SELECT count(*) FROM latest_commits WHERE cluster = :c AND committed_offset = :o"
                " AND observed_at = :at"
            ),
            {"c": CLUSTER, "o": 1_000 + 100 * ROUNDS - 5, "at": T0 + timedelta(seconds=15 * ROUNDS + 7)},
        ).scalar_one()
        moved = conn.execute(
            text("SELECT count(*) FROM latest_group_offsets WHERE cluster = :c AND sampled_at = :at"),
            {"c": CLUSTER, "at": T0 + timedelta(seconds=15 * ROUNDS)},
        ).scalar_one()
    assert latest == len(KEYS), "every key's newest commit and its time are in latest_commits"
    assert moved == len(KEYS), "every latest group offset row moved to the last batch's time"
