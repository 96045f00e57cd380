"""The commits job (monitor/collect/jobs/commits.py) on the fake cluster: every commit streamed
becomes an observation at its commit time and the committed offset the offsets job uses; the
OffsetFetch snapshot seeds the stream and reconciles it; a refused stream falls back to
OffsetFetch every cycle; records that cannot be decoded are counted and warned about once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from monitor.collect.commit_state import CommitState
from monitor.collect.jobs import commits as commits_job
from monitor.collect.jobs.commits import COMMIT_STREAM, CommitStreamCollector
from monitor.core.clock import to_millis
from monitor.core.records import CommitObservation, CommitStreamBatch, CommittedOffset, OffsetCommitRecord
from monitor.kafka.commit_stream import read_to_ms
from monitor.kafka.fake import FakeCluster
from monitor.kafka.offsets_topic import SKIP_OTHER_RECORD, SKIP_UNKNOWN_VALUE
from monitor.kafka.protocol import CommitStream
from monitor.store.runs import Run
from tests.conditions import wait_for
from tests.fixtures.collect import T0, Rig


class StreamRig(Rig):
    """The rig of the failure-policy tests with the commits job beside the offsets job."""

    def __init__(self, stream: Callable[[FakeCluster], CommitStream] = FakeCluster.commit_stream) -> None:
        super().__init__(stream=stream)
        self.commits = CommitStreamCollector(self.context)
        self.reports: list[Run] = []

    def supervise(self) -> Run:
        run = self.cycle(self.commits, "commits")
        self.reports.append(run)
        return run

    def reported(self, count: str) -> int:
        """The sum of `count` over every run of the commits job so far."""
        return sum(r.counts.get(count, 0) for r in self.reports)

    def observations(self) -> list[CommitObservation]:
        """Every observation handed to the store so far."""
        return [
            o
            for label, write in self.writer.writes
            if label.endswith(":commits")  # the commit times stamped after them carry them too
            for cell in write.__closure__ or ()
            if isinstance(cell.cell_contents, list)
            for o in cell.cell_contents
            if isinstance(o, CommitObservation)
        ]

    def streamed(self) -> list[tuple[int, int | None, int]]:
        """(partition, previous, committed) of every observation handed to the store so far."""
        return [(o.partition, o.previous_offset, o.committed_offset) for o in self.observations()]


@pytest.fixture
def rig() -> Iterator[StreamRig]:
    """`orders` (3 partitions of 10 records); `billing` committed 4 on each before the start."""
    rig = StreamRig()
    rig.kafka.create_topic("orders", 3, 1)
    base = to_millis(T0) - 60_000
    for p in range(3):
        rig.kafka.produce("orders", p, timestamps_ms=[base + 1000 * i for i in range(10)])
    rig.kafka.commit("billing", {("orders", p): 4 for p in range(3)})
    try:
        yield rig
    finally:
        rig.commits.close()


def live(rig: StreamRig) -> None:
    """Start the stream and take the snapshot: the offsets job's first cycle."""
    rig.supervise()
    wait_for(lambda: rig.context.commits.positioned, 5, "the stream to be positioned")
    first = rig.cycle()
    assert first.counts["commits_streamed"] == 0, "the snapshot comes from OffsetFetch"
    assert rig.context.commits.live


def test_every_commit_is_observed_at_its_time_and_used_for_lag(rig: StreamRig) -> None:
    live(rig)
    rig.kafka.fail("committed_offsets", times=10)  # OffsetFetch is not asked again

    rig.kafka.commit("billing", {("orders", 0): 6})
    rig.kafka.commit("billing", {("orders", 0): 5})  # a rewind
    rig.kafka.commit("billing", {("orders", 0): 5})  # committed again at once, unchanged: no row
    rig.kafka.commit("billing", {("orders", 1): 4})  # unchanged, but never observed by the stream
    observed = wait_for(lambda: len(rig.streamed()) >= 3 and rig.streamed(), 5, "three observations")
    cycle = rig.cycle()

    assert observed == [(0, 4, 6), (0, 6, 5), (1, 4, 4)], "the snapshot's 4 is the first previous offset"
    assert cycle.problems == [] and cycle.counts["commits_streamed"] == 1
    assert rig.writer.observed() == [], "the offsets job samples no observation of its own"
    assert rig.lags()[("billing", "orders", 0)].lag == 5
    assert rig.lags()[("billing", "orders", 1)].lag == 6, "from the snapshot"
    report = rig.supervise()
    assert report.counts["commits"] == 4 and report.counts["commits_observed"] == 3
    assert report.counts["unchanged_commits_skipped"] == 1
    assert report.counts["stream_live"] == 1


