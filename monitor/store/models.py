"""The tables the store stage owns, as SQLAlchemy 2 typed models.

Three kinds of table:

- latest metadata (``clusters``, ``brokers``, ``topics``, ``partitions``): one row per object,
  updated in place by the collector;
- samples (``partition_offsets``, ``group_offsets`` ...): append-only, declaratively partitioned by
  day on their time column (see ``monitor.store.partitions``), dropped past retention;
- bookkeeping (``record_timestamps`` cache, ``topic_configs`` history, ``collection_runs``,
  ``leases``).

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
    DateTime,
    Index,
    Integer,
    MetaData,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PARTITION_COLUMN_KEY = "partitioned_by_day"
"""Key in ``Table.info`` naming the time column a table is range-partitioned on, by day."""

RUN_STATUSES = ("running", "ok", "partial", "failed", "skipped")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime", "NotAvailable")

Timestamp = DateTime(timezone=True)
IntArray = ARRAY(Integer)


def _by_day(column: str) -> dict[str, Any]:
    """Table options for a sample table partitioned by day on `column`."""
    return {"postgresql_partition_by": f"RANGE ({column})", "info": {PARTITION_COLUMN_KEY: column}}


def _one_of(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: Timestamp, str: Text, int: Integer}


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


class Topic(Base):
    __tablename__ = "topics"

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


class PartitionOffset(Base):
    __tablename__ = "partition_offsets"
    __table_args__ = (
        Index("ix_partition_offsets_cluster_sampled_at", "cluster", "sampled_at"),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    start_offset: Mapped[int] = mapped_column(BigInteger)
    end_offset: Mapped[int] = mapped_column(BigInteger)
    max_timestamp_offset: Mapped[int | None] = mapped_column(BigInteger)
    max_timestamp: Mapped[datetime | None]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class GroupOffset(Base):
    __tablename__ = "group_offsets"
    __table_args__ = (
        Index("ix_group_offsets_cluster_sampled_at", "cluster", "sampled_at"),
        Index(
            "ix_group_offsets_cluster_topic_partition_sampled_at",
            "cluster",
            "topic",
            "partition",
            "sampled_at",
        ),
        _by_day("sampled_at"),
    )

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    committed_offset: Mapped[int] = mapped_column(BigInteger)
    leader_epoch: Mapped[int | None]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


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
# Bookkeeping


class RecordTimestamp(Base):
    """Cache of record timestamps: the first record at or after `offset` (records never change)."""

    __tablename__ = "record_timestamps"
    __table_args__ = (CheckConstraint(_one_of("timestamp_type", TIMESTAMP_TYPES), name="timestamp_type"),)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    record_offset: Mapped[int | None] = mapped_column(BigInteger)
    timestamp: Mapped[datetime | None]
    timestamp_type: Mapped[str]
    fetched_at: Mapped[datetime]


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
        CheckConstraint(_one_of("status", RUN_STATUSES), name="status"),
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


class Lease(Base):
    """A named lease shared by daemon instances; a holder that stops renewing loses it at expires_at."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(primary_key=True)
    holder: Mapped[str]
    acquired_at: Mapped[datetime]
    renewed_at: Mapped[datetime]
    expires_at: Mapped[datetime]


def partitioned_tables() -> dict[str, str]:
    """Name -> time column of every table partitioned by day, in metadata order."""
    return {
        table.name: table.info[PARTITION_COLUMN_KEY]
        for table in Base.metadata.sorted_tables
        if PARTITION_COLUMN_KEY in table.info
    }
