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
3. list start/end/max-timestamp offsets of every allowed partition, batched;
4. recall what the cycle needs and memory lacks in one read of the store (`monitor.collect.recall`):
   persisted record timestamps, stored end offsets of held-back partitions, the end-offset history
   around lagging groups' offsets, and once after a start the last committed offsets;
5. read the record timestamps still missing from Kafka, within the cycle's time budget;
6. derive (pure, `monitor.collect.lag`) lag, with interpolation from the history where a record
   was not read, data-loss events and, while the stream is not live, commit observations
   sampled as changes between cycles, and hand one batch to the store (the observations go
   through the commits job, which owns that table).

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.collect import lag
from monitor.collect.context import ClusterContext, CollectorJob, Topology
from monitor.collect.jobs.commits import record_observations
from monitor.collect.recall import StoreAnswer, StoreRequest, TimestampCache, read_store
from monitor.core.clock import to_millis
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import (
    METHOD_EXACT,
    METHOD_INTERPOLATED,
    CommittedOffset,
    EndOffsetHeldBack,
    GroupDescription,
    ListedOffsets,
    OffsetsBatch,
    Partial,
    PartitionOffsets,
    RecordTimestamp,
    TopicPartition,
)
from monitor.store.buffer import BufferedWriter, is_unavailable
from monitor.store.runs import Run
from monitor.store.samples import write_offsets_batch

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


