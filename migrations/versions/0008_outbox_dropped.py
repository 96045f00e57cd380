"""Notification outbox: a notification can be `dropped` at send time, when what it announces is
no longer true (every alert it tells as firing has resolved since it was decided); the reason is
in its notification_log row.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAME = "ck_notification_outbox_state"


def upgrade() -> None:
    op.drop_constraint(op.f(_NAME), "notification_outbox", type_="check")
    op.create_check_constraint(
        op.f(_NAME), "notification_outbox", "state IN ('pending', 'sending', 'sent', 'failed', 'dropped')"
    )


def downgrade() -> None:
    # A dropped notification was never sent: keep it as failed, with its reason in the log.
    op.execute("UPDATE notification_outbox SET state = 'failed' WHERE state = 'dropped'")
    op.drop_constraint(op.f(_NAME), "notification_outbox", type_="check")
    op.create_check_constraint(
        op.f(_NAME), "notification_outbox", "state IN ('pending', 'sending', 'sent', 'failed')"
    )
