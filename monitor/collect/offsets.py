"""The offsets job: consumer groups, committed offsets, partition offsets and exact record
timestamps of one cluster, every `intervals.offsets_seconds`.

Steps, in this order (committed offsets are read before end offsets so that a commit can never
look ahead of the end it is compared with, DOMAIN.md section 1):

1. list the allowed groups and describe them (state, members, assignments), the description
   running beside steps 2 and 3;
2. fetch their committed offsets, one request per group, concurrently;
3. list start/end/max-timestamp offsets of every allowed partition, batched;
4. work out which record timestamps are needed; take them from the cache (memory, then the
   `record_timestamps` table), read the rest from Kafka within the cycle's time budget;
5. interpolate from the persisted end-offset history what the budget left unread;
6. derive lag, data-loss events and commit observations, and hand one batch to the store.

Failure policy: steps 1-3 failing as a whole fail the run (nothing written); a group or partition
that fails alone is a problem and the run is `partial`; timestamps missed by the budget are not a
problem (they fall back to interpolation and say so). Nor is a partition whose leader cannot give
its end offset because the high watermark is held back (under min ISR): a partition that cannot
move has not failed. Its last known end offset stands in (kept in memory; after a restart the
latest stored one), the sample says so (`end_offset_method`), the run counts it
(`end_offsets_last_known`), and the log says it once per change of the set of such partitions;
only one with no end offset known at all is a problem. The batch goes through the buffered writer,
so a PostgreSQL outage queues it instead of losing it. The cycle's reads of the store (the
persisted timestamp cache, the end-offset history, the last committed offsets after a start) only
save work or refine estimates: while PostgreSQL is unavailable the cycle goes on without them and
counts each one it skipped in `store_reads_skipped`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy import Connection, Engine

from monitor.collect import lag
from monitor.core.clock import Clock, to_millis
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import (
    CommittedOffset,
    EndOffsetHeldBack,
    OffsetsBatch,
    Partial,
    PartitionOffsets,
    RecordTimestamp,
    TopicInfo,
    TopicPartition,
)
from monitor.core.settings import ClusterConfig, CollectConfig
from monitor.kafka import KafkaAdmin, RecordTimestampReader
from monitor.store.buffer import BufferedWriter, is_unavailable
from monitor.store.history import end_offset_brackets
from monitor.store.runs import Run
from monitor.store.samples import (
    cached_timestamps,
    latest_committed,
    latest_end_offsets,
    write_offsets_batch,
)

T = TypeVar("T")

log = logging.getLogger(__name__)

HISTORY_WINDOW = timedelta(days=7)
"""How far back the end-offset history is read for interpolation."""


class TimestampCache:
    """Record timestamps by (topic, partition, offset), least recently used evicted first.

    Records never change, so an entry is valid for as long as the record exists.
    """

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[lag.Target, RecordTimestamp] = OrderedDict()
        self._max = max_entries

    def get_many(self, keys: Iterable[lag.Target]) -> dict[lag.Target, RecordTimestamp]:
        found = {}
        for key in keys:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
                found[key] = value
        return found

    def put_many(self, values: Iterable[RecordTimestamp]) -> None:
        for value in values:
            key = (value.topic, value.partition, value.offset)
            self._entries[key] = value
            self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class Topology:
    """The allowed partitions of a cluster, as of the last metadata sample."""

    partitions: list[TopicPartition]
    observed_at: datetime
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    """Leader broker of each partition then: ListOffsets goes in chunks per leader."""

    @classmethod
    def of(cls, topics: Iterable[TopicInfo], observed_at: datetime) -> Topology:
        topics = list(topics)
        return cls(
            [(t.name, p.partition) for t in topics for p in t.partitions],
            observed_at,
            {(t.name, p.partition): p.leader for t in topics for p in t.partitions if p.leader is not None},
        )


class OffsetsCollector:
    def __init__(
        self,
        cluster: ClusterConfig,
        admin: KafkaAdmin,
        reader: RecordTimestampReader,
        engine: Engine,
        writer: BufferedWriter,
        clock: Clock,
        config: CollectConfig,
    ) -> None:
        self._cluster = cluster
        self._admin = admin
        self._reader = reader
        self._engine = engine
        self._writer = writer
        self._clock = clock
        self._config = config
        self._cache = TimestampCache(config.timestamp_cache_entries)
        self._previous: dict[lag.GroupKey, int] | None = None
        self._known_groups: set[str] | None = None  # None: never listed successfully
        self._store_reads_skipped = 0  # in the current cycle
        self._ends: dict[TopicPartition, lag.KnownEnd] = {}  # of the partitions held back now
        self._previous_listing: tuple[dict[TopicPartition, PartitionOffsets], int] = ({}, 0)
        self._held_back_logged: frozenset[TopicPartition] = frozenset()
        self._held_back_seen: frozenset[TopicPartition] = frozenset()
        self._losses: frozenset[lag.GroupKey] = frozenset()
        self.critical_changed = False
        """The last cycle saw a group newly fallen off the log, or the set of partitions under
        min ISR change: inputs of critical rules."""
        self.topology: Topology | None = None

    # -- the cycle ------------------------------------------------------------------------------

    def collect(self, run: Run) -> None:
        cluster = self._cluster
        self._store_reads_skipped = 0
        group_ids = self._group_ids(run)
        # Describing the groups needs nothing else of the cycle: it runs beside steps 2 and 3 (on
        # its own client), which saves its time (0.6 s for 500 groups) from every cycle.
        with ThreadPoolExecutor(1, thread_name_prefix=f"describe-{cluster.name}") as pool:
            describing = pool.submit(self._admin.describe_groups, group_ids)
            try:
                committed_result = self._admin.committed_offsets(group_ids)
            except KafkaUnavailableError as exc:
                run.problem(f"no committed offsets this cycle: {exc}")
                committed_result = None
            topology = self._topology()
            listed = self._admin.list_offsets(topology.partitions, topology.leaders)
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
        committed = [
            c
            for offsets in (committed_result.value.values() if committed_result is not None else ())
            for c in offsets
            if cluster.topics.accepts(c.topic)
        ]

        run.problems_from("offsets of partition", listed.errors)
        offsets: dict[TopicPartition, PartitionOffsets] = dict(listed.value)
        now = self._clock.now()
        now_ms = to_millis(now)
        stand_ins, last_known = self._last_known_ends(run, listed.value, listed.held_back, now_ms)
        offsets.update(stand_ins)

        targets = lag.partition_targets(offsets.values()) | lag.group_targets(committed, offsets)
        timestamps, fresh, unread = self._timestamps(targets)
        histories = self._histories(committed, offsets, timestamps, now)
        group_samples, losses = lag.group_samples(committed, offsets, timestamps, histories, now_ms)
        observations = lag.observe_commits(self._previous_commits(), committed, now_ms)
        if committed_result is not None:  # a cycle without committed offsets says nothing new
            self._previous = {(c.group_id, c.topic, c.partition): c.offset for c in committed}

        batch = OffsetsBatch(
            cluster=cluster.name,
            sampled_at=now,
            run_id=run.run_id,
            partitions=lag.partition_samples(offsets.values(), timestamps, last_known),
            groups=list(described.value),
            group_offsets=group_samples,
            commit_observations=observations,
            record_timestamps=fresh,
            data_loss=losses,
        )
        written = self._writer.submit(f"{cluster.name}:offsets", batch.row_count, _writer_for(batch))
        run.count("groups", len(described.value))
        run.count("group_partitions", len(committed))
        run.count("partitions", len(offsets))
        run.count("end_offsets_last_known", len(last_known))
        run.count("lagging_group_partitions", sum(1 for s in group_samples if s.lag))
        run.count("timestamps_needed", len(targets))
        run.count("timestamps_read", len(fresh))
        run.count("timestamps_unread", len(unread))
        run.count("exact", sum(1 for s in group_samples if s.lag and s.timestamp_method == "exact"))
        run.count("interpolated", sum(1 for s in group_samples if s.timestamp_method == "interpolated"))
        run.count("lag_clamped", sum(1 for s in group_samples if s.lag_clamped))
        run.count("data_loss", len(losses))
        lost = frozenset((e.group_id, e.topic, e.partition) for e in losses)
        self.critical_changed = (
            bool(lost - self._losses) or frozenset(listed.held_back) != self._held_back_seen
        )
        self._losses, self._held_back_seen = lost, frozenset(listed.held_back)
        run.count("commits_observed", len(observations))
        run.count("rows", batch.row_count)
        run.count("buffered", 0 if written else batch.row_count)
        run.count("buffer_dropped_rows_total", self._writer.dropped_rows)
        run.count("store_reads_skipped", self._store_reads_skipped)

    # -- steps -----------------------------------------------------------------------------------

    def _group_ids(self, run: Run) -> list[str]:
        """The allowed groups. ListGroups asks every broker; with one broker gone it fails as a
        whole, so the groups of the previous cycle stand in and the run is partial."""
        try:
            groups = [g for g in self._admin.list_group_ids() if self._cluster.groups.accepts(g)]
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
        topology = self.topology
        stale = timedelta(minutes=5)
        if topology is not None and self._clock.now() - topology.observed_at < stale:
            return topology
        names = [
            name
            for name in self._admin.list_topic_names(include_internal=self._cluster.include_internal_topics)
            if self._cluster.topics.accepts(name)
        ]
        self.topology = Topology.of(self._admin.describe_topics(names), self._clock.now())
        return self.topology

    def _last_known_ends(
        self,
        run: Run,
        listed: dict[TopicPartition, PartitionOffsets],
        held_back: dict[TopicPartition, EndOffsetHeldBack],
        now_ms: int,
    ) -> tuple[dict[TopicPartition, PartitionOffsets], dict[TopicPartition, lag.KnownEnd]]:
        """Offsets standing in for the partitions whose end offset is held back, and the known
        ends they use: remembered from an earlier cycle, else the latest stored sample. A held-back
        partition without either is a problem."""
        # Kept per partition only while its end is held back; the previous cycle's listing
        # (a reference, not a copy) is where a partition that just got held back is found.
        self._ends = {key: known for key, known in self._ends.items() if key in held_back}
        previous, previous_ms = self._previous_listing
        for key in held_back:
            po = previous.get(key)
            if key not in self._ends and po is not None:
                self._ends[key] = lag.KnownEnd(po.start, po.end, previous_ms)
        self._previous_listing = (listed, now_ms)
        missing = [key for key in held_back if key not in self._ends]
        if missing:
            stored = (
                self._read_store(lambda conn: latest_end_offsets(conn, self._cluster.name, missing)) or {}
            )
            self._ends.update(
                (key, lag.KnownEnd(start, end, to_millis(at))) for key, (start, end, at) in stored.items()
            )
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
        if not held_back:
            log.info("%s: every partition's leader gives its end offset again", self._cluster.name)
            return
        names = ", ".join(f"{t}:{p}" for t, p in sorted(held_back)[:10])
        more = f" and {len(held_back) - 10} more" if len(held_back) > 10 else ""
        log.warning(
            "%s: %d partition(s) under min ISR (their leader holds the high watermark back: %s%s): "
            "their end offsets are the last known; logged again when the set changes",
            self._cluster.name,
            len(held_back),
            names,
            more,
        )

    def _timestamps(
        self, targets: Collection[lag.Target]
    ) -> tuple[dict[lag.Target, RecordTimestamp], list[RecordTimestamp], list[lag.Target]]:
        """(everything known, the entries read from Kafka now, the targets left unread)."""
        known = self._cache.get_many(targets)
        missing = [t for t in targets if t not in known]
        if missing:
            from_db = (
                self._read_store(lambda conn: cached_timestamps(conn, self._cluster.name, missing)) or {}
            )
            self._cache.put_many(from_db.values())
            known.update(from_db)
            missing = [t for t in missing if t not in known]
        fresh: list[RecordTimestamp] = []
        unread: list[lag.Target] = []
        if missing:
            resolved, unread = self._reader.read(
                missing, budget_seconds=self._config.timestamp_budget_seconds
            )
            # Only records that exist are cached: "no record at this offset yet" changes over time.
            fresh = [r for r in resolved.values() if r.record_offset is not None]
            self._cache.put_many(fresh)
            known.update(resolved)
        return known, fresh, unread

    def _histories(
        self,
        committed: Iterable[CommittedOffset],
        offsets: dict[TopicPartition, PartitionOffsets],
        timestamps: dict[lag.Target, RecordTimestamp],
        now: datetime,
    ) -> dict[TopicPartition, list[tuple[int, int]]]:
        """End-offset history around the offsets of lagging groups whose timestamps were not read."""
        needed: set[lag.Target] = set()
        for c in committed:
            po = offsets.get((c.topic, c.partition))
            if po is None or c.offset >= po.end:
                continue
            oldest = max(c.offset, po.start)
            found = timestamps.get((c.topic, c.partition, oldest))
            if found is None or found.record_offset is None:
                needed.add((c.topic, c.partition, oldest))
                if c.offset > po.start:
                    needed.add((c.topic, c.partition, c.offset - 1))
        if not needed:
            return {}
        since = now - HISTORY_WINDOW
        history = (
            self._read_store(lambda conn: end_offset_brackets(conn, self._cluster.name, needed, since)) or {}
        )
        return {tp: [(end, to_millis(at)) for end, at in points] for tp, points in history.items()}

    def _previous_commits(self) -> dict[lag.GroupKey, int]:
        if self._previous is None:
            latest = self._read_store(lambda conn: latest_committed(conn, self._cluster.name))
            if latest is None:
                return {}  # asked again next cycle: a commit is observed once the previous is known
            self._previous = {key: offset for key, (offset, _) in latest.items()}
        return self._previous

    def _read_store(self, read: Callable[[Connection], T]) -> T | None:
        """`read` on a connection, or None when PostgreSQL is unavailable: known to be down by
        the writer (no connect attempt then), or found down now."""
        if not self._writer.available:
            self._store_reads_skipped += 1
            return None
        try:
            with self._engine.connect() as conn:
                return read(conn)
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            self._store_reads_skipped += 1
            return None


def _writer_for(batch: OffsetsBatch) -> BufferedWriter.Write:
    def write(conn: Connection, replay: bool) -> object:
        return write_offsets_batch(conn, batch, idempotent=replay)

    return write
