"""Initial schema: latest metadata, day-partitioned samples, caches, run log and leases.

Revision ID: 0001
Revises:
Create Date: 2026-01-01

The sample tables are created as partitioned parents only (PARTITION BY RANGE on their time
column); their day partitions are created at run time by monitor.store.partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
INT_ARRAY = postgresql.ARRAY(sa.Integer())


def _text(name: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def _int(name: str, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def _bigint(name: str, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=nullable)


def _ts(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, TS, nullable=nullable)


def _bool(name: str) -> sa.Column[bool]:
    return sa.Column(name, sa.Boolean(), nullable=False)


def _int_array(name: str) -> sa.Column[list[int]]:
    return sa.Column(name, INT_ARRAY, nullable=False)


# Sample tables: name -> (time column, extra indexes). Each also gets an index on (cluster, time).
SAMPLE_TABLES: dict[str, tuple[str, list[list[str]]]] = {
    "partition_offsets": ("sampled_at", []),
    "group_offsets": ("sampled_at", [["cluster", "topic", "partition", "sampled_at"]]),
    "group_states": ("sampled_at", []),
    "replica_states": ("sampled_at", []),
    "log_dir_sizes": ("sampled_at", [["cluster", "topic", "partition", "sampled_at"]]),
    "broker_disks": ("sampled_at", []),
    "commit_observations": ("observed_at", []),
}


def _sample_table(name: str, key: list[str], *columns: sa.Column[Any]) -> None:
    """A parent table partitioned by day on its time column, with the time column last in the key."""
    time_column = SAMPLE_TABLES[name][0]
    op.create_table(
        name,
        *columns,
        sa.PrimaryKeyConstraint(*key, time_column, name=f"pk_{name}"),
        postgresql_partition_by=f"RANGE ({time_column})",
    )
    for index in [["cluster", time_column], *SAMPLE_TABLES[name][1]]:
        op.create_index(f"ix_{name}_{'_'.join(index)}", name, index)


def upgrade() -> None:
    # Latest metadata -----------------------------------------------------------------------------
    op.create_table(
        "clusters",
        _text("name"),
        _text("bootstrap"),
        _text("cluster_id", nullable=True),
        _int("controller_id", nullable=True),
        _ts("first_seen"),
        _ts("last_seen"),
        sa.PrimaryKeyConstraint("name", name="pk_clusters"),
    )
    op.create_table(
        "brokers",
        _text("cluster"),
        _int("broker_id"),
        _text("host"),
        _int("port"),
        _text("rack", nullable=True),
        _ts("first_seen"),
        _ts("last_seen"),
        _bool("up"),
        sa.PrimaryKeyConstraint("cluster", "broker_id", name="pk_brokers"),
    )
    op.create_table(
        "topics",
        _text("cluster"),
        _text("topic"),
        _int("partition_count"),
        _int("replication_factor"),
        _bool("internal"),
        _ts("first_seen"),
        _ts("last_seen"),
        _ts("deleted_at", nullable=True),
        sa.PrimaryKeyConstraint("cluster", "topic", name="pk_topics"),
    )
    op.create_table(
        "partitions",
        _text("cluster"),
        _text("topic"),
        _int("partition"),
        _int("leader", nullable=True),
        _int_array("replicas"),
        _int_array("isr"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("cluster", "topic", "partition", name="pk_partitions"),
    )

    # Samples, partitioned by day -----------------------------------------------------------------
    _sample_table(
        "partition_offsets",
        ["cluster", "topic", "partition"],
        _text("cluster"),
        _text("topic"),
        _int("partition"),
        _ts("sampled_at"),
        _bigint("start_offset"),
        _bigint("end_offset"),
        _bigint("max_timestamp_offset", nullable=True),
        _ts("max_timestamp", nullable=True),
        _bigint("run_id", nullable=True),
    )
    _sample_table(
        "group_offsets",
        ["cluster", "group_id", "topic", "partition"],
        _text("cluster"),
        _text("group_id"),
        _text("topic"),
        _int("partition"),
        _ts("sampled_at"),
        _bigint("committed_offset"),
        _int("leader_epoch", nullable=True),
        _bigint("run_id", nullable=True),
    )
    _sample_table(
        "group_states",
        ["cluster", "group_id"],
        _text("cluster"),
        _text("group_id"),
        _ts("sampled_at"),
        _text("state"),
        _text("protocol_type"),
        _text("protocol", nullable=True),
        _int("members"),
        _int("coordinator", nullable=True),
        _bigint("run_id", nullable=True),
    )
    _sample_table(
        "replica_states",
        ["cluster", "topic", "partition"],
        _text("cluster"),
        _text("topic"),
        _int("partition"),
        _ts("sampled_at"),
        _int("leader", nullable=True),
        _int_array("replicas"),
        _int_array("isr"),
        _bigint("run_id", nullable=True),
    )
    _sample_table(
        "log_dir_sizes",
        ["cluster", "broker_id", "log_dir", "topic", "partition"],
        _text("cluster"),
        _int("broker_id"),
        _text("log_dir"),
        _text("topic"),
        _int("partition"),
        _ts("sampled_at"),
        _bigint("size_bytes"),
        _bigint("offset_lag"),
        _bool("is_future"),
        _bigint("run_id", nullable=True),
    )
    _sample_table(
        "broker_disks",
        ["cluster", "broker_id", "log_dir"],
        _text("cluster"),
        _int("broker_id"),
        _text("log_dir"),
        _ts("sampled_at"),
        _bigint("total_bytes", nullable=True),
        _bigint("usable_bytes", nullable=True),
        _text("error", nullable=True),
        _bigint("run_id", nullable=True),
    )
    _sample_table(
        "commit_observations",
        ["cluster", "group_id", "topic", "partition"],
        _text("cluster"),
        _text("group_id"),
        _text("topic"),
        _int("partition"),
        _ts("observed_at"),
        _bigint("committed_offset"),
        _bigint("previous_offset", nullable=True),
    )

    # Bookkeeping ---------------------------------------------------------------------------------
    op.create_table(
        "record_timestamps",
        _text("cluster"),
        _text("topic"),
        _int("partition"),
        _bigint("offset"),
        _bigint("record_offset", nullable=True),
        _ts("timestamp", nullable=True),
        _text("timestamp_type"),
        _ts("fetched_at"),
        sa.PrimaryKeyConstraint("cluster", "topic", "partition", "offset", name="pk_record_timestamps"),
        sa.CheckConstraint(
            "timestamp_type IN ('CreateTime', 'LogAppendTime', 'NotAvailable')",
            name="ck_record_timestamps_timestamp_type",
        ),
    )
    op.create_table(
        "topic_configs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        _text("cluster"),
        _text("topic"),
        _text("name"),
        _text("value", nullable=True),
        _text("source"),
        _bool("sensitive"),
        _ts("valid_from"),
        _ts("valid_to", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_topic_configs"),
    )
    op.create_index(
        "uq_topic_configs_open",
        "topic_configs",
        ["cluster", "topic", "name"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_index(
        "ix_topic_configs_cluster_topic_name_valid_from",
        "topic_configs",
        ["cluster", "topic", "name", "valid_from"],
    )
    op.create_table(
        "collection_runs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        _text("cluster", nullable=True),
        _text("job"),
        _text("instance"),
        _ts("started_at"),
        _ts("finished_at", nullable=True),
        _int("duration_ms", nullable=True),
        _text("status"),
        sa.Column("counts", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        _text("error", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_collection_runs"),
        sa.CheckConstraint(
            "status IN ('running', 'ok', 'partial', 'failed', 'skipped')",
            name="ck_collection_runs_status",
        ),
    )
    op.create_index(
        "ix_collection_runs_cluster_job_started_at",
        "collection_runs",
        ["cluster", "job", sa.text("started_at DESC")],
    )
    op.create_table(
        "leases",
        _text("name"),
        _text("holder"),
        _ts("acquired_at"),
        _ts("renewed_at"),
        _ts("expires_at"),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )


def downgrade() -> None:
    # Dropping a partitioned parent drops its day partitions with it.
    for table in ("leases", "collection_runs", "topic_configs", "record_timestamps"):
        op.drop_table(table)
    for table in reversed(SAMPLE_TABLES):
        op.drop_table(table)
    for table in ("partitions", "topics", "brokers", "clusters"):
        op.drop_table(table)