def test_an_idle_consumer_committing_the_same_offset_costs_a_row_per_interval(rig: StreamRig) -> None:
    live(rig)
    interval = rig.context.intervals.offsets_seconds
    committed = 0

    def commit_every_second(seconds: int) -> None:
        nonlocal committed
        for _ in range(seconds):
            rig.kafka.commit("billing", {("orders", 2): 7})
            committed += 1
            rig.clock.advance(1)

    commit_every_second(int(interval) - 1)  # the first one moves the offset: a row
    commit_every_second(2)  # one interval after the first: a row again
    commit_every_second(int(interval))  # the next interval: one more row
    wait_for(lambda: rig.supervise() and rig.reported("commits") == committed, 5, "every commit read")

    assert rig.streamed() == [(2, 4, 7), (2, 7, 7), (2, 7, 7)]
    times = [o.observed_at_ms for o in rig.observations()]
    assert times[1] - times[0] == times[2] - times[1] == interval * 1000, times
    assert committed == 2 * int(interval) + 1
    assert rig.reported("unchanged_commits_skipped") == committed - 3


def test_a_deleted_group_loses_its_offsets_and_is_counted(rig: StreamRig) -> None:
    live(rig)

    rig.kafka.delete_group("billing")
    wait_for(lambda: rig.supervise() and rig.reported("groups_deleted") == 1, 5, "the deletion")

    assert rig.context.commits.committed(["billing"]) == {"billing": []}
    assert rig.reported("tombstones") == 3
    assert rig.streamed() == [], "a tombstone is no commit"


def test_forgetting_a_group_drops_its_offsets_and_keeps_them_from_an_older_fetch() -> None:
    state = CommitState()
    state.positioned_at_end()
    asked_at = time.monotonic()
    state.reconcile(
        {"g": [CommittedOffset("g", "t", 0, 5)], "h": [CommittedOffset("h", "t", 0, 2)]}, asked_at=0.0
    )

    assert state.forget_groups(["g", "nobody"]) == 1
    state.reconcile({"g": [CommittedOffset("g", "t", 0, 5)]}, asked_at)  # asked before the deletion

    assert state.committed(["g", "h"]) == {"g": [], "h": [CommittedOffset("h", "t", 0, 2)]}
    assert state.forget_groups([]) == 0


def test_a_tombstone_removes_the_committed_offset(rig: StreamRig) -> None:
    live(rig)
    rig.kafka.delete_offsets("billing", [("orders", 2)])
    wait_for(lambda: len(rig.context.commits.committed(["billing"])["billing"]) == 2, 5, "the tombstone")

    rig.cycle()

    assert set(rig.lags()) == {("billing", "orders", 0), ("billing", "orders", 1)}
    assert rig.supervise().counts["tombstones"] == 1


