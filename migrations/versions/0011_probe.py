"""The end-to-end probe: `probe_samples` (one row per probe message per partition of the probe
topic, partitioned by day like the other samples), the probe's columns on `derived_broker`, and
the view `broker_state` with them (appended: `CREATE OR REPLACE VIEW` keeps the existing columns
and the reader role's grant; the downgrade recreates the view of 0005).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)

BROKER_COLUMNS: tuple[tuple[str, sa.types.TypeEngine[object]], ...] = (
    ("probe_successes", sa.Integer()),
    ("probe_failures", sa.Integer()),
    ("probe_failing", sa.Boolean()),
    ("probe_produce_latency_seconds", sa.Double()),
    ("probe_end_to_end_latency_seconds", sa.Double()),
    ("probe_commit_latency_seconds", sa.Double()),
)


_BROKER_STATE = """
    SELECT b.cluster, b.broker_id, b.host, b.port, b.rack, b.up, b.first_seen, b.last_seen,
           d.leaders, d.fair_share_leaders, d.leader_imbalance, d.non_preferred_leaders,
           d.replicas, d.disk_total_bytes, d.disk_usable_bytes, d.disk_used_ratio,
           d.evaluated_at{probe}
    FROM brokers b
    LEFT JOIN (
        SELECT d.* FROM derived_broker d
        JOIN latest_evaluations l ON l.cluster = d.cluster AND l.evaluated_at = d.evaluated_at
    ) d USING (cluster, broker_id)
"""


def upgrade() -> None:
    op.create_table(
        "probe_samples",
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("sampled_at", TS, nullable=False),
        sa.Column("broker_id", sa.Integer(), nullable=False),
        sa.Column("leader", sa.Integer(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("produce_seconds", sa.Double(), nullable=True),
        sa.Column("end_to_end_seconds", sa.Double(), nullable=True),
        sa.Column("commit_seconds", sa.Double(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("cluster", "topic", "partition", "sampled_at", name="pk_probe_samples"),
        postgresql_partition_by="RANGE (sampled_at)",
    )
    op.create_index("ix_probe_samples_cluster_sampled_at", "probe_samples", ["cluster", "sampled_at"])
    for name, type_ in BROKER_COLUMNS:
        op.add_column("derived_broker", sa.Column(name, type_, nullable=True))
    probe = "".join(f", d.{name}" for name, _ in BROKER_COLUMNS)
    op.execute(f"CREATE OR REPLACE VIEW broker_state AS {_BROKER_STATE.format(probe=probe)}")


def downgrade() -> None:
    # The view's `d.*` names every column of derived_broker: drop it before the columns.
    op.execute("DROP VIEW broker_state")
    for name, _ in reversed(BROKER_COLUMNS):
        op.drop_column("derived_broker", name)
    op.execute(f"CREATE VIEW broker_state AS {_BROKER_STATE.format(probe='')}")
    op.drop_index("ix_probe_samples_cluster_sampled_at", table_name="probe_samples")
    op.drop_table("probe_samples")
