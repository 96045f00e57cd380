"""The repair actions: `repair_requests` (preferred leader elections and leadership moves, reviewed
and audited like retention requests), and `repair_request` as a subject of `audit_log`.

Revision ID: 0012
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_SUBJECTS = "subject IN ('retention_request', 'silence', 'incident')"
NEW_SUBJECTS = "subject IN ('retention_request', 'silence', 'incident', 'repair_request')"


def upgrade() -> None:
    op.create_table(
        "repair_requests",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("finding_id", sa.BigInteger(), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("broker_id", sa.Integer(), nullable=True),
        sa.Column("requested_by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("plan", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("refusal", sa.Text(), nullable=True),
        sa.Column("approved_by", sa.Text(), nullable=True),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("outcome_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "kind IN ('preferred_election', 'move_leadership')", name=op.f("ck_repair_requests_kind")
        ),
        sa.CheckConstraint(
            "state IN ('awaiting_approval', 'approved', 'applied', 'refused', 'rejected', 'cancelled', "
            "'failed')",
            name=op.f("ck_repair_requests_state"),
        ),
        sa.CheckConstraint("outcome IN ('resolved', 'unresolved')", name=op.f("ck_repair_requests_outcome")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repair_requests")),
    )
    op.create_index("ix_repair_requests_finding_id", "repair_requests", ["finding_id"], unique=False)
    op.create_index(
        "uq_repair_requests_open",
        "repair_requests",
        ["cluster"],
        unique=True,
        postgresql_where=sa.text("state IN ('awaiting_approval', 'approved')"),
    )
    op.drop_constraint(op.f("ck_audit_log_subject"), "audit_log", type_="check")
    op.create_check_constraint(op.f("ck_audit_log_subject"), "audit_log", NEW_SUBJECTS)


def downgrade() -> None:
    op.execute("DELETE FROM audit_log WHERE subject = 'repair_request'")
    op.drop_constraint(op.f("ck_audit_log_subject"), "audit_log", type_="check")
    op.create_check_constraint(op.f("ck_audit_log_subject"), "audit_log", OLD_SUBJECTS)
    op.drop_index("uq_repair_requests_open", table_name="repair_requests")
    op.drop_index("ix_repair_requests_finding_id", table_name="repair_requests")
    op.drop_table("repair_requests")
