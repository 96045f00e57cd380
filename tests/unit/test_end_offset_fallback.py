"""Partitions whose leader cannot give the end offset (high watermark held back under min ISR):
the last known end offset stands in, the sample says so, the run is not partial, and the log says
it once per change. The fake cluster (monitor/kafka/fake.py) answers the offsets job; the store is a stand-in."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pytest

from monitor.collect import lag
from monitor.collect.context import Topology
from monitor.collect.jobs.offsets import OffsetsCollector
from monitor.core.clock import FakeClock, to_millis
from monitor.core.records import (
    END_OFFSET_LAST_KNOWN,
    END_OFFSET_LISTED,
    EndOffsetHeldBack,
    OffsetsBatch,
    PartitionOffsets,
)
from monitor.core.settings import ClusterConfig, CollectConfig
from monitor.kafka.fake import FakeCluster
from monitor.store.runs import Run
from tests.fixtures.collect import fake_context

T = "payments.orders"
HELD = EndOffsetHeldBack(T, 1, 40, "Broker: Offset not available (OFFSET_NOT_AVAILABLE)")


# -- the decision, pure -----------------------------------------------------------------------


def test_a_held_back_partition_takes_its_last_known_end_and_todays_start() -> None:
    known = {(T, 1): lag.KnownEnd(start=30, end=90, listed_at_ms=1_000)}

    offsets, used, unknown = lag.last_known_ends({(T, 1): HELD}, known)

    assert offsets == {(T, 1): PartitionOffsets(T, 1, start=40, end=90)}
    assert used == known
    assert unknown == []


def test_without_a_start_from_the_leader_the_known_one_stands_and_start_never_passes_end() -> None:
    no_start = EndOffsetHeldBack(T, 1, None, "held back")
    past_end = EndOffsetHeldBack(T, 2, 95, "held back")
    known = {
        (T, 1): lag.KnownEnd(start=30, end=90, listed_at_ms=1),
        (T, 2): lag.KnownEnd(start=30, end=90, listed_at_ms=1),
    }

    offsets, _, _ = lag.last_known_ends({(T, 1): no_start, (T, 2): past_end}, known)

    assert offsets[(T, 1)] == PartitionOffsets(T, 1, 30, 90)
    assert offsets[(T, 2)] == PartitionOffsets(T, 2, 90, 90)


def test_a_held_back_partition_never_listed_is_unknown() -> None:
    offsets, used, unknown = lag.last_known_ends({(T, 1): HELD}, {})

    assert (offsets, used, unknown) == ({}, {}, [(T, 1)])


# -- the offsets job on the fake cluster ------------------------------------------------------


class Cluster:
    """The fake cluster the job samples: topic T (2 partitions on 2 brokers, min ISR 2, log start
    10) with 100 and 90 records, group `billing` committed at 50 on both. `hold` shrinks a
    partition's ISR below min ISR, so its leader holds the end offset back."""

    def __init__(self, clock: FakeClock) -> None:
        self.kafka = FakeCluster("prod", brokers=2, clock=clock)
        self.kafka.create_topic(T, 2, 2, {"min.insync.replicas": "2"})
        for partition, records in ((0, 100), (1, 90)):
            self.kafka.produce(T, partition, count=records)
            self.kafka.delete_records(T, partition, 10)
        self.kafka.commit("billing", {(T, 0): 50, (T, 1): 50})

    def hold(self, partition: int, start: int = 20) -> None:
        self.kafka.shrink_isr(T, partition, [1])
        self.kafka.delete_records(T, partition, start)

    def release(self, partition: int) -> None:
        self.kafka.shrink_isr(T, partition, [1, 2])


class FakeWriter:
    def __init__(self, available: bool) -> None:
        self.available = available
        self.dropped_rows = 0
        self.batches: list[OffsetsBatch] = []

    def submit(self, label: str, rows: int, write: Any) -> bool:
        self.batches.append(write.__closure__[0].cell_contents)
        return True


class FakeEngine:
    """An engine whose connections answer nothing: the store reads are patched per test."""

    @contextmanager
    def connect(self) -> Iterator[None]:
        yield None


def collector(cluster: Cluster, writer: FakeWriter, clock: FakeClock) -> OffsetsCollector:
    context = fake_context(
        cluster.kafka,
        writer,
        clock,
        CollectConfig(),
        cluster=ClusterConfig(name="prod", bootstrap_servers=["127.0.0.1:9"]),
        engine=FakeEngine(),
    )
    context.topology = Topology([(T, 0), (T, 1)], clock.now())
    return OffsetsCollector(context)


def cycle(job: OffsetsCollector, clock: FakeClock) -> Run:
    run = Run("prod", "offsets", clock.now())
    job.collect(run)
    clock.advance(15)
    return run


