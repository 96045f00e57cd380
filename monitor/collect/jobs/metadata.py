"""The metadata job: brokers, controller, topics and each partition's leader, replicas and ISR; and
the groups of types the monitor does not watch (share, streams ...), counted by type."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy import Connection

from monitor.collect.context import ClusterContext, CollectorJob, JobRun, Topology
from monitor.core.records import TopicInfo
from monitor.store.metadata import append_replica_states, upsert_brokers, upsert_cluster, upsert_topics
from monitor.store.runs import Run

log = logging.getLogger(__name__)

LOOK_AGAIN_SECONDS = 3.0
"""After a run that saw a change critical rules depend on, the metadata is read again this often..."""
LOOK_AGAIN_FOR_SECONDS = 30.0
"""...for this long: a broker's controlled shutdown moves its leaders away first and leaves the
metadata seconds later (a partition offline, then the broker gone), and in-sync replica sets
shrink one after the other; at the job's interval the rest of the change would be seen up to an
interval later, and an alert's `for:` would count from there."""


def collect_metadata(run: Run, ctx: ClusterContext) -> list[TopicInfo]:
    """One metadata sample of the cluster; returns the allowed topics as described.

    Fails the run when the cluster cannot be described (nothing is written: an unreachable cluster
    says nothing about which brokers are down). Topics are filtered by the cluster's allow/deny
    regexes; internal topics only when configured. Brokers missing from the metadata that were
    seen before are marked down, and those the controller no longer has registered (where the
    cluster says, Kafka 4.0+) unregistered: decommissioned, their alerts resolve as gone. Topics
    no longer listed are marked deleted (one listed but not described is a problem, not gone).
    """
    cluster = ctx.cluster
    info = ctx.admin.describe_cluster()
    names = ctx.allowed_topics()
    topics = ctx.admin.describe_topics(names, skip_unknown=True)
    described = {t.name for t in topics}
    for missing in sorted(set(names) - described):
        run.problem(f"topic {missing} could not be described")
    now = ctx.clock.now()
    run_id = run.run_id
    went_down: list[int] = []

    def write(conn: Connection, replay: bool) -> object:
        upsert_cluster(conn, cluster.name, ",".join(cluster.bootstrap_servers), info, now)
        went_down[:] = upsert_brokers(conn, cluster.name, info, now)
        upsert_topics(conn, cluster.name, topics, now, listed=names)
        return append_replica_states(conn, cluster.name, topics, now, run_id, idempotent=replay)

    partitions = sum(len(t.partitions) for t in topics)
    ctx.writer.submit(f"{cluster.name}:metadata", partitions + len(topics) + len(info.brokers), write)
    if went_down:
        log.warning("cluster %s: broker(s) %s left the cluster metadata", cluster.name, went_down)
    run.count("brokers", len(info.brokers))
    run.count("brokers_went_down", len(went_down))
    if info.registered is not None:
        run.count("brokers_registered", len(info.registered))
    run.count("topics", len(topics))
    run.count("partitions", partitions)
    run.count("under_replicated", sum(p.under_replicated for t in topics for p in t.partitions))
    run.count("offline", sum(p.offline for t in topics for p in t.partitions))
    return topics


def count_unwatched_groups(run: Run, ctx: ClusterContext, before: Mapping[str, str]) -> dict[str, str]:
    """Count the groups of other types the brokers list (`<type>_groups_not_watched`, e.g.
    share_groups_not_watched), logging once when they change; never fails the run."""
    unwatched = ctx.admin.list_unwatched_groups()
    for kind in sorted(set(unwatched.values())):
        run.count(f"{kind}_groups_not_watched", sum(1 for k in unwatched.values() if k == kind))
    if unwatched != before and unwatched:
        listed = ", ".join(f"{group} ({kind})" for group, kind in unwatched.items())
        log.info("cluster %s: groups this monitor does not watch: %s", ctx.cluster.name, listed)
    return unwatched


def build(ctx: ClusterContext) -> JobRun:
    """The metadata runner: it hands the offsets job the partitions to list (`ctx.topology`) and
    asks for an evaluation when a broker went, or a partition went offline or lost an in-sync
    replica (under min ISR is one of those); the cluster is then read again every
    LOOK_AGAIN_SECONDS for LOOK_AGAIN_FOR_SECONDS, beside the job's interval."""
    seen: frozenset[object] = frozenset()
    unwatched: dict[str, str] = {}
    changing_until = float("-inf")

    def run(record: Run) -> None:
        nonlocal seen, unwatched, changing_until
        topics = collect_metadata(record, ctx)
        unwatched = count_unwatched_groups(record, ctx, unwatched)
        ctx.topology = Topology.of(topics, ctx.clock.now())
        now_seen = frozenset(
            (t.name, p.partition, len(p.isr), p.offline)
            for t in topics
            for p in t.partitions
            if p.offline or p.under_replicated
        )
        grew = bool(now_seen - seen)
        seen = now_seen
        changed = record.counts.get("brokers_went_down", 0) > 0 or grew
        ctx.critical(record, "metadata", changed)
        now = ctx.clock.monotonic()
        if changed:
            changing_until = now + LOOK_AGAIN_FOR_SECONDS
        if now < changing_until and ctx.run_later is not None:
            ctx.run_later(JOB.name, LOOK_AGAIN_SECONDS)

    return run


JOB = CollectorJob(
    name="metadata",
    build=build,
    interval=lambda intervals: intervals.metadata_seconds,
    tables=("clusters", "brokers", "topics", "partitions", "replica_states"),
)
