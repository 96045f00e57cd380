"""The metadata job: brokers, controller, topics and each partition's leader, replicas and ISR."""

from __future__ import annotations

import logging

from sqlalchemy import Connection

from monitor.core.clock import Clock
from monitor.core.records import TopicInfo
from monitor.core.settings import ClusterConfig
from monitor.kafka import KafkaAdmin
from monitor.store.buffer import BufferedWriter
from monitor.store.metadata import append_replica_states, upsert_brokers, upsert_cluster, upsert_topics
from monitor.store.runs import Run

log = logging.getLogger(__name__)


def collect_metadata(
    run: Run,
    cluster: ClusterConfig,
    admin: KafkaAdmin,
    clock: Clock,
    writer: BufferedWriter,
) -> list[TopicInfo]:
    """One metadata sample of `cluster`; returns the allowed topics as described.

    Fails the run when the cluster cannot be described (nothing is written: an unreachable cluster
    says nothing about which brokers are down). Topics are filtered by the cluster's allow/deny
    regexes; internal topics only when configured. Brokers missing from the metadata that were
    seen before are marked down.
    """
    info = admin.describe_cluster()
    names = [
        name
        for name in admin.list_topic_names(include_internal=cluster.include_internal_topics)
        if cluster.topics.accepts(name)
    ]
    topics = admin.describe_topics(names)
    described = {t.name for t in topics}
    for missing in sorted(set(names) - described):
        run.problem(f"topic {missing} could not be described")
    now = clock.now()
    run_id = run.run_id
    went_down: list[int] = []

    def write(conn: Connection, replay: bool) -> object:
        upsert_cluster(conn, cluster.name, ",".join(cluster.bootstrap_servers), info, now)
        went_down[:] = upsert_brokers(conn, cluster.name, info, now)
        upsert_topics(conn, cluster.name, topics, now)
        return append_replica_states(conn, cluster.name, topics, now, run_id, idempotent=replay)

    partitions = sum(len(t.partitions) for t in topics)
    writer.submit(f"{cluster.name}:metadata", partitions + len(topics) + len(info.brokers), write)
    if went_down:
        log.warning("cluster %s: broker(s) %s left the cluster metadata", cluster.name, went_down)
    run.count("brokers", len(info.brokers))
    run.count("brokers_went_down", len(went_down))
    run.count("topics", len(topics))
    run.count("partitions", partitions)
    run.count("under_replicated", sum(p.under_replicated for t in topics for p in t.partitions))
    run.count("offline", sum(p.offline for t in topics for p in t.partitions))
    return topics
