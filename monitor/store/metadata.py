"""Writes of the latest cluster metadata and of collection runs.

Data-access functions: each takes a connection inside the caller's transaction and never commits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, func, update
from sqlalchemy.dialects.postgresql import insert

from monitor.core.kafka_features import version_text
from monitor.core.records import ClusterInfo, TopicInfo
from monitor.store.ingest import copy_rows, int_array
from monitor.store.models import Broker, Cluster, CollectionRun, Partition, ReplicaState, Topic


def upsert_cluster(conn: Connection, name: str, bootstrap: str, info: ClusterInfo, now: datetime) -> None:
    """Record the cluster as seen now; its Kafka release when this sample identified it (a sample
    that could not keeps the one known before)."""
    version = None if info.kafka_version is None else version_text(info.kafka_version)
    stmt = insert(Cluster).values(
        name=name,
        bootstrap=bootstrap,
        cluster_id=info.cluster_id,
        controller_id=info.controller_id,
        first_seen=now,
        last_seen=now,
        kafka_version=version,
    )
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[Cluster.name],
            set_={
                "bootstrap": stmt.excluded.bootstrap,
                "cluster_id": stmt.excluded.cluster_id,
                "controller_id": stmt.excluded.controller_id,
                "last_seen": stmt.excluded.last_seen,
                "kafka_version": func.coalesce(stmt.excluded.kafka_version, Cluster.kafka_version),
            },
        )
    )


def upsert_brokers(conn: Connection, cluster: str, info: ClusterInfo, now: datetime) -> list[int]:
    """Record the live brokers; mark brokers known before but absent now as down, and those the
    controller no longer has registered (`info.registered`, when known) as unregistered since
    now (`unregistered_at`: decommissioned, gone for good); a broker registered again is not.

    Returns the ids of brokers that went down in this sample (were up, now missing).
    """
    if info.brokers:
        stmt = insert(Broker).values(
            [
                {
                    "cluster": cluster,
                    "broker_id": b.broker_id,
                    "host": b.host,
                    "port": b.port,
                    "rack": b.rack,
                    "first_seen": now,
                    "last_seen": now,
                    "up": True,
                }
                for b in info.brokers
            ]
        )
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[Broker.cluster, Broker.broker_id],
                set_={
                    "host": stmt.excluded.host,
                    "port": stmt.excluded.port,
                    "rack": stmt.excluded.rack,
                    "last_seen": stmt.excluded.last_seen,
                    "up": True,
                    "unregistered_at": None,
                },
            )
        )
    live = [b.broker_id for b in info.brokers]
    went_down = conn.execute(
        update(Broker)
        .where(Broker.cluster == cluster, Broker.up.is_(True), Broker.broker_id.not_in(live))
        .values(up=False)
        .returning(Broker.broker_id)
    )
    down = sorted(went_down.scalars())
    if info.registered is not None:
        registered = sorted({*info.registered, *live})
        conn.execute(
            update(Broker)
            .where(Broker.cluster == cluster, Broker.unregistered_at.is_(None))
            .where(Broker.broker_id.not_in(registered))
            .values(up=False, unregistered_at=now)
        )
        conn.execute(
            update(Broker)
            .where(Broker.cluster == cluster, Broker.unregistered_at.is_not(None))
            .where(Broker.broker_id.in_(registered))
            .values(unregistered_at=None)
        )
    return down


def upsert_topics(
    conn: Connection,
    cluster: str,
    topics: Sequence[TopicInfo],
    now: datetime,
    listed: Sequence[str] | None = None,
) -> int:
    """Record the topics and replace their partitions' latest replication state.

    Topics no longer listed (`listed`: the names the cluster listed, by default those of `topics`;
    a topic listed but not described is not deleted) get `deleted_at`; their partition rows are
    removed. Returns the number of partition rows written.
    """
    if topics:
        stmt = insert(Topic).values(
            [
                {
                    "cluster": cluster,
                    "topic": t.name,
                    "partition_count": len(t.partitions),
                    "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
                    "internal": t.is_internal,
                    "first_seen": now,
                    "last_seen": now,
                    "deleted_at": None,
                }
                for t in topics
            ]
        )
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[Topic.cluster, Topic.topic],
                set_={
                    "partition_count": stmt.excluded.partition_count,
                    "replication_factor": stmt.excluded.replication_factor,
                    "internal": stmt.excluded.internal,
                    "last_seen": stmt.excluded.last_seen,
                    "deleted_at": None,
                },
            )
        )
    names = list(listed) if listed is not None else [t.name for t in topics]
    conn.execute(
        update(Topic)
        .where(Topic.cluster == cluster, Topic.deleted_at.is_(None), Topic.topic.not_in(names))
        .values(deleted_at=now)
    )
    conn.execute(delete(Partition).where(Partition.cluster == cluster))
    rows = [
        (cluster, t.name, p.partition, p.leader, int_array(p.replicas), int_array(p.isr), now)
        for t in topics
        for p in t.partitions
    ]
    return copy_rows(
        conn,
        "partitions",
        ("cluster", "topic", "partition", "leader", "replicas", "isr", "updated_at"),
        rows,
    )


def append_replica_states(
    conn: Connection,
    cluster: str,
    topics: Sequence[TopicInfo],
    sampled_at: datetime,
    run_id: int | None,
    *,
    idempotent: bool = False,
) -> int:
    """COPY one replication sample. `idempotent` (a replay after an outage) first removes the rows
    of this sample that an earlier, uncertain attempt may have written."""
    if idempotent:
        conn.execute(
            delete(ReplicaState).where(ReplicaState.cluster == cluster, ReplicaState.sampled_at == sampled_at)
        )
    rows = [
        (cluster, t.name, p.partition, sampled_at, p.leader, int_array(p.replicas), int_array(p.isr), run_id)
        for t in topics
        for p in t.partitions
    ]
    return copy_rows(
        conn,
        "replica_states",
        ("cluster", "topic", "partition", "sampled_at", "leader", "replicas", "isr", "run_id"),
        rows,
    )


def start_run(conn: Connection, cluster: str | None, job: str, instance: str, started_at: datetime) -> int:
    """Insert a `running` collection run and return its id."""
    stmt = (
        insert(CollectionRun)
        .values(
            cluster=cluster, job=job, instance=instance, started_at=started_at, status="running", counts={}
        )
        .returning(CollectionRun.id)
    )
    return int(conn.execute(stmt).scalar_one())


def finish_run(
    conn: Connection,
    run_id: int,
    *,
    finished_at: datetime,
    duration_ms: int,
    status: str,
    counts: Mapping[str, Any],
    error: str | None,
) -> None:
    conn.execute(
        update(CollectionRun)
        .where(CollectionRun.id == run_id)
        .values(
            finished_at=finished_at,
            duration_ms=duration_ms,
            status=status,
            counts=dict(counts),
            error=error,
        )
    )


def insert_finished_run(
    conn: Connection,
    *,
    cluster: str | None,
    job: str,
    instance: str,
    started_at: datetime,
    finished_at: datetime,
    duration_ms: int,
    status: str,
    counts: Mapping[str, Any],
    error: str | None,
) -> int:
    """A whole run in one row: for runs recorded after the fact (the database was down)."""
    stmt = (
        insert(CollectionRun)
        .values(
            cluster=cluster,
            job=job,
            instance=instance,
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=duration_ms,
            status=status,
            counts=json.loads(json.dumps(dict(counts), default=str)),
            error=error,
        )
        .returning(CollectionRun.id)
    )
    return int(conn.execute(stmt).scalar_one())


def prune_runs(conn: Connection, before: datetime) -> int:
    """Delete finished collection runs that started before `before`; return how many. A run still
    marked `running` is kept: it is what shows a daemon that died mid-run."""
    result = conn.execute(
        delete(CollectionRun).where(CollectionRun.started_at < before, CollectionRun.status != "running")
    )
    return int(result.rowcount or 0)
