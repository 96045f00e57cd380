"""evaluation_carried and evaluation_clocks.completed_at: the groups an incremental evaluation
copies from its plan's previous evaluation, and that evaluation (monitor.store.carry).

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0032"
down_revision: str | Sequence[str] | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE evaluation_clocks ADD COLUMN completed_at TIMESTAMP WITH TIME ZONE")
    op.execute(
        """
        CREATE TABLE evaluation_carried (
            plan_id TEXT NOT NULL, cluster TEXT NOT NULL, group_id TEXT NOT NULL,
            CONSTRAINT pk_evaluation_carried PRIMARY KEY (plan_id, cluster, group_id),
            CONSTRAINT fk_evaluation_carried_plan_id_evaluation_clocks FOREIGN KEY (plan_id)
                REFERENCES evaluation_clocks (plan_id) ON DELETE CASCADE
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE evaluation_carried")
    op.execute("ALTER TABLE evaluation_clocks DROP COLUMN completed_at")