def test_a_partition_held_back_keeps_its_end_offset_and_lag_and_the_run_is_ok(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(datetime(2026, 11, 26, 12, 0, tzinfo=datetime.now().astimezone().tzinfo))
    cluster, writer = Cluster(clock), FakeWriter(available=False)
    job = collector(cluster, writer, clock)
    first_listed = to_millis(clock.now())
    cycle(job, clock)

    cluster.hold(1)
    cluster.kafka.produce(T, 1, count=909)  # end 999, never seen: the leader cannot answer it
    caplog.set_level(logging.INFO, logger="monitor.collect.listing")
    runs, changed = [], []
    for _ in range(3):
        runs.append(cycle(job, clock))
        changed.append(job.critical_changed)
    assert changed == [True, False, False], "a critical rule's input changed once: one evaluation asked"

    for run in runs:
        assert run.problems == [], "a partition that cannot move is not a failed collection"
        assert run.counts["end_offsets_last_known"] == 1
        assert run.counts["partitions"] == 2
    batch = writer.batches[-1]
    samples = {(s.offsets.topic, s.offsets.partition): s for s in batch.partitions}
    held = samples[(T, 1)]
    assert (held.offsets.start, held.offsets.end) == (20, 90)
    assert held.end_offset_method == END_OFFSET_LAST_KNOWN
    assert held.end_offset_listed_at_ms == first_listed, "the time it was listed, not now"
    assert samples[(T, 0)].end_offset_method == END_OFFSET_LISTED
    assert samples[(T, 0)].end_offset_listed_at_ms is None
    lags = {s.committed.partition: s.lag for s in batch.group_offsets}
    assert lags == {0: 50, 1: 40}
    warnings = [r for r in caplog.records if "under min ISR" in r.getMessage()]
    assert len(warnings) == 1, "said once for three cycles"
    assert "1 partition(s)" in warnings[0].getMessage()
    assert "logged again when the set changes" in warnings[0].getMessage()

    cluster.release(1)
    cycle(job, clock)
    assert sum(1 for r in caplog.records if "gives its end offset again" in r.getMessage()) == 1
    assert writer.batches[-1].partitions[1].end_offset_method == END_OFFSET_LISTED
    assert writer.batches[-1].partitions[1].offsets.end == 999


def test_after_a_restart_the_latest_stored_end_offset_stands_in(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    stored_at = datetime(2026, 11, 26, 11, 59, tzinfo=clock.now().tzinfo)
    asked: list[list[tuple[str, int]]] = []

    def latest_end_offsets(conn: object, cluster: str, keys: list[tuple[str, int]]) -> dict[Any, Any]:
        asked.append(list(keys))
        return {(T, 1): (15, 77, stored_at)}

    monkeypatch.setattr("monitor.collect.recall.latest_end_offsets", latest_end_offsets)
    monkeypatch.setattr("monitor.collect.recall.cached_timestamps", lambda *args: {})
    monkeypatch.setattr("monitor.collect.recall.latest_committed", lambda *args: {})
    monkeypatch.setattr("monitor.collect.recall.cached_offset_marks", lambda *args: {})
    monkeypatch.setattr("monitor.collect.recall.end_offset_brackets", lambda *args: {})
    cluster, writer = Cluster(clock), FakeWriter(available=True)
    cluster.hold(1)
    job = collector(cluster, writer, clock)

    runs = [cycle(job, clock) for _ in range(2)]

    assert asked == [[(T, 1)]], "read once, then remembered"
    assert all(r.problems == [] and r.counts["end_offsets_last_known"] == 1 for r in runs)
    held = writer.batches[-1].partitions[1]
    assert (held.offsets.start, held.offsets.end, held.end_offset_method) == (20, 77, END_OFFSET_LAST_KNOWN)
    assert held.end_offset_listed_at_ms == to_millis(stored_at)


def test_a_held_back_partition_with_no_end_known_anywhere_is_a_problem() -> None:
    clock = FakeClock()
    cluster, writer = Cluster(clock), FakeWriter(available=False)
    cluster.hold(1)
    job = collector(cluster, writer, clock)

    run = cycle(job, clock)

    assert run.counts["end_offsets_last_known"] == 0
    assert run.counts["store_reads_skipped"] >= 1, "the store was down: no stored end offset either"
    assert len(run.problems) == 1
    assert run.problems[0].startswith(f"offsets of partition {T}:1: Broker: Offset not available")
    assert "no end offset is known" in run.problems[0]
    assert [(s.offsets.topic, s.offsets.partition) for s in writer.batches[-1].partitions] == [(T, 0)]
