"""Evaluation results: derived metrics per entity and the rules' findings.

Revision ID: 0003
Revises: 0002
Create Date: 2026-01-03

- derived_<entity> (group_partition, group_topic, group, partition, topic, broker, cluster): the
  derived columns of each evaluation, partitioned by day on evaluated_at like the samples;
- findings: one open row per (rule, entity) with its lifecycle; resolved rows are history.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)

# (table, key columns, [(column, type)]) as of this revision.
DERIVED: list[tuple[str, tuple[str, ...], list[tuple[str, sa.types.TypeEngine[object]]]]] = [
    (
        "derived_group_partition",
        ("group_id", "topic", "partition"),
        [
            ("group_id", sa.Text()),
            ("topic", sa.Text()),
            ("partition", sa.Integer()),
            ("committed_offset", sa.BigInteger()),
            ("end_offset", sa.BigInteger()),
            ("offset_lag", sa.BigInteger()),
            ("lag_seconds", sa.Double()),
            ("append_lag_seconds", sa.Double()),
            ("commit_lag_seconds", sa.Double()),
            ("time_since_last_commit_seconds", sa.Double()),
            ("consume_rate", sa.Double()),
            ("produce_rate", sa.Double()),
            ("time_to_catch_up_seconds", sa.Double()),
            ("time_until_data_loss_seconds", sa.Double()),
            ("data_loss_occurred", sa.Boolean()),
            ("lag_seconds_method", sa.Text()),
            ("lag_seconds_error", sa.Double()),
            ("data_loss_limit", sa.Text()),
            ("status", sa.Text()),
            ("group_state", sa.Text()),
            ("members", sa.Integer()),
        ],
    ),
    (
        "derived_group_topic",
        ("group_id", "topic"),
        [
            ("group_id", sa.Text()),
            ("topic", sa.Text()),
            ("partitions", sa.Integer()),
            ("offset_lag", sa.BigInteger()),
            ("lag_seconds", sa.Double()),
            ("append_lag_seconds", sa.Double()),
            ("commit_lag_seconds", sa.Double()),
            ("time_since_last_commit_seconds", sa.Double()),
            ("consume_rate", sa.Double()),
            ("produce_rate", sa.Double()),
            ("time_to_catch_up_seconds", sa.Double()),
            ("time_until_data_loss_seconds", sa.Double()),
            ("data_loss_occurred", sa.Boolean()),
            ("max_offset_lag", sa.BigInteger()),
            ("max_lag_seconds", sa.Double()),
            ("status", sa.Text()),
            ("group_state", sa.Text()),
            ("members", sa.Integer()),
        ],
    ),
    (
        "derived_group",
        ("group_id",),
        [
            ("group_id", sa.Text()),
            ("topics", sa.Integer()),
            ("partitions", sa.Integer()),
            ("offset_lag", sa.BigInteger()),
            ("lag_seconds", sa.Double()),
            ("append_lag_seconds", sa.Double()),
            ("commit_lag_seconds", sa.Double()),
            ("time_since_last_commit_seconds", sa.Double()),
            ("consume_rate", sa.Double()),
            ("produce_rate", sa.Double()),
            ("time_to_catch_up_seconds", sa.Double()),
            ("time_until_data_loss_seconds", sa.Double()),
            ("data_loss_occurred", sa.Boolean()),
            ("max_offset_lag", sa.BigInteger()),
            ("max_lag_seconds", sa.Double()),
            ("status", sa.Text()),
            ("group_state", sa.Text()),
            ("members", sa.Integer()),
            ("lag_growing", sa.Boolean()),
        ],
    ),
    (
        "derived_partition",
        ("topic", "partition"),
        [
            ("topic", sa.Text()),
            ("partition", sa.Integer()),
            ("start_offset", sa.BigInteger()),
            ("end_offset", sa.BigInteger()),
            ("produce_rate", sa.Double()),
            ("produce_bytes_rate", sa.Double()),
            ("size_bytes", sa.BigInteger()),
            ("retention_bytes", sa.BigInteger()),
            ("retention_ms", sa.BigInteger()),
            ("size_ratio", sa.Double()),
            ("time_coverage_seconds", sa.Double()),
            ("retention_shortfall_seconds", sa.Double()),
            ("leader", sa.Integer()),
            ("replication_factor", sa.Integer()),
            ("isr", sa.Integer()),
            ("min_insync_replicas", sa.Integer()),
            ("replicas_lost", sa.Integer()),
            ("under_replicated", sa.Boolean()),
            ("under_min_isr", sa.Boolean()),
            ("offline", sa.Boolean()),
            ("non_preferred_leader", sa.Boolean()),
            ("replicas_sharing_rack", sa.Integer()),
        ],
    ),
    (
        "derived_topic",
        ("topic",),
        [
            ("topic", sa.Text()),
            ("partitions", sa.Integer()),
            ("produce_rate", sa.Double()),
            ("produce_bytes_rate", sa.Double()),
            ("size_bytes", sa.BigInteger()),
            ("max_size_ratio", sa.Double()),
            ("min_time_coverage_seconds", sa.Double()),
            ("retention_ms", sa.BigInteger()),
            ("retention_bytes", sa.BigInteger()),
            ("retention_shortfall_seconds", sa.Double()),
            ("max_replicas_lost", sa.Integer()),
            ("under_replicated_partitions", sa.Integer()),
            ("under_min_isr_partitions", sa.Integer()),
            ("offline_partitions", sa.Integer()),
            ("min_time_until_data_loss_seconds", sa.Double()),
        ],
    ),
    (
        "derived_broker",
        ("broker_id",),
        [
            ("broker_id", sa.Integer()),
            ("rack", sa.Text()),
            ("up", sa.Boolean()),
            ("down", sa.Boolean()),
            ("leaders", sa.Integer()),
            ("fair_share_leaders", sa.Double()),
            ("leader_imbalance", sa.Double()),
            ("non_preferred_leaders", sa.Integer()),
            ("replicas", sa.Integer()),
            ("disk_total_bytes", sa.BigInteger()),
            ("disk_usable_bytes", sa.BigInteger()),
            ("disk_used_ratio", sa.Double()),
        ],
    ),
    (
        "derived_cluster",
        (),
        [
            ("brokers", sa.Integer()),
            ("brokers_down", sa.Integer()),
            ("partitions", sa.Integer()),
            ("offline_partitions", sa.Integer()),
            ("under_replicated_partitions", sa.Integer()),
            ("under_min_isr_partitions", sa.Integer()),
            ("max_leader_imbalance", sa.Double()),
            ("collection_age_seconds", sa.Double()),
            ("unreachable", sa.Boolean()),
        ],
    ),
]


def upgrade() -> None:
    for table, keys, columns in DERIVED:
        op.create_table(
            table,
            sa.Column("cluster", sa.Text(), nullable=False),
            *(sa.Column(name, kind, nullable=name not in keys) for name, kind in columns),
            sa.Column("evaluated_at", TS, nullable=False),
            sa.PrimaryKeyConstraint("cluster", *keys, "evaluated_at", name=f"pk_{table}"),
            postgresql_partition_by="RANGE (evaluated_at)",
        )
        op.create_index(f"ix_{table}_cluster_evaluated_at", table, ["cluster", "evaluated_at"])

    op.create_table(
        "findings",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("entity", sa.Text(), nullable=False),
        sa.Column("entity_key", sa.Text(), nullable=False),
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("severity", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("runbook", sa.Text(), nullable=True),
        sa.Column("for_seconds", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("first_seen", TS, nullable=False),
        sa.Column("last_seen", TS, nullable=False),
        sa.Column("resolved_at", TS, nullable=True),
        sa.Column("evaluated_at", TS, nullable=False),
        sa.CheckConstraint("state IN ('pending', 'firing', 'resolved')", name="ck_findings_state"),
        sa.PrimaryKeyConstraint("id", name="pk_findings"),
    )
    op.create_index(
        "uq_findings_open", "findings", ["rule", "entity_key"], unique=True,
        postgresql_where=sa.text("state <> 'resolved'"),
    )  # fmt: skip
    op.create_index("ix_findings_cluster_last_seen", "findings", ["cluster", "last_seen"])
    op.create_index("ix_findings_state", "findings", ["state"])


def downgrade() -> None:
    op.drop_table("findings")
    for table, _, _ in reversed(DERIVED):
        op.drop_table(table)
