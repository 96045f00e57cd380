"""`share_group_support.listed`: the share groups the newest listing named (the group filter
applied), so that the alerts of a share group the cluster no longer has resolve as gone, as a
deleted consumer group's do. Null until the next share-groups run: nothing is gone meanwhile.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("share_group_support", sa.Column("listed", postgresql.ARRAY(sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("share_group_support", "listed")
