"""The offsets job: consumer groups, committed offsets, partition offsets and exact record
timestamps of one cluster, every `intervals.offsets_seconds`.

Steps, in this order (committed offsets are read before end offsets so that a commit can never
look ahead of the end it is compared with, DOMAIN.md section 1):

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
import time
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.collect import lag
from monitor.collect.clients import ADMIN, READER
from monitor.collect.context import ClusterContext, CollectorJob, Topology
from monitor.collect.jobs.commits import record_observations
from monitor.collect.recall import StoreAnswer, StoreRequest, TimestampCache, read_store
from monitor.core.clock import to_millis
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import (
    METHOD_EXACT,
    METHOD_INTERPOLATED,
    CarriedGroupOffsets,
    CommittedOffset,
    EndOffsetHeldBack,
    GoneOffsets,
    GroupDescription,
    GroupOffsetSample,
    ListedOffsets,
    OffsetsBatch,
    OffsetsHistory,
    Partial,
    PartitionOffsets,
    PartitionSample,
    RecordTimestamp,
    TopicPartition,
)
from monitor.store.buffer import BufferedWriter, is_unavailable
from monitor.store.runs import Run
from monitor.store.samples import write_offsets_batch, write_offsets_history

log = logging.getLogger(__name__)

TOPOLOGY_STALE = timedelta(minutes=5)
"""A metadata sample older than this is not trusted for the partitions to list: they are described."""


@dataclass
class Listing:
    """What Kafka said in steps 1-3 of a cycle."""

    described: Partial[list[GroupDescription]]
    committed: list[CommittedOffset]
    committed_answered: bool
    """False when no committed offsets came back at all (the cycle says nothing about commits)."""
    streamed: bool
    """The committed offsets came from the commit stream, which observed every commit itself."""
    listed: ListedOffsets
    listed_groups: frozenset[str] | None = None
    """Every group of this cycle's complete listing (None: the listing failed)."""
    answered: frozenset[str] = frozenset()
    """The groups whose committed offsets this cycle has (all of them from the commit stream)."""


