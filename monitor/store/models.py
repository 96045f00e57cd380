"""The tables the store stage owns, as SQLAlchemy 2 typed models.

Three kinds of table:

- latest state (``clusters``, ``brokers``, ``topics``, ``partitions``, ``latest_partition_offsets``,
  ``latest_group_offsets``, ``group_members``): one row per object, updated in place by the
  collector, so "now" is read without scanning samples;
- samples (``partition_offsets``, ``group_offsets`` ...): append-only, declaratively partitioned by
  day on their time column (see ``monitor.store.partitions``), dropped past retention;
- bookkeeping and events (``record_timestamps`` cache, ``topic_configs`` history,
  ``data_loss_events``, ``collection_runs``; ``leases`` is in `monitor.store.leases`).

A latest table has the columns of its sample table minus ``run_id``: both take their value
columns from one mixin, so they cannot drift apart.

Clusters are referred to by their configured name everywhere, never by a surrogate id, so a sample
row can be read without a join. There are no foreign keys: rows arrive in whatever order the
collector sees objects. Every timestamp is ``timestamptz``; every offset is ``bigint``. The
migrated schema must equal this metadata (a test compares them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    CheckConstraint,
    Double,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from monitor.core.vocabulary import RUN_STATUSES
from monitor.store.base import PARTITION_COLUMN_KEY, Base, one_of

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime", "NotAvailable")
TIMESTAMP_METHODS = ("exact", "interpolated", "none")
END_OFFSET_METHODS = ("listed", "last_known")

LAST = 100
"""`sort_order` of columns that follow a mixin's columns (mixin columns come after the class's own)."""

LATEST_FILLFACTOR = 70
"""Latest tables are rewritten each cycle: free space keeps an update on its page (HOT, no index write)."""

IntArray = ARRAY(Integer)
TextArray = ARRAY(Text)


def _by_day(column: str) -> dict[str, Any]:
    """Table options for a sample table partitioned by day on `column`."""
    return {"postgresql_partition_by": f"RANGE ({column})", "info": {PARTITION_COLUMN_KEY: column}}


# ---------------------------------------------------------------------------------------------
# Latest metadata


class Cluster(Base):
    __tablename__ = "clusters"

    name: Mapped[str] = mapped_column(primary_key=True)
    bootstrap: Mapped[str]
    cluster_id: Mapped[str | None]
    controller_id: Mapped[int | None]
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    kafka_version: Mapped[str | None]
    """The Kafka release ("3.9") of the oldest live broker; null until one was identified."""


class Broker(Base):
    __tablename__ = "brokers"

    cluster: Mapped[str] = mapped_column(primary_key=True)
    broker_id: Mapped[int] = mapped_column(primary_key=True)
    host: Mapped[str]
    port: Mapped[int]
    rack: Mapped[str | None]
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    up: Mapped[bool]
    unregistered_at: Mapped[datetime | None]
    """When the controller was first seen not to have it registered any more (decommissioned:
    gone for good, where a broker that is down is still registered); None while registered or
    when the cluster cannot say (a broker older than Kafka 4.0)."""


class Topic(Base):
    __tablename__ = "topics"
    __table_args__ = (
        # A topic search (a name fragment: LIKE '%x%') reads this trigram index (pg_trgm).
        Index(
            "ix_topics_topic_trgm", "topic", postgresql_using="gin", postgresql_ops={"topic": "gin_trgm_ops"}
        ),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition_count: Mapped[int]
    replication_factor: Mapped[int]
    internal: Mapped[bool]
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    deleted_at: Mapped[datetime | None]


class Partition(Base):
    __tablename__ = "partitions"

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    leader: Mapped[int | None]
    replicas: Mapped[list[int]] = mapped_column(IntArray)
    isr: Mapped[list[int]] = mapped_column(IntArray)
    updated_at: Mapped[datetime]


# ---------------------------------------------------------------------------------------------
# Samples, partitioned by day. The primary key ends with the time column, so the latest sample of
# one key is a backwards scan of the primary key index.


class _PartitionOffsetValues:
    """One partition's offsets and the append times of its oldest and newest records (None for an
    empty partition, or when they could not be read).

    `end_offset_method` says where the end offset comes from: `listed` by the leader in this
    sample, or `last_known` when the leader could not give one (high watermark held back under
    min ISR) and the last one listed stands in; `end_offset_listed_at` is when that one was listed
    (NULL for `listed`: the sample's own time).
    """

    start_offset: Mapped[int] = mapped_column(BigInteger)
    end_offset: Mapped[int] = mapped_column(BigInteger)
    max_timestamp_offset: Mapped[int | None] = mapped_column(BigInteger)
    max_timestamp: Mapped[datetime | None]
    start_timestamp: Mapped[datetime | None]
    latest_timestamp: Mapped[datetime | None]
    timestamp_type: Mapped[str | None]
    end_offset_method: Mapped[str] = mapped_column(server_default="listed")
    end_offset_listed_at: Mapped[datetime | None]


class PartitionOffset(_PartitionOffsetValues, Base):
    __tablename__ = "partition_offsets"
    __table_args__ = (
        Index("ix_partition_offsets_cluster_sampled_at", "cluster", "sampled_at"),
        CheckConstraint(one_of("end_offset_method", END_OFFSET_METHODS), name="end_offset_method"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, sort_order=LAST)


class _GroupOffsetValues:
    """A group's position on one partition with its lag and the append times behind it.

    `committed_timestamp` is the append time of the record at `committed_offset` (the oldest
    unconsumed message), `consumed_timestamp` that of the record at `committed_offset - 1`;
    `timestamp_method` says how they were obtained and `timestamp_error_ms` bounds an estimate.
    """

    committed_offset: Mapped[int] = mapped_column(BigInteger)
    leader_epoch: Mapped[int | None]
    end_offset: Mapped[int | None] = mapped_column(BigInteger)
    start_offset: Mapped[int | None] = mapped_column(BigInteger)
    lag: Mapped[int | None] = mapped_column(BigInteger)
    lag_clamped: Mapped[bool] = mapped_column(server_default=false())
    committed_timestamp: Mapped[datetime | None]
    consumed_timestamp: Mapped[datetime | None]
    timestamp_method: Mapped[str] = mapped_column(server_default="none")
    timestamp_error_ms: Mapped[int | None] = mapped_column(BigInteger)


class GroupOffset(_GroupOffsetValues, Base):
    __tablename__ = "group_offsets"
    __table_args__ = (
        # Time first: a cycle's rows go to the index's right-hand edge, and its prefix is the
        # (cluster, time window) every reader asks for (migration 0016).
        PrimaryKeyConstraint("cluster", "sampled_at", "group_id", "topic", "partition"),
        Index(
            "ix_group_offsets_cluster_topic_partition_sampled_at",
            "cluster",
            "topic",
            "partition",
            "sampled_at",
        ),
        CheckConstraint(one_of("timestamp_method", TIMESTAMP_METHODS), name="timestamp_method"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, sort_order=LAST)


class GroupState(Base):
    __tablename__ = "group_states"
    __table_args__ = (
        Index("ix_group_states_cluster_sampled_at", "cluster", "sampled_at"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    state: Mapped[str]
    protocol_type: Mapped[str]
    protocol: Mapped[str | None]
    members: Mapped[int]
    coordinator: Mapped[int | None]
    is_simple: Mapped[bool] = mapped_column(server_default=false())
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class ReplicaState(Base):
    __tablename__ = "replica_states"
    __table_args__ = (
        Index("ix_replica_states_cluster_sampled_at", "cluster", "sampled_at"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    leader: Mapped[int | None]
    replicas: Mapped[list[int]] = mapped_column(IntArray)
    isr: Mapped[list[int]] = mapped_column(IntArray)
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class LogDirSize(Base):
    __tablename__ = "log_dir_sizes"
    __table_args__ = (
        Index("ix_log_dir_sizes_cluster_sampled_at", "cluster", "sampled_at"),
        Index(
            "ix_log_dir_sizes_cluster_topic_partition_sampled_at",
            "cluster",
            "topic",
            "partition",
            "sampled_at",
        ),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    broker_id: Mapped[int] = mapped_column(primary_key=True)
    log_dir: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    offset_lag: Mapped[int] = mapped_column(BigInteger)
    is_future: Mapped[bool]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class BrokerDisk(Base):
    __tablename__ = "broker_disks"
    __table_args__ = (
        Index("ix_broker_disks_cluster_sampled_at", "cluster", "sampled_at"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    broker_id: Mapped[int] = mapped_column(primary_key=True)
    log_dir: Mapped[str] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    usable_bytes: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class ProbeSample(Base):
    """One end-to-end probe message on one partition of the probe topic, and the broker it
    probes (the partition's preferred leader). Latencies are null for steps not reached."""

    __tablename__ = "probe_samples"
    __table_args__ = (
        Index("ix_probe_samples_cluster_sampled_at", "cluster", "sampled_at"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    broker_id: Mapped[int]
    leader: Mapped[int | None]
    ok: Mapped[bool]
    produce_seconds: Mapped[float | None] = mapped_column(Double)
    end_to_end_seconds: Mapped[float | None] = mapped_column(Double)
    commit_seconds: Mapped[float | None] = mapped_column(Double)
    error: Mapped[str | None]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class CommitObservation(Base):
    """The first sample in which a group's committed offset changed: an observed commit time."""

    __tablename__ = "commit_observations"
    __table_args__ = (
        Index("ix_commit_observations_cluster_observed_at", "cluster", "observed_at"),
        _by_day("observed_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    observed_at: Mapped[datetime] = mapped_column(primary_key=True)
    committed_offset: Mapped[int] = mapped_column(BigInteger)
    previous_offset: Mapped[int | None] = mapped_column(BigInteger)


# ---------------------------------------------------------------------------------------------
# Latest state of the samples: one row per key, updated in place by every cycle.


class LatestPartitionOffset(_PartitionOffsetValues, Base):
    __tablename__ = "latest_partition_offsets"
    __table_args__ = (
        CheckConstraint(one_of("end_offset_method", END_OFFSET_METHODS), name="end_offset_method"),
        {"postgresql_with": {"fillfactor": LATEST_FILLFACTOR}},
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime]


class LatestGroupOffset(_GroupOffsetValues, Base):
    """The newest group offset sample of each group-partition (its newest observed commit is in
    `latest_commits`)."""

    __tablename__ = "latest_group_offsets"
    __table_args__ = (
        CheckConstraint(one_of("timestamp_method", TIMESTAMP_METHODS), name="timestamp_method"),
        Index("ix_latest_group_offsets_cluster_topic", "cluster", "topic", "partition"),
        {"postgresql_with": {"fillfactor": LATEST_FILLFACTOR}},
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime]
    gone_at: Mapped[datetime | None] = mapped_column(sort_order=LAST)
    """When the cluster was first seen not to have this committed offset any more (the group
    deleted, its offsets deleted or expired); None while it does. A later sample clears it."""


class LatestCommit(Base):
    """Each group-partition's newest observed commit and the only record of when it last
    committed, written with the observation by the commits job (`write_commit_observations`), so
    a commit reaches readers at once. One writer per row: the offsets job hands its observations
    to that writer, so the two jobs cannot wait on each other's rows."""

    __tablename__ = "latest_commits"
    __table_args__ = ({"postgresql_with": {"fillfactor": LATEST_FILLFACTOR}},)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    committed_offset: Mapped[int] = mapped_column(BigInteger)
    observed_at: Mapped[datetime]


class GroupMember(Base):
    """The current members of each consumer group and their assignments ("topic:partition")."""

    __tablename__ = "group_members"

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    member_id: Mapped[str] = mapped_column(primary_key=True)
    client_id: Mapped[str]
    host: Mapped[str]
    group_instance_id: Mapped[str | None]
    assignment: Mapped[list[str]] = mapped_column(TextArray)
    updated_at: Mapped[datetime]


# ---------------------------------------------------------------------------------------------
# Bookkeeping


class RecordTimestamp(Base):
    """Cache of record timestamps: the first record at or after `offset` (records never change)."""

    __tablename__ = "record_timestamps"
    __table_args__ = (
        CheckConstraint(one_of("timestamp_type", TIMESTAMP_TYPES), name="timestamp_type"),
        Index("ix_record_timestamps_cluster_fetched_at", "cluster", "fetched_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    record_offset: Mapped[int | None] = mapped_column(BigInteger)
    timestamp: Mapped[datetime | None]
    timestamp_type: Mapped[str]
    fetched_at: Mapped[datetime]


class DataLossEvent(Base):
    """A group's committed offset fell below the log start: messages deleted before being read.

    Recorded once per (group, partition, committed offset), however many samples see it.
    """

    __tablename__ = "data_loss_events"
    __table_args__ = (
        UniqueConstraint(
            "cluster", "group_id", "topic", "partition", "committed_offset", name="uq_data_loss_events_key"
        ),
        Index("ix_data_loss_events_cluster_detected_at", "cluster", "detected_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    cluster: Mapped[str]
    group_id: Mapped[str]
    topic: Mapped[str]
    partition: Mapped[int]
    committed_offset: Mapped[int] = mapped_column(BigInteger)
    start_offset: Mapped[int] = mapped_column(BigInteger)
    messages_lost: Mapped[int] = mapped_column(BigInteger)
    detected_at: Mapped[datetime]


class TopicConfig(Base):
    """Topic configuration history: a new row only when a value changes; the open row has no valid_to."""

    __tablename__ = "topic_configs"
    __table_args__ = (
        Index(
            "uq_topic_configs_open",
            "cluster",
            "topic",
            "name",
            unique=True,
            postgresql_where=text("valid_to IS NULL"),
        ),
        Index("ix_topic_configs_cluster_topic_name_valid_from", "cluster", "topic", "name", "valid_from"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    cluster: Mapped[str]
    topic: Mapped[str]
    name: Mapped[str]
    value: Mapped[str | None]
    source: Mapped[str]
    sensitive: Mapped[bool]
    valid_from: Mapped[datetime]
    valid_to: Mapped[datetime | None]


class CollectionRun(Base):
    """One row per scheduled job run, so failures show in the UI and metrics, not only in logs."""

    __tablename__ = "collection_runs"
    __table_args__ = (
        CheckConstraint(one_of("status", RUN_STATUSES), name="status"),
        Index("ix_collection_runs_cluster_job_started_at", "cluster", "job", text("started_at DESC")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    cluster: Mapped[str | None]
    job: Mapped[str]
    instance: Mapped[str]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    duration_ms: Mapped[int | None]
    status: Mapped[str]
    counts: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    error: Mapped[str | None]
