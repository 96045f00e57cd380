"""objective_groups: which groups each lag objective applies to in the next evaluation of a plan,
decided on the driver with RE2 (monitor.store.objectives) instead of matched by Spark.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0031"
down_revision: str | Sequence[str] | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE objective_groups (
            plan_id TEXT NOT NULL, objective TEXT NOT NULL, cluster TEXT NOT NULL, group_id TEXT NOT NULL,
            CONSTRAINT pk_objective_groups PRIMARY KEY (plan_id, objective, cluster, group_id),
            CONSTRAINT fk_objective_groups_plan_id_evaluation_clocks FOREIGN KEY (plan_id)
                REFERENCES evaluation_clocks (plan_id) ON DELETE CASCADE
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE objective_groups")
