"""One audit trail for every change a person makes: alert actions (silences, acknowledgements)
join the retention button's `audit_log`, which now says how the actor was identified and from
where.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "audit_log",
        sa.Column("subject", sa.Text(), server_default=sa.text("'retention_request'"), nullable=False),
    )
    op.add_column("audit_log", sa.Column("subject_id", sa.BigInteger(), nullable=True))
    op.add_column("audit_log", sa.Column("via", sa.Text(), nullable=True))
    op.add_column("audit_log", sa.Column("address", sa.Text(), nullable=True))
    op.execute("UPDATE audit_log SET subject_id = request_id")
    op.alter_column("audit_log", "cluster", nullable=True)
    op.alter_column("audit_log", "topic", nullable=True)
    op.create_check_constraint(
        op.f("ck_audit_log_subject"), "audit_log", "subject IN ('retention_request', 'silence', 'incident')"
    )
    op.create_index("ix_audit_log_subject", "audit_log", ["subject", "subject_id"], unique=False)


def downgrade() -> None:
    op.execute("DELETE FROM audit_log WHERE subject <> 'retention_request'")
    op.drop_index("ix_audit_log_subject", table_name="audit_log")
    op.drop_constraint(op.f("ck_audit_log_subject"), "audit_log", type_="check")
    op.alter_column("audit_log", "topic", nullable=False)
    op.alter_column("audit_log", "cluster", nullable=False)
    op.drop_column("audit_log", "address")
    op.drop_column("audit_log", "via")
    op.drop_column("audit_log", "subject_id")
    op.drop_column("audit_log", "subject")
