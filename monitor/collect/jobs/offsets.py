"""The offsets job: consumer groups, committed offsets, partition offsets and exact record
timestamps of one cluster, every `intervals.offsets_seconds`.

Steps, in this order (the commit stream's committed offsets are taken before the end offsets are
asked for, so that a commit can never look ahead of the end it is compared with, DOMAIN.md
section 1; OffsetFetch, while the stream is not live, runs beside the listing, and a commit it
answers after its partition's end was listed can sit above that end for one cycle, which the
`for:` of ConsumerCommittedBeyondEnd absorbs); steps 1-3, and the end offsets standing in for
partitions held back, are `monitor.collect.listing`'s:

1. list the allowed groups and describe them (state, members, assignments), the description
   running beside steps 2 and 3;
2. fetch their committed offsets, one request per group, concurrently; while the commits job
   streams them (`monitor.collect.jobs.commits`) they are taken from its state instead, and
   OffsetFetch runs only every `collect.commit_reconcile_seconds` to check it (and once after the
   stream is positioned, as the snapshot of what was committed before);
3. list start/end offsets of every allowed partition, batched, and the max timestamp of those
   whose offsets moved since the previous listing (the others keep the one listed then);
   What did not move since the previous cycle (committed offset, the partition's start and end
   offsets, append times read exactly) keeps its sample (`lag.unmoved_groups`,
   `lag.unmoved_partitions`); steps 4-6 work on the rest only;
4. recall what the cycle needs and memory lacks in one read of the store (`monitor.collect.recall`):
   persisted record timestamps, stored end offsets of held-back partitions, the end-offset history
   around lagging groups' offsets, and once after a start the last committed offsets;
5. read the record timestamps still missing from Kafka, within the cycle's time budget;
6. derive (pure, `monitor.collect.lag`) lag, with interpolation from the history where a record
   was not read, data-loss events and, while the stream is not live, commit observations
   sampled as changes between cycles, and hand one batch to the store (the observations go
   through the commits job, which owns that table). When the previous batch was written, the
   unmoved group offsets are not sent again: the store copies their rows (`CarriedGroupOffsets`),
   so the history keeps one row per group-partition per cycle. Committed offsets the cluster
   no longer has (their group not listed any more, or its offsets answered without them:
   `lag.gone_for_good`), and after a start every group missing from the first complete listing,
   are marked gone in the store (`GoneOffsets`): their alerts resolve as gone.

Cold start: the first cycle after a start answers the lag of every group-partition before
anything else: when the next cycle can be asked for at once (`ClusterContext.run_soon`, the
daemon), it reads no append time and no history, writes the latest rows (the answer), and asks
for it; the history rows of its group offsets follow in a transaction of their own, copied from
those latest rows on a thread of the job, while the run has ended (counted in `history_after`;
the next batch waits for them). Until a cycle leaves
no append time unread, the run counts those still to read in `filling` (shown on /collection)
and asks for the next cycle at once.

Failure policy: steps 1-3 failing as a whole fail the run (nothing written); a group or partition
that fails alone is a problem and the run is `partial`; timestamps missed by the budget are not a
problem (they fall back to interpolation and say so). Nor is a partition whose leader cannot give
its end offset because the high watermark is held back (under min ISR): a partition that cannot
move has not failed. Its last known end offset stands in (kept in memory; after a restart the
latest stored one), the sample says so (`end_offset_method`), the run counts it
(`end_offsets_last_known`), and the log says it once per change of the set of such partitions;
only one with no end offset known at all is a problem. The batch goes through the buffered writer,
so a PostgreSQL outage queues it instead of losing it. The store read of step 4 only saves work or
refines estimates: while PostgreSQL is unavailable the cycle goes on without it and counts it in
`store_reads_skipped`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from monitor.collect import lag
from monitor.collect.clients import ADMIN, READER
from monitor.collect.context import ClusterContext, CollectorJob
from monitor.collect.jobs.commits import record_observations
from monitor.collect.listing import HeldBackEnds, Lister, Listing
from monitor.collect.recall import StoreAnswer, StoreRequest, TimestampCache, read_store
from monitor.core.clock import to_millis
from monitor.core.records import (
    METHOD_EXACT,
    METHOD_INTERPOLATED,
    CarriedGroupOffsets,
    CommitObservation,
    CommittedOffset,
    GoneOffsets,
    GroupOffsetSample,
    OffsetsBatch,
    OffsetsHistory,
    PartitionOffsets,
    PartitionSample,
    RecordTimestamp,
    TopicPartition,
)
from monitor.store.buffer import BufferedWriter, is_unavailable
from monitor.store.runs import Run
from monitor.store.samples import write_offsets_batch, write_offsets_history

log = logging.getLogger(__name__)


@dataclass
class _Cycle:
    """One cycle's working set after steps 1-3: the partitions' offsets (held-back ones standing
    in with their last known end), what moved since the previous cycle and what did not, and the
    append times the moved ones need; step 4 adds what the store recalls."""

    listing: Listing
    now: datetime
    offsets: dict[TopicPartition, PartitionOffsets]
    kept_partitions: list[PartitionSample]
    moved_partitions: list[PartitionOffsets]
    kept: list[GroupOffsetSample]
    moved: list[CommittedOffset]
    targets: set[lag.Target]
    cold: bool
    """The first cycle after a start: no append time and no history is read."""
    last_known: dict[TopicPartition, lag.KnownEnd] = field(default_factory=dict)
    store_reads_skipped: int = 0


@dataclass(frozen=True)
class _Derived:
    """Step 6's result: the batch, the group offsets sampled now, the keys gone, the commits
    observed."""

    batch: OffsetsBatch
    sampled_now: list[GroupOffsetSample]
    gone: list[lag.GroupKey]
    observations: list[CommitObservation]


class OffsetsCollector:
    """The offsets job of one cluster, with what it remembers across cycles."""

    def __init__(self, context: ClusterContext) -> None:
        self._ctx = context
        self.cache = TimestampCache(context.config.timestamp_cache_entries)
        self._previous: dict[lag.GroupKey, int] | None = None
        self._previous_list: list[CommittedOffset] | None = None  # made `_previous` when needed
        self._swept = False  # a complete listing was sent to the store since the start (GoneOffsets)
        self._held_back = HeldBackEnds(context.cluster.name)
        self._held_back_seen: frozenset[TopicPartition] = frozenset()
        self._losses: frozenset[lag.GroupKey] = frozenset()
        self._group_samples: dict[lag.GroupKey, GroupOffsetSample] = {}  # of the previous cycle
        self._partition_samples: dict[TopicPartition, PartitionSample] = {}
        self._written_at: datetime | None = None  # when the previous batch was written, if it was
        self._cold = True  # the first cycle after a start leaves the append times for the next
        self._filling = True  # until a cycle leaves no append time to read
        self._lister = Lister(context)
        # The cold cycle's history rows are written on a thread of their own (`history_after`).
        self._historian = ThreadPoolExecutor(1, thread_name_prefix=f"history-{context.cluster.name}")
        self._history: Future[bool] | None = None
        context.closers.append(lambda: self._historian.shutdown(wait=False))
        self.critical_changed = False
        """The last cycle saw a group newly fallen off the log, or the set of partitions under
        min ISR change: inputs of critical rules."""

    def __call__(self, run: Run) -> None:
        self.collect(run)
        self._ctx.critical(run, "offsets", self.critical_changed)

    # -- the cycle ------------------------------------------------------------------------------

    def collect(self, run: Run) -> None:
        self.cache.next_cycle()
        listing = self._lister.ask(run, self._held_back.previous_listing[0])  # steps 1-3
        if listing.committed_answered:
            self._ctx.consumed = frozenset((c.topic, c.partition) for c in listing.committed)
        cycle = self._what_moved(listing)
        answer = self._recall_into(run, cycle)  # step 4
        timestamps, fresh, unread = self._timestamps(cycle.targets, cycle.cold)  # step 5
        made = self._derive(run, cycle, answer, timestamps, fresh)  # step 6: pure, then one write
        written = self._write(made.batch, cycle.cold)
        self._remember_samples(
            made.sampled_now, made.gone, made.batch.partitions, cycle.now if written else None
        )
        # After the batch: the observation times go into the latest group offset rows it wrote.
        record_observations(self._ctx, made.observations)
        self._count(run, cycle, made, written, (len(fresh), len(unread)), self._fill(run, unread))

    def _what_moved(self, listing: Listing) -> _Cycle:
        """What did not move since the previous cycle keeps its samples; the rest is worked on.
        The first cycle after a start leaves the append times and history for the next one,
        asked for at once when it can be: the lag of every group-partition comes first."""
        held_back = listing.listed.held_back
        self._held_back.remember(held_back)
        offsets: dict[TopicPartition, PartitionOffsets] = dict(listing.listed.value)
        offsets.update(lag.last_known_ends(held_back, self._held_back.ends)[0])
        kept_partitions, moved_partitions = lag.unmoved_partitions(
            offsets.values(), self._partition_samples, held_back
        )
        kept, moved = lag.unmoved_groups(listing.committed, offsets, self._group_samples)
        cold = self._cold and self._ctx.run_soon is not None
        self._cold = False
        return _Cycle(
            listing, self._ctx.clock.now(), offsets, kept_partitions, moved_partitions, kept, moved,
            lag.moved_targets(moved, moved_partitions, offsets), cold,
        )  # fmt: skip

    def _recall_into(self, run: Run, cycle: _Cycle) -> StoreAnswer:
        """Step 4: what the store recalls joins the cycle (end offsets standing in for partitions
        held back, their targets, the cached timestamps, the last commits after a start)."""
        recalled, cycle.store_reads_skipped = self._recall(
            cycle.listing, cycle.moved, cycle.offsets, cycle.targets, cycle.now, cycle.cold
        )
        self._held_back.ends.update(recalled.ends)
        stand_ins, cycle.last_known = self._held_back.stand_ins(
            run, cycle.listing.listed, to_millis(cycle.now)
        )
        recalled_ends = {key: po for key, po in stand_ins.items() if key not in cycle.offsets}
        cycle.offsets.update(stand_ins)
        if recalled_ends:
            cycle.moved_partitions += recalled_ends.values()
            cycle.targets |= lag.moved_targets(
                [c for c in cycle.moved if (c.topic, c.partition) in recalled_ends], [], cycle.offsets
            )
            cycle.targets |= lag.partition_targets(recalled_ends.values())
        self.cache.put_many(recalled.timestamps.values())
        self.cache.learn_marks(recalled.marks)
        if recalled.previous_commits is not None:
            self._previous, self._previous_list = recalled.previous_commits, None
        return recalled

    def _derive(
        self,
        run: Run,
        cycle: _Cycle,
        answer: StoreAnswer,
        timestamps: Mapping[lag.Target, RecordTimestamp],
        fresh: list[RecordTimestamp],
    ) -> _Derived:
        """Step 6's pure part: the samples, what is gone, the observed commits and the batch."""
        listing, now_ms = cycle.listing, to_millis(cycle.now)
        sampled_now, losses = lag.group_samples(
            cycle.moved, cycle.offsets, timestamps, answer.history, now_ms
        )
        gone = lag.gone_keys(self._group_samples, cycle.kept, sampled_now)
        partition_samples = cycle.kept_partitions + lag.partition_samples(
            cycle.moved_partitions, timestamps, cycle.last_known
        )
        # While the stream observes commits, sampling observes none; before its snapshot, only
        # the changes it did not see itself (commits made before it was positioned).
        committed = listing.committed
        sampled = [] if listing.streamed else lag.observe_commits(self._previous_commits(), committed, now_ms)
        if listing.committed_answered:  # a cycle without committed offsets says nothing new
            self._previous, self._previous_list = None, committed
        batch = OffsetsBatch(
            cluster=self._ctx.cluster.name,
            sampled_at=cycle.now,
            run_id=run.run_id,
            partitions=partition_samples,
            groups=list(listing.described.value),
            group_offsets=cycle.kept + sampled_now,
            record_timestamps=fresh,
            data_loss=losses,
            carried=None if cycle.cold else self._carried(sampled_now, gone, cycle.now),
            gone=self._gone(gone, listing),
            history_after=cycle.cold,
        )
        return _Derived(batch, sampled_now, gone, self._ctx.commits.unobserved(sampled))

    def _write(self, batch: OffsetsBatch, cold: bool) -> bool:
        """Hand the batch to the buffered writer (after the previous cold batch's history rows);
        False: queued, not written now."""
        self._await_history()
        written = self._ctx.writer.submit(
            f"{self._ctx.cluster.name}:offsets", batch.row_count, _writer_for(batch)
        )
        if cold:
            self._write_history_after(batch)
        return written

    def _count(
        self, run: Run, cycle: _Cycle, made: _Derived, written: bool, read: tuple[int, int], filling: int
    ) -> None:
        """The run's counts (shown on /collection), and whether an input of a critical rule
        changed: a group newly fallen off the log, or the set of partitions under min ISR."""
        batch, listing = made.batch, cycle.listing
        held_back, losses, gone = listing.listed.held_back, batch.data_loss, batch.gone
        run.count("groups", len(batch.groups))
        run.count("group_partitions", len(listing.committed))
        run.count("group_partitions_moved", len(cycle.moved))
        run.count("partitions", len(cycle.offsets))
        run.count("end_offsets_last_known", len(cycle.last_known))
        _count_samples(run, batch.group_offsets)
        run.count("timestamps_needed", len(cycle.targets))
        run.count("timestamps_read", read[0])
        run.count("timestamps_unread", read[1])
        run.count("data_loss", len(losses))
        run.count("group_partitions_gone", len(gone.keys) if gone is not None else 0)
        lost = frozenset((e.group_id, e.topic, e.partition) for e in losses)
        self.critical_changed = bool(lost - self._losses) or frozenset(held_back) != self._held_back_seen
        self._losses, self._held_back_seen = lost, frozenset(held_back)
        run.count("commits_observed", len(made.observations))
        run.count("commits_streamed", int(listing.streamed))
        run.count("rows", batch.row_count)
        sent = len(made.sampled_now) if batch.carried is not None else len(batch.group_offsets)
        run.count("group_offsets_sent", sent)
        run.count("buffered", 0 if written else batch.row_count)
        run.count("buffer_dropped_rows_total", self._ctx.writer.dropped_rows)
        run.count("store_reads_skipped", cycle.store_reads_skipped)
        run.count("filling", filling)
        run.count("history_after", len(batch.group_offsets) if cycle.cold else 0)

    def _write_history_after(self, batch: OffsetsBatch) -> None:
        """The cold batch's history rows, from its latest rows, in a transaction of their own on
        the history thread: the run ends (its lag answered) without waiting for them. Through the
        buffered writer, after the batch, so an outage queues them behind it."""
        history = OffsetsHistory(batch.cluster, batch.sampled_at, batch.run_id, len(batch.group_offsets))
        label = f"{self._ctx.cluster.name}:offsets history"
        self._history = self._historian.submit(
            self._ctx.writer.submit, label, history.rows, _history_writer_for(history)
        )

    def _await_history(self) -> None:
        """The previous cold batch's history rows are written (or queued) before the next batch,
        which moves the latest rows they are copied from."""
        pending, self._history = self._history, None
        if pending is not None:
            pending.result()

    def _previous_commits(self) -> dict[lag.GroupKey, int]:
        """The committed offsets of the previous cycle that answered them, by key: made only for
        a cycle that samples commits (the stream not live), not for every cycle."""
        if self._previous_list is not None:
            self._previous = {(c.group_id, c.topic, c.partition): c.offset for c in self._previous_list}
            self._previous_list = None
        return self._previous or {}

    @property
    def filling(self) -> bool:
        """Whether append times read after a start are still to come (the first cycle leaves them
        all for the next ones)."""
        return self._filling

    def _fill(self, run: Run, unread: Collection[lag.Target]) -> int:
        """After a start, the append times left unread (all of them in the first cycle, then
        those the budget leaves) are still filling: how many, counted in the run; and the next
        cycle is asked for now rather than an interval later. Once a cycle leaves none, the job
        is filled, and unread times are the budget's (interpolated, not filling)."""
        if not self._filling:
            return 0
        if not unread:
            self._filling = False
            return 0
        if self._ctx.run_soon is not None:
            self._ctx.run_soon(JOB.name)
        return len(unread)

    def _gone(self, gone: list[lag.GroupKey], listing: Listing) -> GoneOffsets | None:
        """What the cluster no longer has of the keys this cycle does not sample, and after a
        start, the first complete listing of the groups (the rows of every other group are
        gone); None when nothing is."""
        keys = lag.gone_for_good(gone, listing.listed_groups, listing.answered)
        listed = None
        if not self._swept and listing.listed_groups is not None:
            listed, self._swept = sorted(listing.listed_groups), True
        return GoneOffsets(keys, listed) if keys or listed is not None else None

    def _carried(
        self, sampled_now: list[GroupOffsetSample], gone: list[lag.GroupKey], now: datetime
    ) -> CarriedGroupOffsets | None:
        """How the batch sends its group offsets: only the moved ones when the previous batch was
        written (its rows then hold the others), else all of them (None)."""
        since = self._written_at
        if since is None or since >= now:
            return None
        return CarriedGroupOffsets(since, sampled_now, gone)

    def _remember_samples(
        self,
        sampled_now: list[GroupOffsetSample],
        gone: list[lag.GroupKey],
        partitions: list[PartitionSample],
        written_at: datetime | None,
    ) -> None:
        """Keep this cycle's samples for the next one to compare with (updated in place: the
        unmoved samples are the ones already held), and when the batch was written (None: not
        written now, so its rows cannot be carried)."""
        for key in gone:
            del self._group_samples[key]
        self._group_samples.update((lag.key(s), s) for s in sampled_now)
        self._partition_samples = {(p.offsets.topic, p.offsets.partition): p for p in partitions}
        self._written_at = written_at

    # -- steps -----------------------------------------------------------------------------------

    def _recall(
        self,
        listing: Listing,
        moved: Iterable[CommittedOffset],
        offsets: Mapping[TopicPartition, PartitionOffsets],
        targets: Iterable[lag.Target],
        now: datetime,
        cold: bool,
    ) -> tuple[StoreAnswer, int]:
        """Step 4: what memory lacks for the moved samples, in one store read; (the answer, 1
        when the read was skipped because PostgreSQL is unavailable, else 0). A `cold` cycle
        asks for no append time and no history: the lag comes first."""
        request = StoreRequest(
            timestamps=[] if cold else [t for t in targets if self.cache.may_be_stored(t)],
            ends=[key for key in listing.listed.held_back if key not in self._held_back.ends],
            history=set() if cold else self._history_targets(moved, offsets),
            previous_commits=self._previous is None and self._previous_list is None,
            marks=not cold and not self.cache.marks_known,
        )
        if not request:
            return StoreAnswer(), 0
        writer = self._ctx.writer
        if not writer.available:
            return StoreAnswer(), 1
        try:
            with self._ctx.engine.connect() as conn:
                return read_store(conn, self._ctx.cluster.name, request, now), 0
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            return StoreAnswer(), 1

    def _history_targets(
        self, committed: Iterable[CommittedOffset], offsets: Mapping[TopicPartition, PartitionOffsets]
    ) -> set[lag.Target]:
        """The offsets of lagging groups whose append times memory does not hold: the history
        around them interpolates those the Kafka read may leave unread."""
        needed: set[lag.Target] = set()
        for c in committed:
            po = offsets.get((c.topic, c.partition))
            if po is None or c.offset >= po.end:
                continue
            oldest = (c.topic, c.partition, max(c.offset, po.start))
            if oldest not in self.cache:
                needed.add(oldest)
                if c.offset > po.start:
                    needed.add((c.topic, c.partition, c.offset - 1))
        return needed

    def _timestamps(
        self, targets: Collection[lag.Target], cold: bool
    ) -> tuple[dict[lag.Target, RecordTimestamp], list[RecordTimestamp], list[lag.Target]]:
        """Step 5: (everything known, the entries read from Kafka now, the targets left unread).
        A `cold` cycle reads none: what memory lacks is left for the next cycle."""
        known = self.cache.get_many(targets)
        missing = [t for t in targets if t not in known]
        fresh: list[RecordTimestamp] = []
        unread: list[lag.Target] = missing if cold else []
        if missing and not cold:
            resolved, unread = self._ctx.client(READER).read(
                missing, budget_seconds=self._ctx.config.timestamp_budget_seconds
            )
            # Only records that exist are cached: "no record at this offset yet" changes over time.
            fresh = [r for r in resolved.values() if r.record_offset is not None]
            self.cache.put_many(fresh)
            known.update(resolved)
        return known, fresh, unread


