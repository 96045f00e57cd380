"""Share groups (KIP-932): `share_group_states` and `share_group_offsets` (samples, partitioned
by day like the others), `share_group_members` and `share_group_support` (latest), and the views
`share_group_lag` (each share partition at its cluster's newest sample) and `share_group_state`
(each group then, with its partitions' lag summed and how it was known).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
LAG_METHOD_CHECK = "lag_method IN ('broker', 'end_minus_start', 'none')"

SHARE_GROUP_LAG = """
    SELECT o.cluster, o.group_id, o.topic, o.partition, o.start_offset, o.end_offset, o.lag,
           o.lag_method, o.sampled_at
    FROM share_group_offsets o
    JOIN share_group_support s ON s.cluster = o.cluster AND s.sampled_at = o.sampled_at
"""
SHARE_GROUP_STATE = """
    SELECT g.cluster, g.group_id, g.state, g.members, g.assignor, g.coordinator, g.sampled_at,
           coalesce(l.partitions, 0) AS partitions, l.lag, l.max_lag,
           coalesce(l.lag_method, 'none') AS lag_method
    FROM share_group_states g
    JOIN share_group_support s ON s.cluster = g.cluster AND s.sampled_at = g.sampled_at
    LEFT JOIN (
        SELECT cluster, group_id, count(*)::int AS partitions, sum(lag)::bigint AS lag,
               max(lag) AS max_lag,
               CASE WHEN bool_or(lag_method = 'end_minus_start') THEN 'end_minus_start'
                    WHEN bool_or(lag_method = 'broker') THEN 'broker' ELSE 'none' END AS lag_method
        FROM share_group_lag GROUP BY cluster, group_id
    ) l ON l.cluster = g.cluster AND l.group_id = g.group_id
"""


def _text(name: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "share_group_states",
        _text("cluster"),
        _text("group_id"),
        sa.Column("sampled_at", TS, nullable=False),
        _text("state"),
        sa.Column("members", sa.Integer(), nullable=False),
        _text("assignor", nullable=True),
        sa.Column("coordinator", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("cluster", "group_id", "sampled_at", name="pk_share_group_states"),
        postgresql_partition_by="RANGE (sampled_at)",
    )
    op.create_index(
        "ix_share_group_states_cluster_sampled_at", "share_group_states", ["cluster", "sampled_at"]
    )
    op.create_table(
        "share_group_offsets",
        _text("cluster"),
        sa.Column("sampled_at", TS, nullable=False),
        _text("group_id"),
        _text("topic"),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("start_offset", sa.BigInteger(), nullable=True),
        sa.Column("end_offset", sa.BigInteger(), nullable=True),
        sa.Column("lag", sa.BigInteger(), nullable=True),
        _text("lag_method"),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(LAG_METHOD_CHECK, name="ck_share_group_offsets_lag_method"),
        sa.PrimaryKeyConstraint(
            "cluster", "sampled_at", "group_id", "topic", "partition", name="pk_share_group_offsets"
        ),
        postgresql_partition_by="RANGE (sampled_at)",
    )
    op.create_table(
        "share_group_members",
        _text("cluster"),
        _text("group_id"),
        _text("member_id"),
        _text("client_id"),
        _text("host"),
        _text("rack", nullable=True),
        sa.Column("assignment", sa.ARRAY(sa.Text()), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "group_id", "member_id", name="pk_share_group_members"),
    )
    op.create_table(
        "share_group_support",
        _text("cluster"),
        sa.Column("available", sa.Boolean(), nullable=False),
        _text("reason", nullable=True),
        sa.Column("sampled_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("cluster", name="pk_share_group_support"),
    )
    op.execute(f"CREATE VIEW share_group_lag AS {SHARE_GROUP_LAG}")
    op.execute(f"CREATE VIEW share_group_state AS {SHARE_GROUP_STATE}")


def downgrade() -> None:
    op.execute("DROP VIEW share_group_state")
    op.execute("DROP VIEW share_group_lag")
    op.drop_table("share_group_support")
    op.drop_table("share_group_members")
    op.drop_table("share_group_offsets")
    op.drop_index("ix_share_group_states_cluster_sampled_at", table_name="share_group_states")
    op.drop_table("share_group_states")
