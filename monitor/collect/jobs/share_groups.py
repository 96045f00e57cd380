"""The share-groups job (KIP-932, Kafka 4.1+): every share group the cluster's group filter
accepts, its state and members (ShareGroupDescribe), and each share partition's start offset
(SPSO), end offset and lag (DescribeShareGroupOffsets, ListOffsets), at the offsets job's
interval.

The lag is the broker's where it reports it (Kafka 4.2+, KIP-1226), else end - SPSO, an upper
bound (`monitor.core.share_groups.share_lag`); each row says which. The end offset is listed
either way: records arriving while the SPSO stands still is what tells a stalled group.

Failure policy: a cluster without share groups (older than 4.1, or the feature off) is an
answer, not a failure: the run is `ok`, counts `not_available`, the support row says why and the
log says it once (again only when it changes). The broker is then asked again only every
`RECHECK_SECONDS` (an upgrade or `share.version` turned on is seen within that); the runs in
between write the same answer and count `not_asked`. A group, or a partition's end offset, that failed
makes the run partial and the rest is written; no answer at all fails the run.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.collect.clients import ADMIN, ClientKind
from monitor.collect.context import ClusterContext, CollectorJob, JobRun
from monitor.core.records import TopicPartition
from monitor.core.share_groups import NOT_AVAILABLE, ShareGroups, share_lag
from monitor.kafka.protocol import ShareGroupApi
from monitor.kafka.share_groups import ShareGroupClient
from monitor.store.runs import Run
from monitor.store.samples.share_groups import OffsetRow, write_share_groups

log = logging.getLogger(__name__)

SHARE_GROUPS: ClientKind[ShareGroupApi] = ClientKind(
    "share_groups", lambda cluster, config: ShareGroupClient(cluster)
)
"""ListGroups (share type), ShareGroupDescribe and DescribeShareGroupOffsets (kafka-python)."""

_NO_CLIENT = ShareGroups(False, reason=f"{NOT_AVAILABLE}: no share-group client for this cluster")
RECHECK_SECONDS = 300.0
"""How long a cluster's "not available" answer stands before its brokers are asked again."""


class ShareGroupsJob:
    """One cluster's runner; remembers the last "not available" reason it logged, and the last
    such answer until it is due to be asked again."""

    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx
        self._told: str | None = None
        self._unavailable: tuple[ShareGroups, datetime] | None = None

    def __call__(self, run: Run) -> None:
        found = self._ask(run)
        self._tell(found)
        if not found.available:
            run.count("not_available", 1)
            self._write(run, found, [])
            return
        run.problems_from("share group", found.errors or {})
        rows = self._offset_rows(run, found)
        self._write(run, found, rows)
        run.count("share_groups", len(found.descriptions))
        run.count("share_partitions", len(rows))
        run.count("broker_lag", sum(1 for r in rows if r[6] == "broker"))

    def _ask(self, run: Run) -> ShareGroups:
        """The cluster's share groups, or its standing "not available" answer (not asked again
        until RECHECK_SECONDS after it was given)."""
        ctx, now = self._ctx, self._ctx.clock.now()
        if self._unavailable is not None and now < self._unavailable[1]:
            run.count("not_asked", 1)
            return self._unavailable[0]
        client = ctx.optional_client(SHARE_GROUPS)
        found = client.share_groups(ctx.watches_group) if client is not None else _NO_CLIENT
        self._unavailable = None if found.available else (found, now + timedelta(seconds=RECHECK_SECONDS))
        return found

    def _tell(self, found: ShareGroups) -> None:
        reason = None if found.available else found.reason
        if reason != self._told:
            name = self._ctx.cluster.name
            if reason is None:
                log.info("%s: share groups are available now", name)
            else:
                log.info("%s: share groups %s", name, reason)
            self._told = reason

    def _offset_rows(self, run: Run, found: ShareGroups) -> list[OffsetRow]:
        ctx = self._ctx
        offsets = [o for o in found.offsets if ctx.cluster.topics.accepts(o.topic)]
        partitions: list[TopicPartition] = sorted({(o.topic, o.partition) for o in offsets})
        ends: dict[TopicPartition, int] = {}
        if partitions:
            leaders = ctx.topology.leaders if ctx.topology is not None else None
            listed = ctx.admin.list_offsets(partitions, leaders=leaders)
            run.problems_from("end offset of", listed.errors)
            ends = {tp: o.end for tp, o in listed.value.items()}
        rows: list[OffsetRow] = []
        for o in offsets:
            end = ends.get((o.topic, o.partition))
            lag = share_lag(o.start_offset, end, o.broker_lag)
            rows.append((o.group_id, o.topic, o.partition, o.start_offset, end, lag.lag, lag.method))
        return rows

    def _write(self, run: Run, found: ShareGroups, rows: list[OffsetRow]) -> None:
        ctx = self._ctx
        cluster, now, run_id = ctx.cluster.name, ctx.clock.now(), run.run_id
        available = (found.available, found.reason)

        def write(conn: Connection, replay: bool) -> object:
            return write_share_groups(
                conn, cluster, now, run_id, available, found.descriptions, rows, idempotent=replay,
                listed=found.listed,
            )  # fmt: skip

        ctx.writer.submit(f"{cluster}:share_groups", len(found.descriptions) + len(rows) + 1, write)


def build(ctx: ClusterContext) -> JobRun:
    return ShareGroupsJob(ctx)


JOB = CollectorJob(
    name="share_groups",
    build=build,
    interval=lambda intervals: intervals.offsets_seconds,
    tables=("share_group_states", "share_group_offsets", "share_group_members", "share_group_support"),
    first_run_in=1.0,
    clients=(ADMIN, SHARE_GROUPS),
)
