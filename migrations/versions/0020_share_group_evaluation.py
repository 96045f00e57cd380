"""The share groups' derived tables: `derived_share_group_topic` and `derived_share_group` (the
columns of `monitor.core.derived` as of this revision), partitioned by day on `evaluated_at` like
the other derived tables.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)

_LAG: list[tuple[str, sa.types.TypeEngine[object]]] = [
    ("lag", sa.BigInteger()),
    ("max_lag", sa.BigInteger()),
    ("lag_method", sa.Text()),
    ("lag_growing", sa.Boolean()),
    ("produce_rate", sa.Double()),
    ("consume_rate", sa.Double()),
    ("backlog_seconds", sa.Double()),
    ("stalled_seconds", sa.Double()),
    ("stalled_partitions", sa.Integer()),
    ("partitions", sa.Integer()),
    ("group_state", sa.Text()),
    ("members", sa.Integer()),
    ("sampled", sa.Boolean()),
]

# (table, key columns, [(column, type)]) as of this revision.
DERIVED: list[tuple[str, tuple[str, ...], list[tuple[str, sa.types.TypeEngine[object]]]]] = [
    (
        "derived_share_group_topic",
        ("group_id", "topic"),
        [("group_id", sa.Text()), ("topic", sa.Text()), *_LAG],
    ),
    (
        "derived_share_group",
        ("group_id",),
        [("group_id", sa.Text()), ("topics", sa.Integer()), *_LAG],
    ),
]


def _create(
    table: str, keys: tuple[str, ...], columns: list[tuple[str, sa.types.TypeEngine[object]]]
) -> None:
    """One derived table: `cluster`, its columns and `evaluated_at`, keyed by the cluster, `keys`
    and the evaluation time, partitioned by day, with the (cluster, evaluated_at) index."""
    key = ("cluster", *keys, "evaluated_at")
    every = [("cluster", sa.Text()), *columns, ("evaluated_at", TS)]
    op.create_table(
        table,
        *(sa.Column(name, kind, nullable=name not in key) for name, kind in every),
        sa.PrimaryKeyConstraint(*key, name=f"pk_{table}"),
        postgresql_partition_by="RANGE (evaluated_at)",
    )
    op.create_index(f"ix_{table}_cluster_evaluated_at", table, ["cluster", "evaluated_at"])


def upgrade() -> None:
    for table, keys, columns in DERIVED:
        _create(table, keys, columns)


def downgrade() -> None:
    for table, _, _ in reversed(DERIVED):
        op.drop_table(table)
