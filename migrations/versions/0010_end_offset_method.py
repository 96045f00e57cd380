"""Where a partition's end offset comes from: `end_offset_method` (`listed` by the leader in the
sample, or `last_known` when the leader could not give one because the high watermark is held back
under min ISR) and `end_offset_listed_at` (when a last-known end offset was listed), on
partition_offsets and latest_partition_offsets.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

Rows sampled before are `listed`: the constant default costs no table rewrite. No view selects
these tables' columns by name, so none is replaced.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("partition_offsets", "latest_partition_offsets")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table, sa.Column("end_offset_method", sa.Text(), nullable=False, server_default="listed")
        )
        op.add_column(table, sa.Column("end_offset_listed_at", sa.DateTime(timezone=True), nullable=True))
        op.create_check_constraint(
            op.f(f"ck_{table}_end_offset_method"), table, "end_offset_method IN ('listed', 'last_known')"
        )


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_constraint(op.f(f"ck_{table}_end_offset_method"), table, type_="check")
        op.drop_column(table, "end_offset_listed_at")
        op.drop_column(table, "end_offset_method")
