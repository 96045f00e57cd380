"""`latest_commits`: each group-partition's newest observed commit (its committed offset and
commit time), written by the commits job alone as it observes commits, so that what users read
shows a commit at once, without waiting for the offsets job's next cycle or the next evaluation.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LATEST_FILLFACTOR = 70


def upgrade() -> None:
    op.create_table(
        "latest_commits",
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("committed_offset", sa.BigInteger(), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "group_id", "topic", "partition", name="pk_latest_commits"),
        postgresql_with={"fillfactor": LATEST_FILLFACTOR},
    )


def downgrade() -> None:
    op.drop_table("latest_commits")
