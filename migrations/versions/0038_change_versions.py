"""`change_versions`: a counter per subject raised in the transaction that changes it (each
cluster's findings, the alerts), so the alert cycle keeps the open alerts between cycles and
reads again only the findings of the clusters an evaluation changed.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0038"
down_revision: str | Sequence[str] | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "change_versions",
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("subject", name="pk_change_versions"),
    )


def downgrade() -> None:
    op.drop_table("change_versions")
