"""The end offsets job: every allowed partition's end offset listed every
`collect.end_offsets_refresh_seconds` (1 s) between two cycles of the offsets job, in its own
thread per cluster, so that the offset lag users read is that old, not as old as the last offsets
cycle (15 s, and 20-30 s at 100,000 group-partitions, where a cycle takes longer than its
interval). With the commit stream's mark (`monitor.collect.jobs.commits`), both sides of the
offset lag the API, the pages and the Burrow endpoints serve are a second old
(`monitor.store.fresh_lag`).

One ListOffsets request per leader, of the latest offsets only (`AdminApi.list_end_offsets`),
for the partitions of the metadata job's last topology that the watched groups have committed
offsets on (`ClusterContext.consumed`, the offsets job's last cycle: only those have a lag to
serve). A listing that takes longer than half the period stretches it (`rest_seconds`). What
is written is what changed (`EndOffsetTracker`): each partition's end offset when it moved, and
the listing's time for the cluster, which every partition answered holds as of; a quiet cluster
costs one row a second. The history of end offsets stays the offsets job's (`partition_offsets`,
every cycle); nothing here is an input of the evaluation.

Failure policy: a partition that does not answer keeps its last end offset, marked missed (its
lag is as old as it was when last answered; the offsets job's next cycle is newer); a cluster
that does not answer is logged once per change of the reason and its partitions are missed; while
writes wait for PostgreSQL the refresh pauses (the offsets job's batches are what the queue
holds) and writes the whole listing again after. The scheduled run (every
`intervals.offsets_seconds`) is the thread's supervisor (`monitor.collect.supervised`): it starts
it, reports what it did since the previous run and restarts it when it stopped on an error.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from monitor.collect.context import ClusterContext, CollectorJob, Topology
from monitor.collect.supervised import SupervisedThread
from monitor.core.clock import to_millis
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import EndOffsetRefresh, TopicPartition
from monitor.store.runs import Run
from monitor.store.samples import write_end_offset_refresh

log = logging.getLogger(__name__)


def rest_seconds(period: float, took: float) -> float:
    """The wait before the next listing: the rest of the period, and at least as long as the last
    listing took, so that listing a fleet too large for the period takes at most half the thread's
    time (the period stretches instead)."""
    return max(period - took, took, 0.0)


class EndOffsetTracker:
    """What the store holds of one cluster's refreshed end offsets, so that each listing writes
    only what changed (pure: no I/O)."""

    def __init__(self) -> None:
        self._held: dict[TopicPartition, int] = {}
        self._missed: set[TopicPartition] = set()
        self._listed_ms: int | None = None

    def forget(self) -> None:
        """The store may not hold what this says (writes were skipped): the next listing replaces
        the cluster's rows."""
        self._held, self._missed, self._listed_ms = {}, set(), None

    def refresh(
        self, listed_ms: int, asked: Sequence[TopicPartition], ends: Mapping[TopicPartition, int]
    ) -> EndOffsetRefresh:
        """What a listing at `listed_ms` of the partitions `asked`, of which `ends` answered,
        changes in the store; the tracker then holds it."""
        previous = self._listed_ms
        replace = previous is None
        wanted = set(asked)
        held, missed_before = self._held, self._missed
        changed = {
            key: end
            for key, end in ends.items()
            if key in wanted and (key in missed_before or held.get(key) != end)
        }
        missed: dict[TopicPartition, int] = {}
        if previous is not None:
            lost = [key for key in wanted if key not in ends and key in held and key not in missed_before]
            missed = dict.fromkeys(lost, previous)
        gone = [key for key in held if key not in wanted]
        for key in gone:
            del held[key]
            missed_before.discard(key)
        held.update(changed)
        missed_before.difference_update(changed)
        missed_before.update(missed)
        self._listed_ms = listed_ms
        return EndOffsetRefresh(listed_ms, len(wanted), changed, missed, [] if replace else gone, replace)


@dataclass
class _Tally:
    """What the thread did since the supervisor last looked."""

    listings: int = 0
    rows_written: int = 0
    paused: int = 0
    """Refreshes not made because writes waited for PostgreSQL."""
    missed: int = 0
    """Partitions missed by the last listing."""
    listing_ms: list[int] = field(default_factory=list)


