"""Lag objectives: `objective_minutes` (whether each group was bad in each minute, per objective),
`derived_lag_objective` (the columns of `monitor.core.derived` as of this revision, partitioned by
day like the other derived tables) and the view `lag_objective_daily`, each objective's
compliance per day for incident reviews.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | Sequence[str] | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
TABLE = "derived_lag_objective"
KEY = ("cluster", "objective", "group_id", "evaluated_at")
COLUMNS: list[tuple[str, sa.types.TypeEngine[object]]] = [
    ("cluster", sa.Text()),
    ("objective", sa.Text()),
    ("group_id", sa.Text()),
    ("lag_threshold_seconds", sa.Double()),
    ("target", sa.Double()),
    ("window_days", sa.Integer()),
    ("max_lag_seconds", sa.Double()),
    ("minute_bad", sa.Boolean()),
    ("burn_rate_5m", sa.Double()),
    ("burn_rate_30m", sa.Double()),
    ("burn_rate_1h", sa.Double()),
    ("burn_rate_6h", sa.Double()),
    ("burn_rate_3d", sa.Double()),
    ("bad_minutes", sa.BigInteger()),
    ("recorded_minutes", sa.BigInteger()),
    ("budget_remaining", sa.Double()),
    ("compliance", sa.Double()),
    ("sampled", sa.Boolean()),
    ("evaluated_at", TS),
]

DAILY = """
CREATE VIEW lag_objective_daily AS
SELECT objective, cluster, group_id, date_trunc('day', minute, 'UTC') AS day,
       count(*) FILTER (WHERE NOT bad) AS good_minutes,
       count(*) FILTER (WHERE bad) AS bad_minutes,
       round(100.0 * count(*) FILTER (WHERE NOT bad) / count(*), 3) AS compliance
FROM objective_minutes
GROUP BY objective, cluster, group_id, date_trunc('day', minute, 'UTC')
"""


def upgrade() -> None:
    op.create_table(
        "objective_minutes",
        sa.Column("cluster", sa.Text(), nullable=False),
        sa.Column("objective", sa.Text(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=False),
        sa.Column("minute", TS, nullable=False),
        sa.Column("bad", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "objective", "group_id", "minute", name="pk_objective_minutes"),
    )
    op.create_index("ix_objective_minutes_minute", "objective_minutes", ["minute"])
    op.create_table(
        TABLE,
        *(sa.Column(name, kind, nullable=name not in KEY) for name, kind in COLUMNS),
        sa.PrimaryKeyConstraint(*KEY, name=f"pk_{TABLE}"),
        postgresql_partition_by="RANGE (evaluated_at)",
    )
    op.create_index(f"ix_{TABLE}_cluster_evaluated_at", TABLE, ["cluster", "evaluated_at"])
    op.execute(DAILY)


def downgrade() -> None:
    op.execute("DROP VIEW lag_objective_daily")
    op.drop_table(TABLE)
    op.drop_table("objective_minutes")
