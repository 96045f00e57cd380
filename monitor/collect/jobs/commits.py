"""The commits job: every commit of one cluster read from `__consumer_offsets` as it is written
(as Burrow does), in its own thread per cluster.

Each commit that moves a committed offset becomes a `commit_observations` row at its exact
commit time, and the current committed offset in `CommitState`, which the offsets job computes
lag from instead of asking OffsetFetch every cycle. A commit of an unchanged offset (an idle
consumer's auto-commit, every second or so) becomes a row at most once per
`intervals.offsets_seconds`: enough to tell a consumer that still commits (stalled) from one
that stopped, without a row per commit. A tombstone (offset deleted or expired) removes the
committed offset; a group's tombstone (group deleted) removes all of its offsets.

Each poll's observations, and then the mark they complete (`_mark`), are written by a thread of
their own while the next polls read: what they read meanwhile is held and written together by the
next store (at most `HOLD_OBSERVATIONS`; beyond, the reading waits), one store at a time and in
the order read. A failed write stops the stream as a failed poll does.

Group metadata records are not stored: the group pages take a group's state, members and
protocol from DescribeGroups, which answers for classic and consumer-protocol groups alike and
says PreparingRebalance, while a classic group's record is written only when a generation
completes or the group empties, and consumer-protocol groups write records of their own types.

Start: the stream is positioned at the current end of the topic first; the offsets job's next
OffsetFetch is the snapshot of what was committed before (`CommitState.reconcile`), and the
stream applies everything after. OffsetFetch then runs only every
`collect.commit_reconcile_seconds` to check the stream.

Failure policy: reading the topic refused (ACLs) is logged once and the cluster falls back to
OffsetFetch every cycle (the run counts `stream_denied`, it is not a problem) while the thread
asks again after a backoff (`DENIED_RETRY_SECONDS`, doubling up to `DENIED_RETRY_MAX_SECONDS`),
so a grant takes effect without a restart (logged once too); a cluster that
does not answer is retried by the thread while the offsets job uses OffsetFetch; records that
cannot be decoded (a schema version this monitor does not know) are skipped, warned about once
per reason and counted (`records_skipped`); an unexpected error stops the thread, makes the run
failed with it, and the next run starts the stream again. The scheduled run (every
`intervals.offsets_seconds`) is the thread's supervisor: it starts it, reports what it did
since the previous run, and restarts it when it stopped. Runs happen only while this instance
holds the cluster's lease, so a thread whose runs stop coming (the lease went to another
instance) stops itself after `unsupervised_limit` and the new holder's stream takes over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from monitor.collect.clients import ClientKind
from monitor.collect.context import ClusterContext, CollectorJob
from monitor.collect.supervised import SupervisedThread
from monitor.core.backoff import backoff_seconds
from monitor.core.clock import to_millis
from monitor.core.errors import KafkaAuthorizationError, KafkaUnavailableError
from monitor.core.records import CommitObservation, CommitStreamBatch
from monitor.kafka import CommitStreamReader
from monitor.kafka.offsets_topic import WARNED_SKIPS
from monitor.kafka.protocol import CommitStream
from monitor.store.runs import Run
from monitor.store.samples import write_commit_mark, write_commit_observations
from monitor.store.samples.staging import to_datetime

log = logging.getLogger(__name__)

COMMIT_STREAM: ClientKind[CommitStream] = ClientKind(
    "commit_stream",
    lambda cluster, config: CommitStreamReader(cluster) if cluster.commit_stream else None,
)
"""The reader of `__consumer_offsets` (none when the cluster's `commit_stream` is off: committed
offsets then come from OffsetFetch alone)."""

POLL_SECONDS = 0.5
"""Longest wait for the next records; also how quickly the thread notices it should stop."""
RETRY_SECONDS = 2.0
"""Wait before positioning the stream again after the cluster did not answer."""
MARK_SECONDS = 0.5
"""Least time between two writes of how far the stream has read (`_mark`)."""
HOLD_OBSERVATIONS = 100_000
"""Most observations read while a store runs that wait to go with the next one; beyond this, the
reading waits for the store (memory stays bounded when PostgreSQL is slower than the commits)."""
DENIED_RETRY_SECONDS = 5.0
"""First wait before asking again after reading the topic was refused; doubles per refusal."""
DENIED_RETRY_MAX_SECONDS = 300.0
"""Longest wait between two attempts to read a refused topic."""


def denied_retry_delay(refusals: int) -> float:
    """Seconds to wait after the `refusals`-th refusal in a row (1, 2, ...)."""
    return backoff_seconds(refusals, DENIED_RETRY_SECONDS, DENIED_RETRY_MAX_SECONDS)


@dataclass
class _Tally:
    """What the thread did since the supervisor last looked."""

    commits: int = 0
    unchanged_commits_skipped: int = 0
    """Commits of an unchanged offset within an interval of its last observation: no row."""
    tombstones: int = 0
    groups_deleted: int = 0
    group_records: int = 0
    observations_written: int = 0
    observations_buffered: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    latency_ms: list[int] = field(default_factory=list)
    """Read time minus commit time of each commit (how far behind the stream is)."""


@dataclass
class _Held:
    """What the polls read while the store of the ones before ran: written together next."""

    observations: list[CommitObservation] = field(default_factory=list)
    last_poll: tuple[CommitStreamBatch, datetime, float] | None = None
    """The newest of those polls (batch, start, monotonic start): the mark they complete."""


class CommitStreamCollector:
    """The commits job of one cluster: a supervised thread reading its commit stream."""

    def __init__(self, context: ClusterContext) -> None:
        self._ctx = context
        self.state = context.commits
        self._stream: CommitStream | None = context.optional_client(COMMIT_STREAM)
        self._thread = SupervisedThread(context, "commits", self._loop, POLL_SECONDS * 4)
        self._stop = self._thread.stop
        self._lock = threading.Lock()
        self._tally = _Tally()
        self._denied: str | None = None
        """The refusal in force (None: the topic may be read)."""
        self._refusals = 0
        self._unpositioned: str | None = None
        """Why the last attempt to position the stream failed (None: it did not)."""
        self._failure: BaseException | None = None
        self._warned: set[str] = set()
        self._streaming_since: datetime | None = None
        """Since when the stream has read every commit without a gap: when it was last positioned
        at the end (or when an outage dropped observations since); None while not positioned."""
        self._marked = 0.0
        """The clock's monotonic time of the poll the last mark was written after."""
        self._dropped = 0
        """The writer's dropped writes when `_streaming_since` was taken."""
        self._writes: ThreadPoolExecutor | None = None
        """The thread that stores each poll's observations and mark, in order (`_poll_once`)."""
        self._storing: Future[None] | None = None
        """The store handed over last, while it runs."""
        self._held = _Held()
        context.closers.append(self.close)

    def __call__(self, run: Run) -> None:
        ctx = self._ctx
        if not ctx.cluster.commit_stream or self._stream is None:
            run.count("stream_enabled", 0)
            return
        run.count("stream_enabled", 1)
        if self._denied is not None:
            run.count("stream_denied", 1)
        failure, self._failure = self._failure, None
        if failure is not None:
            run.problem(f"the commit stream stopped ({failure}); starting it again")
        self._thread.supervise()
        self._report(run)

    def close(self) -> None:
        """Stop the thread (within about `POLL_SECONDS`)."""
        self._thread.close()
        self.state.stopped()

    def unsupervised_limit(self) -> float:
        """Seconds without a run after which the thread stops (`SupervisedThread`)."""
        return self._thread.unsupervised_limit()

    def _report(self, run: Run) -> None:
        with self._lock:
            tally, self._tally = self._tally, _Tally()
        run.count("stream_live", int(self.state.live))
        run.count("commits", tally.commits)
        run.count("unchanged_commits_skipped", tally.unchanged_commits_skipped)
        run.count("tombstones", tally.tombstones)
        run.count("groups_deleted", tally.groups_deleted)
        run.count("group_records", tally.group_records)
        run.count("commits_observed", tally.observations_written)
        run.count("buffered", tally.observations_buffered)
        run.count("records_skipped", sum(tally.skipped.values()))
        if tally.latency_ms:
            ordered = sorted(tally.latency_ms)
            run.count("commit_read_latency_ms_median", ordered[len(ordered) // 2])
            run.count("commit_read_latency_ms_max", ordered[-1])

    # -- the thread -------------------------------------------------------------------------------

    def _loop(self) -> None:
        name = self._ctx.cluster.name
        with ThreadPoolExecutor(1, thread_name_prefix=f"{name}-commit-writes") as writes:
            self._writes = writes
            try:
                self._read()
                self._settle()
            except Exception as exc:  # the supervisor reports it and starts the thread again
                log.exception("%s: the commit stream stopped", name)
                self._failure = exc
                self.state.stopped()
            finally:  # the pool's end waits for a store that runs; its failure is reported above
                self._storing, self._held = None, _Held()

    def _read(self) -> None:
        name = self._ctx.cluster.name
        while not self._stop.is_set():
            if self._thread.unsupervised():
                log.info("%s: the commit stream stops: its runs stopped (the lease moved)", name)
                self.state.stopped()
                return
            try:
                if not self.state.positioned and not self._position():
                    continue
                self._poll_once()
            except KafkaUnavailableError as exc:
                log.warning("%s: the commit stream lost the cluster (%s); positioning it again", name, exc)
                self.state.stopped()
            except KafkaAuthorizationError as exc:
                self.state.stopped()
                self._deny(str(exc))
                self._stop.wait(denied_retry_delay(self._refusals))

    def _position(self) -> bool:
        assert self._stream is not None  # the thread is only started with a stream
        self._settle()  # what was read before is stored, and marked, before the coverage starts again
        try:
            self._stream.seek_to_end()
        except KafkaUnavailableError as exc:
            if str(exc) != self._unpositioned:  # every RETRY_SECONDS: logged when it changes
                log.warning("%s: cannot position the commit stream yet: %s", self._ctx.cluster.name, exc)
            self._unpositioned = str(exc)
            self._stop.wait(RETRY_SECONDS)
            return False
        self._unpositioned = None
        self.state.positioned_at_end()
        self._streaming_since, self._dropped = self._ctx.clock.now(), self._ctx.writer.dropped_writes
        if self._denied is not None:
            log.info(
                "%s: reading __consumer_offsets is allowed again; commits are streamed again",
                self._ctx.cluster.name,
            )
            self._denied, self._refusals = None, 0
        log.info("%s: reading commits from __consumer_offsets as they are written", self._ctx.cluster.name)
        return True

    def _deny(self, message: str) -> None:
        """Record a refusal; logged when it is new or says something else than the last one."""
        self._refusals += 1
        if message != self._denied:
            log.warning(
                "%s; committed offsets come from OffsetFetch every cycle instead, and reading the "
                "topic is tried again after a backoff",
                message,
            )
        self._denied = message

    def _poll_once(self) -> None:
        ctx = self._ctx
        assert self._stream is not None
        polled_at, polled_mono = ctx.clock.now(), ctx.clock.monotonic()
        batch = self._stream.poll(POLL_SECONDS)
        now_ms = to_millis(ctx.clock.now())
        accepted = [c for c in batch.commits if ctx.watches_group(c.group_id) and ctx.watches_topic(c.topic)]
        deleted = {g.group_id for g in batch.groups if g.deleted and ctx.cluster.groups.accepts(g.group_id)}
        # A deleted group's offsets go first: a commit after the group's tombstone in this batch
        # (the group made again) stays, and its offset tombstones came before it anyway.
        self.state.forget_groups(deleted)
        repeat_after_ms = round(ctx.intervals.offsets_seconds * 1000)
        observations = self.state.apply(accepted, now_ms, repeat_after_ms)
        self.state.read_to(0 if batch.caught_up else _behind_ms(batch, now_ms, self.state.behind_ms))
        self._warn(batch.skipped)
        tombstones = sum(1 for c in accepted if c.offset is None)
        with self._lock:
            tally = self._tally
            tally.commits += len(accepted) - tombstones
            tally.unchanged_commits_skipped += len(accepted) - tombstones - len(observations)
            tally.tombstones += tombstones
            tally.groups_deleted += len(deleted)
            tally.group_records += len(batch.groups)
            for reason, count in batch.skipped.items():
                tally.skipped[reason] = tally.skipped.get(reason, 0) + count
            tally.latency_ms.extend(max(0, now_ms - o.observed_at_ms) for o in observations)
        # The store runs while the next polls read: writing the observations took most of a
        # loop's time at 100,000 group-partitions (docs/bench/fresh-lag.md). What they read
        # meanwhile goes with the next store, one store at a time and in order, so a mark
        # follows the observations it covers.
        held = self._held
        held.observations += observations
        held.last_poll = (batch, polled_at, polled_mono)
        storing = self._storing
        if storing is None or storing.done() or len(held.observations) >= HOLD_OBSERVATIONS:
            self._hand_over()

    def _hand_over(self) -> None:
        """Wait for the store that runs (raise what it raised), then start the next one with what
        is held."""
        storing, self._storing = self._storing, None
        if storing is not None:
            storing.result()
        held, self._held = self._held, _Held()
        if held.last_poll is not None:
            assert self._writes is not None  # set by the loop before any poll
            self._storing = self._writes.submit(self._store, held)

    def _settle(self) -> None:
        """Store everything read so far and wait for it."""
        self._hand_over()
        self._hand_over()

    def _store(self, held: _Held) -> None:
        """Write the held observations, then the mark they complete (in the store's thread)."""
        assert held.last_poll is not None
        written = self._write(held.observations)
        self._mark(*held.last_poll)
        with self._lock:
            if written:
                self._tally.observations_written += len(held.observations)
            else:
                self._tally.observations_buffered += len(held.observations)

    def _write(self, observations: list[CommitObservation]) -> bool:
        return record_observations(self._ctx, observations)

    def _mark(self, batch: CommitStreamBatch, polled_at: datetime, polled_mono: float) -> None:
        """Write how far the stream has read (`commit_stream_marks`), at most every
        `MARK_SECONDS`: every commit made since the stream was positioned (`streaming_since`) and
        before `read_until` is in the store, so a committed offset the offsets job sampled since
        then still holds unless a newer commit was stored (`monitor.store.fresh_lag`).
        `read_until` is the poll's start after a poll that read every partition of the topic to
        its end; otherwise the time before which every partition was read (the batch's
        `read_to_ms`, at most the poll's start): under a steady flow of commits a poll seldom finds
        every partition at its end at once, and the mark would stand still for tens of seconds
        while the stream keeps up within a few (docs/bench/fresh-lag.md). Not while writes wait
        for PostgreSQL (the mark in the store stays true of what it covers); observations dropped
        in an outage start the coverage again."""
        ctx = self._ctx
        writer = ctx.writer
        if self._streaming_since is None or not self.state.positioned:
            self._streaming_since = None
            return
        if writer.dropped_writes != self._dropped:
            self._streaming_since, self._dropped = ctx.clock.now(), writer.dropped_writes
        read_until = polled_at if batch.caught_up else None
        if read_until is None and batch.read_to_ms is not None:
            read_until = min(polled_at, to_datetime(batch.read_to_ms))
        if (
            read_until is None
            or read_until < self._streaming_since
            or polled_mono - self._marked < MARK_SECONDS
            or writer.pending_writes
        ):
            return
        self._marked = polled_mono
        cluster, streaming_since = ctx.cluster.name, self._streaming_since

        def write(conn: Connection, replay: bool) -> object:
            write_commit_mark(conn, cluster, streaming_since, read_until)
            return None

        writer.submit(f"{cluster}:commit mark", 1, write)

    def _warn(self, skipped: Mapping[str, int]) -> None:
        for reason, count in skipped.items():
            if reason in WARNED_SKIPS and reason not in self._warned:
                self._warned.add(reason)
                log.warning(
                    "%s: %d record(s) of __consumer_offsets skipped (%s); they are counted in the commits "
                    "job's records_skipped, and OffsetFetch reconciles the offsets they held",
                    self._ctx.cluster.name,
                    count,
                    reason,
                )


def _behind_ms(batch: CommitStreamBatch, now_ms: int, before: int) -> int:
    """How far a poll that did not read every partition to its end left the stream behind: now
    minus the newest commit time it read (what it was before when it read none with a time)."""
    newest = max(
        (c.commit_timestamp_ms for c in batch.commits if c.commit_timestamp_ms is not None), default=None
    )
    return before if newest is None else now_ms - newest


def record_observations(ctx: ClusterContext, observations: list[CommitObservation]) -> bool:
    """Hand commit observations to the store: the streamed ones, and the sampled ones of the
    offsets job while the stream is not live (this job owns `commit_observations` and
    `latest_commits`, written together, which readers see at once; the latest group offset rows
    are the offsets job's alone). True when the observations were written now, False when queued
    (PostgreSQL unavailable)."""
    if not observations:
        return True
    cluster = ctx.cluster.name

    def write(conn: Connection, replay: bool) -> object:
        return write_commit_observations(conn, cluster, observations)

    return ctx.writer.submit(f"{cluster}:commits", len(observations), write)


JOB = CollectorJob(
    name="commits",
    build=CommitStreamCollector,
    interval=lambda intervals: intervals.offsets_seconds,
    tables=("commit_observations", "commit_stream_marks"),
    first_run_in=0.0,
    clients=(COMMIT_STREAM,),
)