def test_a_refused_stream_falls_back_to_offset_fetch_and_says_so_once(
    rig: StreamRig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.kafka.deny_commit_stream = True
    with caplog.at_level(logging.WARNING):
        rig.supervise()
        wait_for(lambda: rig.supervise().counts.get("stream_denied") == 1, 5, "the refusal")
        rig.supervise()
    rig.cycle()
    rig.kafka.commit("billing", {("orders", 1): 8})

    cycle = rig.cycle()

    refusals = [r for r in caplog.records if "not allowed" in r.getMessage()]
    assert len(refusals) == 1, "logged once"
    assert "Read on the topic __consumer_offsets" in refusals[0].getMessage()
    assert cycle.counts["commits_streamed"] == 0 and cycle.problems == []
    assert [(o.partition, o.previous_offset, o.committed_offset) for o in rig.writer.observed()] == [
        (1, 4, 8)
    ]
    assert rig.lags()[("billing", "orders", 1)].lag == 2


def test_a_refused_stream_is_asked_again_with_backoff_and_streams_once_allowed(
    rig: StreamRig, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commits_job, "DENIED_RETRY_SECONDS", 0.02)
    asked = 0
    stream = rig.context.client(COMMIT_STREAM)
    seek = stream.seek_to_end

    def counted_seek() -> None:
        nonlocal asked
        asked += 1
        seek()

    monkeypatch.setattr(stream, "seek_to_end", counted_seek)
    rig.kafka.deny_commit_stream = True
    with caplog.at_level(logging.INFO):
        rig.supervise()
        wait_for(lambda: asked >= 4, 5, "the stream to be refused again and again")
        assert rig.supervise().counts["stream_denied"] == 1
        assert not rig.context.commits.positioned
        rig.cycle()  # OffsetFetch meanwhile

        rig.kafka.deny_commit_stream = False
        wait_for(lambda: rig.context.commits.positioned, 5, "the stream once the grant is made")
        rig.cycle()  # the snapshot
        rig.kafka.commit("billing", {("orders", 1): 9})
        wait_for(lambda: rig.streamed() == [(1, 4, 9)], 5, "the commit streamed")

    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "not allowed" in m]) == 1, "a refusal that repeats is logged once"
    assert len([m for m in messages if "allowed again" in m]) == 1
    assert "stream_denied" not in rig.supervise().counts
    assert [commits_job.denied_retry_delay(n) for n in (1, 2, 3)] == [0.02, 0.04, 0.08]
    monkeypatch.setattr(commits_job, "DENIED_RETRY_MAX_SECONDS", 0.05)
    assert commits_job.denied_retry_delay(30) == 0.05


def test_a_cluster_with_the_stream_off_never_reads_it(rig: StreamRig) -> None:
    rig.context.cluster = rig.context.cluster.model_copy(update={"commit_stream": False})

    run = rig.supervise()
    rig.kafka.commit("billing", {("orders", 0): 7})

    assert run.counts["stream_enabled"] == 0
    assert not rig.context.commits.positioned
    assert rig.cycle().counts["commits_streamed"] == 0


class UndecodableStream:
    """A stream whose records are all of a newer schema, or of other group types."""

    def start(self) -> None: ...

    def close(self) -> None: ...

    def seek_to_end(self) -> None: ...

    def poll(self, max_seconds: float) -> CommitStreamBatch:
        return CommitStreamBatch(skipped={SKIP_UNKNOWN_VALUE: 2, SKIP_OTHER_RECORD: 5}, caught_up=True)


def test_undecodable_records_are_counted_and_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    collector = StreamRig(lambda kafka: UndecodableStream()).commits
    skipped: list[int] = []

    def supervise() -> int:
        run = Run("prod", "commits", T0)
        collector(run)
        assert run.problems == []
        skipped.append(run.counts["records_skipped"])
        return sum(skipped)

    try:
        with caplog.at_level(logging.WARNING):
            wait_for(lambda: supervise() >= 14, 5, "two polls' skipped records counted")
    finally:
        collector.close()

    warnings = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(warnings) == 1 and SKIP_UNKNOWN_VALUE in warnings[0], warnings


def test_reconciling_keeps_what_the_stream_saw_after_the_fetch_was_asked() -> None:
    state = CommitState()
    state.positioned_at_end()
    state.reconcile({"g": [CommittedOffset("g", "t", 0, 5), CommittedOffset("g", "t", 1, 5)]}, asked_at=0.0)
    asked_at = time.monotonic()
    state.apply([OffsetCommitRecord("g", "t", 0, 9, commit_timestamp_ms=1)], now_ms=2)

    corrected = state.reconcile(
        {"g": [CommittedOffset("g", "t", 0, 5), CommittedOffset("g", "t", 2, 3)]}, asked_at
    )

    assert corrected == 2, "t:1 no longer committed, t:2 missed by the stream"
    assert [(c.partition, c.offset) for c in state.committed(["g"])["g"]] == [(0, 9), (2, 3)]


