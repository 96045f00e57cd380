"""The end offsets job (monitor/collect/jobs/end_offsets.py): each listing hands the store only
what changed since the one before (moved, missed, gone, answered again), the first one of a run
replaces the cluster's rows; on the fake cluster its thread lists the metadata job's partitions
every period, pauses while writes wait for PostgreSQL and writes the whole listing after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from monitor.collect.jobs.end_offsets import EndOffsetRefresher, EndOffsetTracker, rest_seconds
from monitor.core.records import EndOffsetRefresh
from monitor.core.settings import CollectConfig
from monitor.store.runs import Run
from tests.conditions import wait_for
from tests.fixtures.collect import Rig

pytestmark = pytest.mark.unit

A, B, C = ("orders", 0), ("orders", 1), ("orders", 2)


def test_the_first_listing_replaces_the_clusters_rows_and_the_next_write_what_changed() -> None:
    tracker = EndOffsetTracker()

    first = tracker.refresh(1_000, [A, B, C], {A: 10, B: 20})
    assert (first.replace, dict(first.changed), dict(first.missed), first.partitions) == (
        True, {A: 10, B: 20}, {}, 3,
    )  # fmt: skip

    quiet = tracker.refresh(2_000, [A, B, C], {A: 10, B: 20})
    assert (quiet.replace, dict(quiet.changed), dict(quiet.missed), list(quiet.gone)) == (False, {}, {}, [])

    moved = tracker.refresh(3_000, [A, B, C], {A: 11, B: 20, C: 5})
    assert dict(moved.changed) == {A: 11, C: 5}, "a moved end and a partition answered for the first time"


def test_a_missed_partition_holds_as_of_its_last_answer_once_and_is_written_when_answered_again() -> None:
    tracker = EndOffsetTracker()
    tracker.refresh(1_000, [A, B], {A: 10, B: 20})
    tracker.refresh(2_000, [A, B], {A: 10, B: 20})

    missed = tracker.refresh(3_000, [A, B], {A: 10})
    assert (dict(missed.changed), dict(missed.missed)) == ({}, {B: 2_000}), "answered last at 2,000"
    again = tracker.refresh(4_000, [A, B], {A: 10})
    assert dict(again.missed) == {}, "marked once"

    back = tracker.refresh(5_000, [A, B], {A: 10, B: 20})
    assert dict(back.changed) == {B: 20}, "the same end, no longer missed: written again"


def test_a_partition_no_longer_asked_is_gone_and_forgetting_replaces_everything() -> None:
    tracker = EndOffsetTracker()
    tracker.refresh(1_000, [A, B], {A: 10, B: 20})

    shrunk = tracker.refresh(2_000, [A], {A: 10})
    assert (list(shrunk.gone), dict(shrunk.changed)) == ([B], {})

    tracker.forget()
    whole = tracker.refresh(3_000, [A], {A: 10})
    assert (whole.replace, dict(whole.changed)) == (True, {A: 10})


def _refreshes(rig: Rig) -> list[EndOffsetRefresh]:
    """The listings handed to the store so far, from the write functions that carry them."""
    return [
        cell.cell_contents
        for label, write in rig.writer.writes
        if label.endswith(":end offsets")
        for cell in write.__closure__ or ()
        if isinstance(cell.cell_contents, EndOffsetRefresh)
    ]


@pytest.fixture
def rig() -> Iterator[tuple[Rig, EndOffsetRefresher]]:
    """`orders` (3 partitions of 10 records, read by `billing`) and `idle` (read by no group)
    described by the metadata job, and the end offsets job listing every half second."""
    rig = Rig()
    rig.kafka.create_topic("orders", 3, 1)
    for p in range(3):
        rig.kafka.produce("orders", p, count=10)
    rig.kafka.create_topic("idle", 2, 1)  # no group reads it: not listed
    rig.kafka.commit("billing", {("orders", p): 4 for p in range(3)})
    rig.context.config = CollectConfig(end_offsets_refresh_seconds=0.5)
    rig.cycle(rig.metadata, "metadata")
    rig.cycle()  # the offsets job: the partitions the groups read
    refresher = EndOffsetRefresher(rig.context)
    try:
        yield rig, refresher
    finally:
        for close in rig.context.closers:
            close()


def test_the_thread_lists_every_period_and_hands_over_the_moved_ends(
    rig: tuple[Rig, EndOffsetRefresher],
) -> None:
    kafka_rig, refresher = rig
    started = kafka_rig.cycle(refresher, "end_offsets")
    wait_for(lambda: _refreshes(kafka_rig), 5, "the first listing")
    first = _refreshes(kafka_rig)[0]
    assert first.replace and dict(first.changed) == {A: 10, B: 10, C: 10}
    assert first.partitions == 3, "the partitions no group reads are not listed"

    kafka_rig.kafka.produce("orders", 1, count=5)
    wait_for(
        lambda: any(dict(r.changed) == {B: 15} for r in _refreshes(kafka_rig)),
        5,
        "the moved end in a listing",
    )
    runs = [started, kafka_rig.cycle(refresher, "end_offsets")]
    assert sum(r.counts["listings"] for r in runs) >= 2 and runs[-1].counts["partitions_missed"] == 0
    assert sum(r.counts["rows_written"] for r in runs) == 4, "three rows first, then the one that moved"


def test_the_refresh_pauses_while_writes_wait_and_writes_the_whole_listing_after(
    rig: tuple[Rig, EndOffsetRefresher],
) -> None:
    kafka_rig, refresher = rig
    kafka_rig.cycle(refresher, "end_offsets")
    wait_for(lambda: _refreshes(kafka_rig), 5, "the first listing")

    kafka_rig.writer.pending_writes = 1  # type: ignore[misc]  # PostgreSQL went away
    paused = len(_refreshes(kafka_rig))
    wait_for(lambda: _counted(kafka_rig, refresher, "paused_for_store") > 0, 5, "a paused refresh")
    assert len(_refreshes(kafka_rig)) <= paused + 1, "at most the listing under way when it went"

    kafka_rig.writer.pending_writes = 0  # type: ignore[misc]
    wait_for(lambda: _refreshes(kafka_rig)[-1].replace, 5, "the whole listing written again")
    assert dict(_refreshes(kafka_rig)[-1].changed) == {A: 10, B: 10, C: 10}


def _counted(rig: Rig, refresher: EndOffsetRefresher, count: str) -> int:
    run = Run("prod", "end_offsets", rig.clock.now())
    refresher(run)
    return run.counts.get(count, 0)


def test_a_listing_longer_than_half_the_period_stretches_it() -> None:
    assert rest_seconds(1.0, 0.2) == pytest.approx(0.8)
    assert rest_seconds(1.0, 0.7) == 0.7, "at most half the thread's time listing"
    assert rest_seconds(1.0, 3.0) == 3.0


def test_a_refresh_period_under_half_a_second_is_refused_with_the_bound() -> None:
    with pytest.raises(ValueError, match=r"0 \(off\) or at least 0.5 seconds"):
        CollectConfig(end_offsets_refresh_seconds=0.1)
    assert CollectConfig(end_offsets_refresh_seconds=0).end_offsets_refresh_seconds == 0
