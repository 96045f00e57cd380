"""An index on `audit_log (actor, at)`: the command line counts what one person did in the last
minute before it makes another change (`web.identity.change_requests_per_minute`), and an incident
review asks what one person did when.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_audit_log_actor_at", "audit_log", ["actor", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_actor_at", table_name="audit_log")
