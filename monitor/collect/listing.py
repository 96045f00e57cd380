"""Steps 1-3 of the offsets job (`monitor.collect.jobs.offsets`): what Kafka says in a cycle.

The allowed groups are listed (the previous ones stand in when ListGroups fails), described beside
the rest, their committed offsets fetched (or taken from the commit stream while it is live, with
OffsetFetch every `collect.commit_reconcile_seconds` to reconcile it), and the allowed partitions'
offsets listed beside them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from monitor.collect.context import ClusterContext, Topology
from monitor.collect.lag import KnownEnd, last_known_ends
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import (
    CommittedOffset,
    EndOffsetHeldBack,
    GroupDescription,
    ListedOffsets,
    Partial,
    PartitionOffsets,
    TopicPartition,
)
from monitor.store.runs import Run

log = logging.getLogger(__name__)

STREAM_BEHIND_SECONDS = 5.0
"""A commit stream further behind the commits than this (`CommitState.behind_ms`: it cannot read
them as fast as they come, on a saturated machine) is not where a cycle takes its committed
offsets: they would be that old while the cycle dates them now. OffsetFetch answers them
instead, and does not reconcile the stream's state (the stream would then apply its older commits
on top, and record them as rewinds); the stream goes on recording every commit, late."""
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


class Lister:
    """Steps 1-3 of one cluster's offsets job, with what they remember across cycles."""

    def __init__(self, context: ClusterContext) -> None:
        self._ctx = context
        self._known_groups: set[str] | None = None  # None: never listed successfully
        self._listed = False  # this cycle listed the groups (else the known ones stand in)
        self._reconciled_at = float("-inf")  # monotonic time of the last OffsetFetch
        # Describing the groups and listing the partitions' offsets run beside the committed
        # offsets, on threads kept from cycle to cycle.
        self._beside = ThreadPoolExecutor(2, thread_name_prefix=f"offsets-{context.cluster.name}")
        context.closers.append(lambda: self._beside.shutdown(wait=False))

    def ask(self, run: Run, previous: Mapping[TopicPartition, PartitionOffsets]) -> Listing:
        """Steps 1-3: groups, their descriptions and committed offsets, and partition offsets
        (`previous`: the partitions' offsets listed last, whose max timestamps stand)."""
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
        # The stream's committed offsets are taken before the end offsets are asked for, so a
        # commit it reads meanwhile cannot look ahead of its partition's end (DOMAIN.md section 1).
        streamed_offsets = self._streamed(group_ids)
        listing = self._beside.submit(admin.list_offsets, topology.partitions, topology.leaders, previous)
        committed_result, streamed = self._committed(run, group_ids, streamed_offsets)
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
        allowed = {topic for topic in allowed if ctx.watches_topic(topic)}
        committed = [c for offsets in answered for c in offsets if c.topic in allowed]
        groups_answered = frozenset(
            group_ids if streamed else committed_result.value if committed_result is not None else ()
        )
        listed_groups = frozenset(group_ids) if self._listed else None
        answered_any = committed_result is not None
        return Listing(described, committed, answered_any, streamed, listed, listed_groups, groups_answered)

    def _streamed(self, group_ids: list[str]) -> dict[str, list[CommittedOffset]] | None:
        """The groups' committed offsets from the commit stream's state; None while it is not live
        or is more than `STREAM_BEHIND_SECONDS` behind the commits."""
        commits = self._ctx.commits
        return commits.committed(group_ids) if commits.live and not self._behind() else None

    def _behind(self) -> bool:
        return self._ctx.commits.behind_ms > STREAM_BEHIND_SECONDS * 1000

    def _committed(
        self, run: Run, group_ids: list[str], streamed: dict[str, list[CommittedOffset]] | None
    ) -> tuple[Partial[dict[str, list[CommittedOffset]]] | None, bool]:
        """Step 2: (the groups' committed offsets, None when no coordinator answered; whether
        they came from the commit stream). `streamed`, the stream's, when it is live; OffsetFetch
        when it is not, or when a reconciliation is due: its answer then seeds or checks the
        stream's state, unless the stream is behind (`STREAM_BEHIND_SECONDS`) (the cycle keeps the
        stream's offsets, taken before the end offsets; a correction shows in the next cycle)."""
        ctx = self._ctx
        commits = ctx.commits
        due = time.monotonic() - self._reconciled_at >= ctx.config.commit_reconcile_seconds
        if streamed is not None and not due:
            return Partial(streamed, {}), True
        asked_at = time.monotonic()
        try:
            result = ctx.admin.committed_offsets(group_ids)
        except KafkaUnavailableError as exc:
            run.problem(f"no committed offsets this cycle: {exc}")
            return (Partial(streamed, {}), True) if streamed is not None else (None, False)
        behind = self._behind()
        if behind:
            run.count("stream_behind_ms", commits.behind_ms)
        elif commits.positioned:
            run.count("commits_reconciled", commits.reconcile(result.value, asked_at))
            self._reconciled_at = asked_at
        if streamed is not None:
            return Partial(streamed, result.errors), True
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
        described = ctx.admin.describe_topics(ctx.allowed_topics(), skip_unknown=True)
        ctx.topology = Topology.of(described, ctx.clock.now())
        return ctx.topology


class HeldBackEnds:
    """The end offsets of partitions whose leader holds the high watermark back (under min ISR):
    the last known end of each stands in while it stays held back (a partition that cannot move
    has not failed), from the previous listing or the store; said in the log once per change of
    the set."""

    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        self.ends: dict[TopicPartition, KnownEnd] = {}
        """The known end of each partition held back now."""
        self.previous_listing: tuple[dict[TopicPartition, PartitionOffsets], int] = ({}, 0)
        """The partitions' offsets of the previous listing, and when (epoch ms)."""
        self._logged: frozenset[TopicPartition] = frozenset()

    def remember(self, held_back: Mapping[TopicPartition, EndOffsetHeldBack]) -> None:
        """Keep the known end of each held-back partition: remembered while it stays held back,
        else taken from the previous cycle's listing (a reference kept, not a copy)."""
        self.ends = {key: known for key, known in self.ends.items() if key in held_back}
        previous, previous_ms = self.previous_listing
        for key in held_back:
            po = previous.get(key)
            if key not in self.ends and po is not None:
                self.ends[key] = KnownEnd(po.start, po.end, previous_ms)

    def stand_ins(
        self, run: Run, listed: ListedOffsets, now_ms: int
    ) -> tuple[dict[TopicPartition, PartitionOffsets], dict[TopicPartition, KnownEnd]]:
        """Offsets standing in for the partitions whose end offset is held back, and the known
        ends they use. A held-back partition with no end known anywhere is a problem."""
        held_back = listed.held_back
        self.previous_listing = (listed.value, now_ms)
        stand_ins, used, unknown = last_known_ends(held_back, self.ends)
        run.problems_from(
            "offsets of partition",
            {
                f"{topic}:{partition}": f"{held_back[(topic, partition)].reason}, and no end offset is known"
                for topic, partition in unknown
            },
        )
        self._log(frozenset(held_back))
        return stand_ins, used

    def _log(self, held_back: frozenset[TopicPartition]) -> None:
        """Say once, with a count, which partitions have their end offset held back; again only
        when that set changes."""
        if held_back == self._logged:
            return
        self._logged = held_back
        name = self._cluster
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