def test_reconciling_keeps_a_deletion_the_stream_saw_after_the_fetch_was_asked() -> None:
    state = CommitState()
    state.positioned_at_end()
    state.reconcile({"other": [CommittedOffset("other", "t", 0, 1)]}, asked_at=0.0)
    asked_at = time.monotonic()
    state.apply([OffsetCommitRecord("g", "t", 0, None)], now_ms=2)  # g's offset deleted meanwhile

    state.reconcile({"g": [CommittedOffset("g", "t", 0, 5), CommittedOffset("g", "t", 1, 7)]}, asked_at)

    assert [(c.partition, c.offset) for c in state.committed(["g"])["g"]] == [(1, 7)]


def test_the_offsets_of_groups_that_did_not_commit_are_the_same_records_from_cycle_to_cycle() -> None:
    state = CommitState()
    state.positioned_at_end()
    fetched = CommittedOffset("g", "t", 0, 4, leader_epoch=2)
    state.reconcile(
        {"g": [CommittedOffset("g", "t", 1, 5), fetched], "h": [CommittedOffset("h", "t", 0, 2)]},
        asked_at=0.0,
    )
    first = state.committed(["g", "h", "none"])
    assert [(c.partition, c.offset) for c in first["g"]] == [(0, 4), (1, 5)], "sorted by partition"
    assert first["g"][0] is fetched, "the snapshot's own records, as the cycle that asked sampled them"
    assert first["none"] == []

    state.apply([OffsetCommitRecord("h", "t", 0, 3, commit_timestamp_ms=1)], now_ms=2)
    second = state.committed(["g", "h"])

    assert all(a is b for a, b in zip(first["g"], second["g"], strict=True)), "g did not commit"
    assert second["h"] == [CommittedOffset("h", "t", 0, 3)]
    second["g"].clear()  # an answer is the caller's own list
    assert len(state.committed(["g"])["g"]) == 2
    state.apply([OffsetCommitRecord("g", "t", 1, None)], now_ms=3)  # a tombstone
    assert state.committed(["g"])["g"] == [fetched]


def test_a_stream_whose_runs_stop_coming_stops_itself(rig: StreamRig) -> None:
    rig.context.config = rig.context.config.model_copy(update={"lease_ttl_seconds": 10})
    rig.supervise()  # the cycle moves the clock 15 s on: within the limit
    wait_for(lambda: rig.context.commits.positioned, 5, "the stream to be positioned")
    assert rig.commits.unsupervised_limit() == 20, "two lease periods: one run gives no interval yet"

    rig.clock.advance(6)  # 21 s without a run
    wait_for(lambda: not rig.context.commits.positioned, 10, "the unsupervised stream to stop")
    rig.supervise()

    wait_for(lambda: rig.context.commits.positioned, 5, "the next run to start it again")


def test_a_commit_the_stream_saw_before_the_snapshot_is_observed_once(rig: StreamRig) -> None:
    rig.cycle()  # sampled: billing at 4
    rig.kafka.commit("billing", {("orders", 1): 5})  # before the stream: only sampling sees it
    rig.supervise()
    wait_for(lambda: rig.context.commits.positioned, 5, "the stream to be positioned")
    rig.kafka.commit("billing", {("orders", 0): 6})
    wait_for(lambda: rig.streamed(), 5, "the streamed commit")

    rig.cycle()  # the snapshot

    # The streamed commit came before any snapshot: its previous offset was not known then.
    assert rig.streamed() == [(0, None, 6), (1, 4, 5)], "0 streamed, 1 sampled: each once"