class OffsetsCollector:
    """The offsets job of one cluster, with what it remembers across cycles."""

    def __init__(self, context: ClusterContext) -> None:
        self._ctx = context
        self.cache = TimestampCache(context.config.timestamp_cache_entries)
        self._previous: dict[lag.GroupKey, int] | None = None
        self._previous_list: list[CommittedOffset] | None = None  # made `_previous` when needed
        self._known_groups: set[str] | None = None  # None: never listed successfully
        self._listed = False  # this cycle listed the groups (else the known ones stand in)
        self._swept = False  # a complete listing was sent to the store since the start (GoneOffsets)
        self._ends: dict[TopicPartition, lag.KnownEnd] = {}  # of the partitions held back now
        self._previous_listing: tuple[dict[TopicPartition, PartitionOffsets], int] = ({}, 0)
        self._held_back_logged: frozenset[TopicPartition] = frozenset()
        self._held_back_seen: frozenset[TopicPartition] = frozenset()
        self._losses: frozenset[lag.GroupKey] = frozenset()
        self._reconciled_at = float("-inf")  # monotonic time of the last OffsetFetch
        self._group_samples: dict[lag.GroupKey, GroupOffsetSample] = {}  # of the previous cycle
        self._partition_samples: dict[TopicPartition, PartitionSample] = {}
        self._written_at: datetime | None = None  # when the previous batch was written, if it was
        self._cold = True  # the first cycle after a start leaves the append times for the next
        self._filling = True  # until a cycle leaves no append time to read
        # Describing the groups and listing the partitions' offsets run beside the committed
        # offsets (steps 1-3), on threads kept from cycle to cycle.
        self._beside = ThreadPoolExecutor(2, thread_name_prefix=f"offsets-{context.cluster.name}")
        context.closers.append(lambda: self._beside.shutdown(wait=False))
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
        ctx = self._ctx
        listing = self._list(run)  # steps 1-3
        now = ctx.clock.now()
        now_ms = to_millis(now)
        held_back = listing.listed.held_back
        self._remember_ends(held_back)
        offsets: dict[TopicPartition, PartitionOffsets] = dict(listing.listed.value)
        offsets.update(lag.last_known_ends(held_back, self._ends)[0])
        # What did not move since the previous cycle keeps its samples; the rest is worked on.
        kept_partitions, moved_partitions = lag.unmoved_partitions(
            offsets.values(), self._partition_samples, held_back
        )
        kept, moved = lag.unmoved_groups(listing.committed, offsets, self._group_samples)
        targets = lag.moved_targets(moved, moved_partitions, offsets)

        # The first cycle after a start leaves the append times and history for the next one,
        # asked for at once, when it can be: the lag of every group-partition comes first.
        cold = self._cold and ctx.run_soon is not None
        self._cold = False
        recalled, skipped = self._recall(listing, moved, offsets, targets, now, cold)  # step 4
        self._ends.update(recalled.ends)
        stand_ins, last_known = self._stand_ins(run, listing.listed, now_ms)
        recalled_ends = {key: po for key, po in stand_ins.items() if key not in offsets}
        offsets.update(stand_ins)
        if recalled_ends:
            moved_partitions += recalled_ends.values()
            targets |= lag.moved_targets(
                [c for c in moved if (c.topic, c.partition) in recalled_ends], [], offsets
            )
            targets |= lag.partition_targets(recalled_ends.values())
        self.cache.put_many(recalled.timestamps.values())
        if recalled.previous_commits is not None:
            self._previous, self._previous_list = recalled.previous_commits, None

        timestamps, fresh, unread = self._timestamps(targets, cold)  # step 5

        # step 6: pure computation, then one write
        committed = listing.committed
        sampled_now, losses = lag.group_samples(moved, offsets, timestamps, recalled.history, now_ms)
        group_samples = kept + sampled_now
        gone = lag.gone_keys(self._group_samples, kept, sampled_now)
        gone_offsets = self._gone(gone, listing)
        partition_samples = kept_partitions + lag.partition_samples(moved_partitions, timestamps, last_known)
        # While the stream observes commits, sampling observes none; before its snapshot, only
        # the changes it did not see itself (commits made before it was positioned).
        sampled = [] if listing.streamed else lag.observe_commits(self._previous_commits(), committed, now_ms)
        observations = ctx.commits.unobserved(sampled)
        if listing.committed_answered:  # a cycle without committed offsets says nothing new
            self._previous, self._previous_list = None, committed
        batch = OffsetsBatch(
            cluster=ctx.cluster.name,
            sampled_at=now,
            run_id=run.run_id,
            partitions=partition_samples,
            groups=list(listing.described.value),
            group_offsets=group_samples,
            record_timestamps=fresh,
            data_loss=losses,
            carried=None if cold else self._carried(sampled_now, gone, now),
            gone=gone_offsets,
            history_after=cold,
        )
        self._await_history()
        written = ctx.writer.submit(f"{ctx.cluster.name}:offsets", batch.row_count, _writer_for(batch))
        if cold:
            self._write_history_after(batch)
        self._remember_samples(sampled_now, gone, partition_samples, now if written else None)
        # After the batch: the observation times go into the latest group offset rows it wrote.
        record_observations(ctx, observations)
        filling = self._fill(run, unread)

        run.count("groups", len(listing.described.value))
        run.count("group_partitions", len(committed))
        run.count("group_partitions_moved", len(moved))
        run.count("partitions", len(offsets))
        run.count("end_offsets_last_known", len(last_known))
        _count_samples(run, group_samples)
        run.count("timestamps_needed", len(targets))
        run.count("timestamps_read", len(fresh))
        run.count("timestamps_unread", len(unread))
        run.count("data_loss", len(losses))
        run.count("group_partitions_gone", len(gone_offsets.keys) if gone_offsets is not None else 0)
        lost = frozenset((e.group_id, e.topic, e.partition) for e in losses)
        self.critical_changed = bool(lost - self._losses) or frozenset(held_back) != self._held_back_seen
        self._losses, self._held_back_seen = lost, frozenset(held_back)
        run.count("commits_observed", len(observations))
        run.count("commits_streamed", int(listing.streamed))
        run.count("rows", batch.row_count)
        run.count("group_offsets_sent", len(sampled_now) if batch.carried is not None else len(group_samples))
        run.count("buffered", 0 if written else batch.row_count)
        run.count("buffer_dropped_rows_total", ctx.writer.dropped_rows)
        run.count("store_reads_skipped", skipped)
        run.count("filling", filling)
        run.count("history_after", len(group_samples) if cold else 0)

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

    def _list(self, run: Run) -> Listing:
        """Steps 1-3: groups, their descriptions and committed offsets, and partition offsets."""
        ctx = self._ctx
        admin = ctx.admin
        group_ids = self._group_ids(run)
        # Describing the groups needs nothing else of the cycle: it runs beside steps 2 and 3 (on
        # its own client), which saves its time (0.6 s for 500 groups) from every cycle. Should
        # step 2 or 3 fail the cycle, the description ends on its own, before the next one.
        describing = self._beside.submit(admin.describe_groups, group_ids)
        topology = self._topology()
        # Step 3 needs nothing of step 2 either (its own client again): the partitions' offsets
        # are listed while the coordinators answer OffsetFetch (a cold cycle at 100,000
        # group-partitions: 1.1 s one after the other, 0.9 s side by side, both decoding in
        # Python). The max timestamps are asked only of the partitions that moved since the
        # previous listing: the others keep theirs (`monitor.kafka.listoffsets`).
        listing = self._beside.submit(
            admin.list_offsets, topology.partitions, topology.leaders, self._previous_listing[0]
        )
        committed_result, streamed = self._committed(run, group_ids)
        listed = listing.result()
        # A broker that just died can leave every group request of this cycle unanswered (its
        # coordinators have not moved yet); the partitions on the other brokers are still
        # sampled, and the run is partial rather than failed.
        try:
            described = describing.result()
        except KafkaUnavailableError as exc:
            run.problem(f"no group description this cycle: {exc}")
            described = Partial([], {})
        run.problems_from("describe group", described.errors)
        if committed_result is not None:
            run.problems_from("committed offsets of group", committed_result.errors)
        run.problems_from("offsets of partition", listed.errors)
        answered = committed_result.value.values() if committed_result is not None else ()
        # The topic filter once per topic, not per committed offset (100,000 of them, on 10,000
        # topics at most): a pattern match costs microseconds.
        allowed = {c.topic for offsets in answered for c in offsets}
        allowed = {topic for topic in allowed if ctx.cluster.topics.accepts(topic)}
        committed = [c for offsets in answered for c in offsets if c.topic in allowed]
        groups_answered = frozenset(
            group_ids if streamed else committed_result.value if committed_result is not None else ()
        )
        listed_groups = frozenset(group_ids) if self._listed else None
        answered_any = committed_result is not None
        return Listing(described, committed, answered_any, streamed, listed, listed_groups, groups_answered)

    def _committed(
        self, run: Run, group_ids: list[str]
    ) -> tuple[Partial[dict[str, list[CommittedOffset]]] | None, bool]:
        """Step 2: (the groups' committed offsets, None when no coordinator answered; whether
        they came from the commit stream). OffsetFetch when the stream is not live or a
        reconciliation is due; its answer then seeds or checks the stream's state."""
        ctx = self._ctx
        commits = ctx.commits
        due = time.monotonic() - self._reconciled_at >= ctx.config.commit_reconcile_seconds
        if commits.live and not due:
            return Partial(commits.committed(group_ids), {}), True
        asked_at = time.monotonic()
        try:
            result = ctx.admin.committed_offsets(group_ids)
        except KafkaUnavailableError as exc:
            run.problem(f"no committed offsets this cycle: {exc}")
            return None, False
        if commits.positioned:
            run.count("commits_reconciled", commits.reconcile(result.value, asked_at))
            self._reconciled_at = asked_at
        return result, False

    def _group_ids(self, run: Run) -> list[str]:
        """The allowed groups. ListGroups asks every broker; with one broker gone it fails as a
        whole, so the groups of the previous cycle stand in and the run is partial."""
        self._listed = False
        try:
            groups = [g for g in self._ctx.admin.list_group_ids() if self._ctx.watches_group(g)]
        except KafkaUnavailableError as exc:
            if self._known_groups is None:
                raise
            run.problem(
                f"listing groups failed ({exc}); sampling the {len(self._known_groups)} groups seen before"
            )
            return sorted(self._known_groups)
        self._known_groups = set(groups)
        self._listed = True
        return groups

    def _topology(self) -> Topology:
        """The allowed partitions: from the last metadata sample when recent, else described now."""
        ctx = self._ctx
        topology = ctx.topology
        if topology is not None and ctx.clock.now() - topology.observed_at < TOPOLOGY_STALE:
            return topology
        ctx.topology = Topology.of(ctx.admin.describe_topics(ctx.allowed_topics()), ctx.clock.now())
        return ctx.topology

    def _remember_ends(self, held_back: Mapping[TopicPartition, EndOffsetHeldBack]) -> None:
        """Keep the known end of each held-back partition: remembered while it stays held back,
        else taken from the previous cycle's listing (a reference kept, not a copy)."""
        self._ends = {key: known for key, known in self._ends.items() if key in held_back}
        previous, previous_ms = self._previous_listing
        for key in held_back:
            po = previous.get(key)
            if key not in self._ends and po is not None:
                self._ends[key] = lag.KnownEnd(po.start, po.end, previous_ms)

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
            timestamps=[] if cold else [t for t in targets if t not in self.cache],
            ends=[key for key in listing.listed.held_back if key not in self._ends],
            history=set() if cold else self._history_targets(moved, offsets),
            previous_commits=self._previous is None and self._previous_list is None,
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

    def _stand_ins(
        self, run: Run, listed: ListedOffsets, now_ms: int
    ) -> tuple[dict[TopicPartition, PartitionOffsets], dict[TopicPartition, lag.KnownEnd]]:
        """Offsets standing in for the partitions whose end offset is held back, and the known
        ends they use. A held-back partition with no end known anywhere is a problem."""
        held_back = listed.held_back
        self._previous_listing = (listed.value, now_ms)
        stand_ins, used, unknown = lag.last_known_ends(held_back, self._ends)
        run.problems_from(
            "offsets of partition",
            {
                f"{topic}:{partition}": f"{held_back[(topic, partition)].reason}, and no end offset is known"
                for topic, partition in unknown
            },
        )
        self._log_held_back(frozenset(held_back))
        return stand_ins, used

    def _log_held_back(self, held_back: frozenset[TopicPartition]) -> None:
        """Say once, with a count, which partitions have their end offset held back; again only
        when that set changes."""
        if held_back == self._held_back_logged:
            return
        self._held_back_logged = held_back
        name = self._ctx.cluster.name
        if not held_back:
            log.info("%s: every partition's leader gives its end offset again", name)
            return
        names = ", ".join(f"{t}:{p}" for t, p in sorted(held_back)[:10])
        more = f" and {len(held_back) - 10} more" if len(held_back) > 10 else ""
        log.warning(
            "%s: %d partition(s) under min ISR (their leader holds the high watermark back: %s%s): "
            "their end offsets are the last known; logged again when the set changes",
            name,
            len(held_back),
            names,
            more,
        )

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
    first_run_in=1.0,
    clients=(ADMIN, READER),
)
