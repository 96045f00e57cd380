"""The resolved findings' and alerts' `resolved_at`, indexed where resolved: the store's hourly
maintenance deletes those past `database.history_retention_days` (monitor.store.expiry) with a
range of these indexes instead of a pass over every resolved row kept.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034"
down_revision: str | Sequence[str] | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("findings", "alerts"):
        op.create_index(
            f"ix_{table}_resolved_at", table, ["resolved_at"], postgresql_where=sa.text("state = 'resolved'")
        )


def downgrade() -> None:
    for table in ("findings", "alerts"):
        op.drop_index(f"ix_{table}_resolved_at", table_name=table)