def test_the_streamed_committed_offsets_are_taken_before_the_end_offsets_are_asked_for(
    rig: StreamRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit the stream reads while the end offsets are on their way must not be compared with
    them (it could look ahead of its partition's end): the stream's state is read first, even in
    a cycle that reconciles it with OffsetFetch."""
    live(rig)
    calls: list[str] = []
    state, admin = rig.context.commits, rig.context.admin
    committed, list_offsets = state.committed, admin.list_offsets

    def recording(name: str, call: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            calls.append(name)
            return call(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(state, "committed", recording("stream", committed))
    monkeypatch.setattr(admin, "list_offsets", recording("ends", list_offsets))
    rig.cycle()
    assert calls == ["stream", "ends"]
    calls.clear()
    due = rig.context.config.model_copy(update={"commit_reconcile_seconds": 0.0})  # every cycle
    monkeypatch.setattr(rig.context, "config", due)
    reconciling = rig.cycle()
    assert calls == ["stream", "ends"] and "commits_reconciled" in reconciling.counts


def _marks(rig: StreamRig) -> list[tuple[object, object]]:
    """(live since, read until) of every mark handed to the store so far."""
    marks = []
    for label, write in rig.writer.writes:
        if label.endswith(":commit mark"):
            cells = {
                name: cell.cell_contents
                for name, cell in zip(write.__code__.co_freevars, write.__closure__ or (), strict=True)
            }
            marks.append((cells["streaming_since"], cells["read_until"]))
    return marks


def test_a_stream_read_to_the_end_marks_how_far_at_most_twice_a_second(rig: StreamRig) -> None:
    positioned_at = rig.clock.now()
    rig.supervise()
    wait_for(lambda: _marks(rig), 5, "a mark once positioned")
    streaming_since, _ = _marks(rig)[0]
    assert streaming_since == positioned_at, "every commit since the positioning is read"

    live(rig)
    wait_for(lambda: _marks(rig)[-1][1] == rig.clock.now(), 5, "a mark of the time now")
    assert all(since == streaming_since for since, _ in _marks(rig)), "the same coverage: no gap"
    marked = len(_marks(rig))
    time.sleep(1.2)
    assert len(_marks(rig)) == marked, "the fake clock stood still: no second mark within half a second of it"

    rig.writer.pending_writes = 1  # type: ignore[misc]  # writes wait for PostgreSQL
    rig.clock.advance(2)
    time.sleep(1.0)
    assert len(_marks(rig)) == marked, "no mark while writes wait: the one stored stays true"
    rig.writer.pending_writes = 0  # type: ignore[misc]
    wait_for(lambda: len(_marks(rig)) == marked + 1, 5, "a mark once the writes went through")
    assert _marks(rig)[-1] == (streaming_since, rig.clock.now())

    rig.writer.dropped_writes = 1  # type: ignore[misc]  # an outage dropped observations
    rig.clock.advance(2)
    wait_for(lambda: len(_marks(rig)) == marked + 2, 5, "the next mark")
    assert _marks(rig)[-1] == (rig.clock.now(), rig.clock.now()), "the coverage starts again"


def _committed(rig: StreamRig, partition: int) -> int | None:
    held = rig.context.commits.committed(["billing"])["billing"]
    return next((c.offset for c in held if c.topic == "orders" and c.partition == partition), None)


def _slow_store(rig: StreamRig) -> tuple[threading.Event, threading.Event]:
    """PostgreSQL slow to answer: each write of observations waits until `release` is set
    (returned with `holding`, set once one waits)."""
    release, holding = threading.Event(), threading.Event()
    submit = rig.writer.submit

    def slow_submit(label: str, rows: int, write: Callable[..., object]) -> bool:
        if label.endswith(":commits") and not release.is_set():
            holding.set()
            release.wait(10)
        return submit(label, rows, write)

    rig.writer.submit = slow_submit  # type: ignore[method-assign]
    return release, holding


def test_the_polls_read_while_a_store_runs_and_what_they_read_is_stored_next_in_one_write(
    rig: StreamRig,
) -> None:
    live(rig)
    release, holding = _slow_store(rig)
    try:
        rig.kafka.commit("billing", {("orders", 0): 6})
        wait_for(holding.is_set, 5, "the first poll's observations being written")
        marked, before = len(_marks(rig)), len(rig.writer.writes)
        rig.kafka.commit("billing", {("orders", 0): 7})
        wait_for(lambda: _committed(rig, 0) == 7, 5, "the next commit read while the write waits")
        rig.kafka.commit("billing", {("orders", 1): 9})
        wait_for(lambda: _committed(rig, 1) == 9, 5, "and the one after it")
        rig.clock.advance(2)
        time.sleep(0.6)
        assert rig.streamed() == [] and len(_marks(rig)) == marked, "no mark before its observations"
    finally:
        release.set()
    wait_for(lambda: len(rig.streamed()) == 3, 5, "every poll's observations written")
    assert rig.streamed() == [(0, 4, 6), (0, 6, 7), (1, 4, 9)], "in the order they were read"
    writes = [label for label, _ in rig.writer.writes[before:] if label.endswith(":commits")]
    assert len(writes) == 2, "what was read during the first write went in one write after it"
    wait_for(lambda: len(_marks(rig)) > marked, 5, "a mark once the observations are written")


def test_reading_waits_for_the_store_once_it_holds_its_most_observations(
    rig: StreamRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commits_job, "HOLD_OBSERVATIONS", 1)
    live(rig)
    release, holding = _slow_store(rig)
    try:
        rig.kafka.commit("billing", {("orders", 0): 6})
        wait_for(holding.is_set, 5, "the first poll's observations being written")
        rig.kafka.commit("billing", {("orders", 0): 7})
        wait_for(lambda: _committed(rig, 0) == 7, 5, "one more observation read and held")
        rig.kafka.commit("billing", {("orders", 1): 9})
        time.sleep(1.2)
        assert _committed(rig, 1) == 4, "the reading waits for the store: nothing more is held"
    finally:
        release.set()
    wait_for(lambda: len(rig.streamed()) == 3, 5, "every observation written once the store answered")
    assert rig.streamed() == [(0, 4, 6), (0, 6, 7), (1, 4, 9)]


def test_a_failed_store_stops_the_stream_and_the_next_run_reports_and_restarts_it(rig: StreamRig) -> None:
    live(rig)
    submit, failed = rig.writer.submit, threading.Event()

    def failing_submit(label: str, rows: int, write: Callable[..., object]) -> bool:
        if label.endswith(":commits") and not failed.is_set():
            failed.set()
            raise RuntimeError("the store's bug")
        return submit(label, rows, write)

    rig.writer.submit = failing_submit  # type: ignore[method-assign]
    rig.kafka.commit("billing", {("orders", 0): 6})
    wait_for(lambda: not rig.context.commits.positioned, 5, "the stream to stop")
    run = rig.supervise()
    assert run.problems == ["the commit stream stopped (the store's bug); starting it again"]
    wait_for(lambda: rig.context.commits.positioned, 5, "the stream started again")
    rig.cycle()  # the snapshot the stream goes on from
    rig.kafka.commit("billing", {("orders", 0): 8})
    wait_for(lambda: (0, 6, 8) in rig.streamed(), 5, "the next commit stored")
    assert rig.streamed() == [(0, 4, 6), (0, 6, 8)], "the lost write's commit comes back from OffsetFetch"


class BehindStream:
    """A stream under a steady flow of commits: no poll finds every partition at its end, and
    each says before what time it has read everything (`read_to_ms`, set by the test)."""

    def __init__(self) -> None:
        self.read_to_ms: int | None = None

    def start(self) -> None: ...

    def close(self) -> None: ...

    def seek_to_end(self) -> None: ...

    def poll(self, max_seconds: float) -> CommitStreamBatch:
        time.sleep(0.01)
        return CommitStreamBatch(caught_up=False, read_to_ms=self.read_to_ms)


def test_a_stream_never_at_every_end_at_once_marks_the_time_it_has_read_everything_before() -> None:
    stream = BehindStream()
    rig = StreamRig(lambda kafka: stream)
    try:
        positioned_at = rig.clock.now()
        rig.supervise()
        wait_for(lambda: rig.context.commits.positioned, 5, "the stream to be positioned")
        time.sleep(0.6)
        assert _marks(rig) == [], "nothing known of a partition never read: no mark"

        stream.read_to_ms = to_millis(positioned_at) - 1_000
        time.sleep(0.6)
        assert _marks(rig) == [], "read only to before the stream was positioned: no mark"

        rig.clock.advance(10)
        stream.read_to_ms = to_millis(positioned_at) + 7_000
        wait_for(lambda: _marks(rig), 5, "a mark of the time read to")
        assert _marks(rig)[-1] == (positioned_at, positioned_at + timedelta(seconds=7))

        rig.clock.advance(2)
        stream.read_to_ms = to_millis(rig.clock.now()) + 5_000  # a broker clock ahead of ours
        wait_for(lambda: _marks(rig)[-1][1] != positioned_at + timedelta(seconds=7), 5, "the next mark")
        assert _marks(rig)[-1] == (positioned_at, rig.clock.now()), "never past the poll's start"
    finally:
        rig.commits.close()


def test_the_time_read_to_is_the_oldest_newest_record_of_the_partitions_not_at_their_end() -> None:
    assert read_to_ms({0, 1, 2}, {1}, {0: 5_000, 1: 9_000, 2: 7_000}) == 5_000
    assert read_to_ms({0, 1, 2}, {0, 1, 2}, {0: 5_000}) is None, "every end reached: the poll's start"
    assert read_to_ms({0, 1, 2}, {1}, {0: 5_000}) is None, "partition 2 neither read nor at its end"


def test_a_poll_that_did_not_read_to_the_end_leaves_the_stream_as_far_behind_as_its_newest_commit() -> None:
    batch = CommitStreamBatch(
        commits=[OffsetCommitRecord("g", "t", 0, 5, 1_000), OffsetCommitRecord("g", "t", 1, 6, 4_000)]
    )
    assert commits_job._behind_ms(batch, 10_000, 0) == 6_000
    assert commits_job._behind_ms(CommitStreamBatch(), 10_000, 6_000) == 6_000, "no commit read: as before"


def test_a_stream_behind_the_commits_gives_way_to_offset_fetch_and_is_not_reconciled() -> None:
    """A stream that cannot keep up holds offsets older than the cycle would date them: the cycle
    asks OffsetFetch, and leaves the stream's state alone (reconciled, the stream would apply its
    older commits on top and record them as rewinds)."""
    rig = Rig()
    rig.kafka.create_topic("orders", 1, 1)
    rig.kafka.produce("orders", 0, count=10)
    rig.kafka.commit("billing", {("orders", 0): 4})
    state = rig.context.commits
    state.positioned_at_end()
    state.reconcile({"billing": [CommittedOffset("billing", "orders", 0, 4)]}, time.monotonic())
    assert state.live
    rig.kafka.commit("billing", {("orders", 0): 9})  # the stream has not read it yet

    state.read_to(60_000)
    behind = rig.cycle()
    assert behind.counts["commits_streamed"] == 0 and behind.counts["stream_behind_ms"] == 60_000
    assert rig.lags()[("billing", "orders", 0)].lag == 1, "OffsetFetch's 9, not the stream's 4"
    assert state.committed(["billing"])["billing"] == [CommittedOffset("billing", "orders", 0, 4)], (
        "the stream's state is left to the stream"
    )
    assert "commits_reconciled" not in behind.counts

    state.read_to(2_000)  # caught up again: the stream's, and the reconciliation due since
    near = rig.cycle()
    assert near.counts["commits_streamed"] == 1 and near.counts["commits_reconciled"] == 1
    assert state.committed(["billing"])["billing"] == [CommittedOffset("billing", "orders", 0, 9)]