class OffsetsCollector:
    """The offsets job of one cluster, with what it remembers across cycles."""

    def __init__(self, context: ClusterContext) -> None:
        self._ctx = context
        self.cache = TimestampCache(context.config.timestamp_cache_entries)
        self._previous: dict[lag.GroupKey, int] | None = None
        self._known_groups: set[str] | None = None  # None: never listed successfully
        self._ends: dict[TopicPartition, lag.KnownEnd] = {}  # of the partitions held back now
        self._previous_listing: tuple[dict[TopicPartition, PartitionOffsets], int] = ({}, 0)
        self._held_back_logged: frozenset[TopicPartition] = frozenset()
        self._held_back_seen: frozenset[TopicPartition] = frozenset()
        self._losses: frozenset[lag.GroupKey] = frozenset()
        self._reconciled_at = float("-inf")  # monotonic time of the last OffsetFetch
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

        recalled, skipped = self._recall(listing, offsets, now)  # step 4
        self._ends.update(recalled.ends)
        stand_ins, last_known = self._stand_ins(run, listing.listed, now_ms)
        offsets.update(stand_ins)
        self.cache.put_many(recalled.timestamps.values())
        if recalled.previous_commits is not None:
            self._previous = recalled.previous_commits

        targets = lag.partition_targets(offsets.values()) | lag.group_targets(listing.committed, offsets)
        timestamps, fresh, unread = self._timestamps(targets)  # step 5

        # step 6: pure computation, then one write
        committed = listing.committed
        group_samples, losses = lag.group_samples(committed, offsets, timestamps, recalled.history, now_ms)
        # While the stream observes commits, sampling observes none; before its snapshot, only
        # the changes it did not see itself (commits made before it was positioned).
        sampled = [] if listing.streamed else lag.observe_commits(self._previous or {}, committed, now_ms)
        observations = ctx.commits.unobserved(sampled)
        if listing.committed_answered:  # a cycle without committed offsets says nothing new
            self._previous = {(c.group_id, c.topic, c.partition): c.offset for c in committed}
        batch = OffsetsBatch(
            cluster=ctx.cluster.name,
            sampled_at=now,
            run_id=run.run_id,
            partitions=lag.partition_samples(offsets.values(), timestamps, last_known),
            groups=list(listing.described.value),
            group_offsets=group_samples,
            record_timestamps=fresh,
            data_loss=losses,
        )
        written = ctx.writer.submit(f"{ctx.cluster.name}:offsets", batch.row_count, _writer_for(batch))
        # After the batch: the observation times go into the latest group offset rows it wrote.
        record_observations(ctx, observations)

        run.count("groups", len(listing.described.value))
        run.count("group_partitions", len(committed))
        run.count("partitions", len(offsets))
        run.count("end_offsets_last_known", len(last_known))
        run.count("lagging_group_partitions", sum(1 for s in group_samples if s.lag))
        run.count("timestamps_needed", len(targets))
        run.count("timestamps_read", len(fresh))
        run.count("timestamps_unread", len(unread))
        run.count("exact", sum(1 for s in group_samples if s.lag and s.timestamp_method == METHOD_EXACT))
        run.count("interpolated", sum(1 for s in group_samples if s.timestamp_method == METHOD_INTERPOLATED))
        run.count("lag_clamped", sum(1 for s in group_samples if s.lag_clamped))
        run.count("data_loss", len(losses))
        lost = frozenset((e.group_id, e.topic, e.partition) for e in losses)
        self.critical_changed = bool(lost - self._losses) or frozenset(held_back) != self._held_back_seen
        self._losses, self._held_back_seen = lost, frozenset(held_back)
        run.count("commits_observed", len(observations))
        run.count("commits_streamed", int(listing.streamed))
        run.count("rows", batch.row_count)
        run.count("buffered", 0 if written else batch.row_count)
        run.count("buffer_dropped_rows_total", ctx.writer.dropped_rows)
        run.count("store_reads_skipped", skipped)

    # -- steps -----------------------------------------------------------------------------------

    def _list(self, run: Run) -> Listing:
        """Steps 1-3: groups, their descriptions and committed offsets, and partition offsets."""
        ctx = self._ctx
        admin = ctx.admin
        group_ids = self._group_ids(run)
        # Describing the groups needs nothing else of the cycle: it runs beside steps 2 and 3 (on
        # its own client), which saves its time (0.6 s for 500 groups) from every cycle.
        with ThreadPoolExecutor(1, thread_name_prefix=f"describe-{ctx.cluster.name}") as pool:
            describing = pool.submit(admin.describe_groups, group_ids)
            committed_result, streamed = self._committed(run, group_ids)
            topology = self._topology()
            listed = admin.list_offsets(topology.partitions, topology.leaders)
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
        committed = [
            c
            for offsets in (committed_result.value.values() if committed_result is not None else ())
            for c in offsets
            if ctx.cluster.topics.accepts(c.topic)
        ]
        return Listing(described, committed, committed_result is not None, streamed, listed)

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
        self, listing: Listing, offsets: Mapping[TopicPartition, PartitionOffsets], now: datetime
    ) -> tuple[StoreAnswer, int]:
        """Step 4: what memory lacks, in one store read; (the answer, 1 when the read was skipped
        because PostgreSQL is unavailable, else 0)."""
        committed = listing.committed
        targets = lag.partition_targets(offsets.values()) | lag.group_targets(committed, offsets)
        request = StoreRequest(
            timestamps=[t for t in targets if t not in self.cache],
            ends=[key for key in listing.listed.held_back if key not in self._ends],
            history=self._history_targets(committed, offsets),
            previous_commits=self._previous is None,
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
        self, targets: Collection[lag.Target]
    ) -> tuple[dict[lag.Target, RecordTimestamp], list[RecordTimestamp], list[lag.Target]]:
        """Step 5: (everything known, the entries read from Kafka now, the targets left unread)."""
        known = self.cache.get_many(targets)
        missing = [t for t in targets if t not in known]
        fresh: list[RecordTimestamp] = []
        unread: list[lag.Target] = []
        if missing:
            resolved, unread = self._ctx.reader.read(
                missing, budget_seconds=self._ctx.config.timestamp_budget_seconds
            )
            # Only records that exist are cached: "no record at this offset yet" changes over time.
            fresh = [r for r in resolved.values() if r.record_offset is not None]
            self.cache.put_many(fresh)
            known.update(resolved)
        return known, fresh, unread


def _writer_for(batch: OffsetsBatch) -> BufferedWriter.Write:
    def write(conn: Connection, replay: bool) -> object:
        return write_offsets_batch(conn, batch, idempotent=replay)

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
)
