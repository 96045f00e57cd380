"""The retention button: retention requests, the audit log, hashed API tokens, and notices for the
owning teams.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import Text

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("notices", "api_tokens", "audit_log", "retention_requests")

# Frozen copies of monitor.store.retention's state lists as of this revision.
_STATES = (
    "'awaiting_approval', 'approved', 'retrying', 'applied', 'verified', 'pending_review', 'expiring', "
    "'reverted', 'refused', 'rejected', 'cancelled', 'failed'"
)
_OPEN = "'awaiting_approval', 'approved', 'retrying', 'applied', 'verified', 'pending_review', 'expiring'"


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "retention_requests",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("tier", sa.Text(), nullable=False),
        sa.Column("team", sa.Text(), nullable=True),
        sa.Column("requested_by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("old_configs", postgresql.JSONB(astext_type=Text()), nullable=False),
        sa.Column("new_configs", postgresql.JSONB(astext_type=Text()), nullable=False),
        sa.Column("duration_ms", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", ts, nullable=True),
        sa.Column(
            "disk",
            postgresql.JSONB(astext_type=Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("refusal", sa.Text(), nullable=True),
        sa.Column("review", sa.Text(), nullable=True),
        sa.Column("approved_by", sa.Text(), nullable=True),
        sa.Column("approved_at", ts, nullable=True),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("updated_at", ts, nullable=False),
        sa.Column("applied_at", ts, nullable=True),
        sa.Column("verified_at", ts, nullable=True),
        sa.Column("reverted_at", ts, nullable=True),
        sa.Column("commit_id", sa.Text(), nullable=True),
        sa.Column("revert_commit_id", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_attempt_at", ts, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("extension_ms", sa.BigInteger(), nullable=True),
        sa.Column("extension_requested_by", sa.Text(), nullable=True),
        sa.Column("extension_reason", sa.Text(), nullable=True),
        sa.Column("expiry_notified_at", ts, nullable=True),
        sa.CheckConstraint(f"state IN ({_STATES})", name=op.f("ck_retention_requests_state")),
        sa.CheckConstraint("tier IN ('instant', 'reviewed')", name=op.f("ck_retention_requests_tier")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retention_requests")),
    )
    op.create_index(
        "uq_retention_requests_open",
        "retention_requests",
        ["cluster", "topic"],
        unique=True,
        postgresql_where=sa.text(f"state IN ({_OPEN})"),
    )
    op.create_index("ix_retention_requests_state", "retention_requests", ["state"], unique=False)
    op.create_index(
        "ix_retention_requests_cluster_topic_created_at",
        "retention_requests",
        ["cluster", "topic", "created_at"],
        unique=False,
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("at", ts, nullable=False),
        sa.Column("request_id", sa.BigInteger(), nullable=True),
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("old_value", postgresql.JSONB(astext_type=Text()), nullable=True),
        sa.Column("new_value", postgresql.JSONB(astext_type=Text()), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("approver", sa.Text(), nullable=True),
        sa.Column("commit_id", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_cluster_topic_at", "audit_log", ["cluster", "topic", "at"], unique=False)
    op.create_index("ix_audit_log_request_id", "audit_log", ["request_id"], unique=False)
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("user_name", sa.Text(), nullable=False),
        sa.Column("teams", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("expires_at", ts, nullable=True),
        sa.Column("revoked_at", ts, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
    )
    op.create_index("uq_api_tokens_token_hash", "api_tokens", ["token_hash"], unique=True)
    op.create_table(
        "notices",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("request_id", sa.BigInteger(), nullable=True),
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("team", sa.Text(), nullable=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("severity", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.CheckConstraint("severity IN ('info', 'warning')", name=op.f("ck_notices_severity")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notices")),
    )
    op.create_index("ix_notices_created_at", "notices", ["created_at"], unique=False)
    # The reader role of 0005 gets SELECT on new tables by default; token hashes are not for it.
    op.execute(
        "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'kafka_health_reader') THEN "
        "REVOKE ALL ON api_tokens FROM kafka_health_reader; END IF; END $$;"
    )


def downgrade() -> None:
    for table in TABLES:
        op.drop_table(table)
