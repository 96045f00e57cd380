"""What the cluster no longer has, and a committed offset beyond the log end.

- `latest_group_offsets.gone_at`: when the collector saw the committed offset gone (the group
  deleted, its offsets deleted or expired);
- `brokers.unregistered_at`: when the controller no longer had the broker registered
  (decommissioned, told apart from a broker that is down and still registered);
- `findings.resolved_reason` and `alerts.resolved_reason`: `gone` when a finding resolved because
  its entity is gone (vocabulary.RESOLVE_REASONS);
- `derived_broker.unregistered`, `derived_group_partition.committed_beyond_end` and `partitions_beyond_end` of `derived_group_topic` and `derived_group`.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
REASONS = "resolved_reason IN ('gone')"


def upgrade() -> None:
    op.add_column("latest_group_offsets", sa.Column("gone_at", TS, nullable=True))
    op.add_column("brokers", sa.Column("unregistered_at", TS, nullable=True))
    for table in ("findings", "alerts"):
        op.add_column(table, sa.Column("resolved_reason", sa.Text(), nullable=True))
        op.create_check_constraint(f"ck_{table}_resolved_reason", table, REASONS)
    op.add_column("derived_group_partition", sa.Column("committed_beyond_end", sa.Boolean(), nullable=True))
    for table in ("derived_group_topic", "derived_group"):
        op.add_column(table, sa.Column("partitions_beyond_end", sa.Integer(), nullable=True))
    op.add_column("derived_broker", sa.Column("unregistered", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("derived_broker", "unregistered")
    for table in ("derived_group", "derived_group_topic"):
        op.drop_column(table, "partitions_beyond_end")
    op.drop_column("derived_group_partition", "committed_beyond_end")
    for table in ("alerts", "findings"):
        op.drop_constraint(f"ck_{table}_resolved_reason", table, type_="check")
        op.drop_column(table, "resolved_reason")
    op.drop_column("brokers", "unregistered_at")
    op.drop_column("latest_group_offsets", "gone_at")