class EndOffsetRefresher:
    """The end offsets job of one cluster: a supervised thread listing its end offsets."""

    def __init__(self, context: ClusterContext) -> None:
        self._ctx = context
        period = context.config.end_offsets_refresh_seconds
        self._thread = SupervisedThread(context, "end-offsets", self._loop, period)
        self._tracker = EndOffsetTracker()
        self._lock = threading.Lock()
        self._tally = _Tally()
        self._failure: BaseException | None = None
        self._unanswered: str | None = None
        """Why the cluster did not answer the last listing (None: it did)."""
        self._asked: tuple[Topology, frozenset[TopicPartition], list[TopicPartition]] | None = None
        """The partitions to list, made again only when the topology or the consumed ones change."""
        context.closers.append(self._thread.close)

    def __call__(self, run: Run) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            run.problem(f"the end offsets' refresh stopped ({failure}); starting it again")
        self._thread.supervise()
        with self._lock:
            tally, self._tally = self._tally, _Tally(missed=self._tally.missed)
        run.count("listings", tally.listings)
        run.count("rows_written", tally.rows_written)
        run.count("paused_for_store", tally.paused)
        run.count("partitions_missed", tally.missed)
        if tally.listing_ms:
            run.count("listing_ms_median", round(statistics.median(tally.listing_ms)))
            run.count("listing_ms_max", max(tally.listing_ms))

    def _loop(self) -> None:
        ctx, stop = self._ctx, self._thread.stop
        period = ctx.config.end_offsets_refresh_seconds
        try:
            while not stop.is_set():
                if self._thread.unsupervised():
                    log.info("%s: the end offsets' refresh stops: its runs stopped", ctx.cluster.name)
                    return
                began = ctx.clock.monotonic()
                self._refresh()
                stop.wait(rest_seconds(period, ctx.clock.monotonic() - began))
        except Exception as exc:  # the supervisor reports it and starts the thread again
            log.exception("%s: the end offsets' refresh stopped", ctx.cluster.name)
            self._failure = exc

    def _refresh(self) -> None:
        ctx = self._ctx
        topology, consumed = ctx.topology, ctx.consumed
        if topology is None or consumed is None:  # no metadata or no offsets cycle yet
            return
        if ctx.writer.pending_writes:
            self._tracker.forget()
            with self._lock:
                self._tally.paused += 1
            return
        asked = self._partitions(topology, consumed)
        listed_at = ctx.clock.now()
        began = ctx.clock.monotonic()
        try:
            ends = ctx.admin.list_end_offsets(asked, topology.leaders).value
            self._answered()
        except KafkaUnavailableError as exc:
            self._unanswered_now(str(exc))
            ends = {}
        took_ms = round((ctx.clock.monotonic() - began) * 1000)
        refresh = self._tracker.refresh(to_millis(listed_at), asked, ends)
        cluster = ctx.cluster.name

        def write(conn: Connection, replay: bool) -> object:
            return write_end_offset_refresh(conn, cluster, refresh)

        rows = len(refresh.changed) + len(refresh.missed)
        if not ctx.writer.submit(f"{cluster}:end offsets", rows + 1, write):
            self._tracker.forget()
        with self._lock:
            tally = self._tally
            tally.listings += 1
            tally.rows_written += rows
            tally.missed = refresh.partitions - len(ends)
            tally.listing_ms.append(took_ms)

    def _partitions(self, topology: Topology, consumed: frozenset[TopicPartition]) -> list[TopicPartition]:
        """The topology's partitions a watched group reads, kept while both stay the same objects
        (the jobs replace them, never change them)."""
        kept = self._asked
        if kept is None or kept[0] is not topology or kept[1] is not consumed:
            kept = self._asked = (topology, consumed, [k for k in topology.partitions if k in consumed])
        return kept[2]

    def _answered(self) -> None:
        if self._unanswered is not None:
            log.info("%s: the end offsets' refresh reaches the cluster again", self._ctx.cluster.name)
        self._unanswered = None

    def _unanswered_now(self, reason: str) -> None:
        if reason != self._unanswered:
            log.warning(
                "%s: the end offsets' refresh got no answer (%s); the lag served is as old as the "
                "offsets job's last cycle until it does",
                self._ctx.cluster.name,
                reason,
            )
        self._unanswered = reason


JOB = CollectorJob(
    name="end_offsets",
    build=EndOffsetRefresher,
    interval=lambda intervals: intervals.offsets_seconds,
    tables=("refreshed_end_offsets", "end_offset_refreshes"),
    first_run_in=0.0,
    enabled=lambda config: config.end_offsets_refresh_seconds > 0,
)