def _count_samples(run: Run, samples: Iterable[GroupOffsetSample]) -> None:
    """The run's counts of the group samples, in one pass."""
    lagging = exact = interpolated = clamped = 0
    for s in samples:
        if s.lag:
            lagging += 1
            exact += s.timestamp_method == METHOD_EXACT
        interpolated += s.timestamp_method == METHOD_INTERPOLATED
        clamped += s.lag_clamped
    run.count("lagging_group_partitions", lagging)
    run.count("exact", exact)
    run.count("interpolated", interpolated)
    run.count("lag_clamped", clamped)


def _writer_for(batch: OffsetsBatch) -> BufferedWriter.Write:
    def write(conn: Connection, replay: bool) -> object:
        return write_offsets_batch(conn, batch, idempotent=replay)

    return write


def _history_writer_for(history: OffsetsHistory) -> BufferedWriter.Write:
    def write(conn: Connection, replay: bool) -> object:
        return write_offsets_history(conn, history, idempotent=replay)

    return write


JOB = CollectorJob(
    name="offsets",
    build=OffsetsCollector,
    interval=lambda intervals: intervals.offsets_seconds,
    tables=(
        "partition_offsets",
        "latest_partition_offsets",
        "group_offsets",
        "latest_group_offsets",
        "group_states",
        "group_members",
        "record_timestamps",
        "data_loss_events",
    ),
    first_run_in=0.0,  # the lag's first answer: at once, beside the metadata job's first run
    clients=(ADMIN, READER),
)
