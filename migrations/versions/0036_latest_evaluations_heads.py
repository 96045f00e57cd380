"""`latest_evaluations` (each cluster's newest evaluation, which every "now" view and read joins)
reads one row per cluster and day partition instead of every evaluation kept: it was
`max(evaluated_at) ... GROUP BY cluster` over `derived_cluster`, which holds an evaluation's row
for each of the raw days kept (2,880 a day a cluster at the default interval, 20,160 in the 7
days kept by default), read whole at each use. Now each cluster's newest row is the first of a
backward walk of the (cluster, evaluated_at) index, from one cluster to the next (a loose index
scan); the view keeps its columns.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0036"
down_revision: str | Sequence[str] | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HEADS = """
    WITH RECURSIVE heads(cluster, evaluated_at) AS (
        (SELECT cluster, evaluated_at FROM derived_cluster
         ORDER BY cluster DESC, evaluated_at DESC LIMIT 1)
        UNION ALL
        SELECT n.cluster, n.evaluated_at FROM heads h
        CROSS JOIN LATERAL (
            SELECT d.cluster, d.evaluated_at FROM derived_cluster d WHERE d.cluster < h.cluster
            ORDER BY d.cluster DESC, d.evaluated_at DESC LIMIT 1
        ) n
    )
    SELECT cluster, evaluated_at FROM heads
"""

GROUPED = "SELECT cluster, max(evaluated_at) AS evaluated_at FROM derived_cluster GROUP BY cluster"
"""0005's text."""


def upgrade() -> None:
    op.execute(f"CREATE OR REPLACE VIEW latest_evaluations AS {HEADS}")


def downgrade() -> None:
    op.execute(f"CREATE OR REPLACE VIEW latest_evaluations AS {GROUPED}")
