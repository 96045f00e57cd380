"""Offsets samples: lag and append times on the samples, latest tables, group members, data loss.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-02

- partition_offsets, group_offsets and group_states get the columns the offsets collector fills
  (record append times, lag and how its timestamps were obtained, simple groups);
- latest_partition_offsets and latest_group_offsets hold the newest sample of each key, updated
  in place every cycle (fillfactor 70 so those updates stay on their page);
- group_members holds each group's current members; data_loss_events records each loss once;
- record_timestamps gets an index on (cluster, fetched_at) for pruning the cache.

Adding a column with a constant default is a catalog change only (no table rewrite) on the
partitioned sample tables; the new check constraint scans the existing group_offsets rows once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
LATEST_STORAGE = {"fillfactor": 70}
TIMESTAMP_METHOD_CHECK = "timestamp_method IN ('exact', 'interpolated', 'none')"


def _text(name: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def _int(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), nullable=False)


def _bigint(name: str, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=nullable)


def _ts(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, TS, nullable=nullable)


def _flag(name: str) -> sa.Column[bool]:
    return sa.Column(name, sa.Boolean(), server_default=sa.false(), nullable=False)


def _partition_values() -> list[sa.Column[Any]]:
    """Columns of partition_offsets after its key (the key columns come first)."""
    return [
        _bigint("start_offset"),
        _bigint("end_offset"),
        _bigint("max_timestamp_offset", nullable=True),
        _ts("max_timestamp", nullable=True),
        *_partition_timestamps(),
    ]


def _partition_timestamps() -> list[sa.Column[Any]]:
    return [
        _ts("start_timestamp", nullable=True),
        _ts("latest_timestamp", nullable=True),
        _text("timestamp_type", nullable=True),
    ]


def _group_lag() -> list[sa.Column[Any]]:
    """The columns group_offsets gains here, in table order."""
    return [
        _bigint("end_offset", nullable=True),
        _bigint("start_offset", nullable=True),
        _bigint("lag", nullable=True),
        _flag("lag_clamped"),
        _ts("committed_timestamp", nullable=True),
        _ts("consumed_timestamp", nullable=True),
        sa.Column("timestamp_method", sa.Text(), server_default="none", nullable=False),
        _bigint("timestamp_error_ms", nullable=True),
    ]


def upgrade() -> None:
    # New columns on the samples -----------------------------------------------------------------
    for column in _partition_timestamps():
        op.add_column("partition_offsets", column)
    for column in _group_lag():
        op.add_column("group_offsets", column)
    op.create_check_constraint("ck_group_offsets_timestamp_method", "group_offsets", TIMESTAMP_METHOD_CHECK)
    op.add_column("group_states", _flag("is_simple"))

    # Latest samples, updated in place --------------------------------------------------------------
    op.create_table(
        "latest_partition_offsets",
        _text("cluster"),
        _text("topic"),
        _int("partition"),
        _ts("sampled_at"),
        *_partition_values(),
        sa.PrimaryKeyConstraint("cluster", "topic", "partition", name="pk_latest_partition_offsets"),
        postgresql_with=LATEST_STORAGE,
    )
    op.create_table(
        "latest_group_offsets",
        _text("cluster"),
        _text("group_id"),
        _text("topic"),
        _int("partition"),
        _ts("sampled_at"),
        _bigint("committed_offset"),
        sa.Column("leader_epoch", sa.Integer(), nullable=True),
        *_group_lag(),
        _ts("last_commit_observed_at", nullable=True),
        sa.PrimaryKeyConstraint("cluster", "group_id", "topic", "partition", name="pk_latest_group_offsets"),
        sa.CheckConstraint(TIMESTAMP_METHOD_CHECK, name="ck_latest_group_offsets_timestamp_method"),
        postgresql_with=LATEST_STORAGE,
    )
    op.create_table(
        "group_members",
        _text("cluster"),
        _text("group_id"),
        _text("member_id"),
        _text("client_id"),
        _text("host"),
        _text("group_instance_id", nullable=True),
        sa.Column("assignment", postgresql.ARRAY(sa.Text()), nullable=False),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("cluster", "group_id", "member_id", name="pk_group_members"),
    )

    # Events and caches -----------------------------------------------------------------------------
    op.create_table(
        "data_loss_events",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        _text("cluster"),
        _text("group_id"),
        _text("topic"),
        _int("partition"),
        _bigint("committed_offset"),
        _bigint("start_offset"),
        _bigint("messages_lost"),
        _ts("detected_at"),
        sa.PrimaryKeyConstraint("id", name="pk_data_loss_events"),
        sa.UniqueConstraint(
            "cluster", "group_id", "topic", "partition", "committed_offset", name="uq_data_loss_events_key"
        ),
    )
    op.create_index("ix_data_loss_events_cluster_detected_at", "data_loss_events", ["cluster", "detected_at"])
    op.create_index("ix_record_timestamps_cluster_fetched_at", "record_timestamps", ["cluster", "fetched_at"])


def downgrade() -> None:
    op.drop_index("ix_record_timestamps_cluster_fetched_at", table_name="record_timestamps")
    for table in ("data_loss_events", "group_members", "latest_group_offsets", "latest_partition_offsets"):
        op.drop_table(table)
    op.drop_column("group_states", "is_simple")
    op.drop_constraint("ck_group_offsets_timestamp_method", "group_offsets", type_="check")
    for column in reversed(_group_lag()):
        op.drop_column("group_offsets", column.name)
    for column in reversed(_partition_timestamps()):
        op.drop_column("partition_offsets", column.name)
