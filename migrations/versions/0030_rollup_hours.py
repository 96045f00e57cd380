"""The lag history is rolled up hour by hour: `rollup_hours` (which raw hours are rolled up)
replaces `rollup_days`; every hour of a day already rolled up is marked.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0030"
down_revision: str | Sequence[str] | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE rollup_hours (
            source TEXT NOT NULL, hour TIMESTAMP WITH TIME ZONE NOT NULL,
            rolled_at TIMESTAMP WITH TIME ZONE NOT NULL,
            CONSTRAINT pk_rollup_hours PRIMARY KEY (source, hour)
        )
        """
    )
    op.execute(
        """
        INSERT INTO rollup_hours (source, hour, rolled_at)
        SELECT d.source, h.hour, d.rolled_at
        FROM rollup_days d
        CROSS JOIN LATERAL generate_series(
            CAST(d.day AS timestamp) AT TIME ZONE 'UTC',
            CAST(d.day AS timestamp) AT TIME ZONE 'UTC' + interval '23 hours',
            interval '1 hour'
        ) AS h(hour)
        """
    )
    op.execute("DROP TABLE rollup_days")


def downgrade() -> None:
    op.execute(
        """
        CREATE TABLE rollup_days (
            source TEXT NOT NULL, day DATE NOT NULL, rolled_at TIMESTAMP WITH TIME ZONE NOT NULL,
            CONSTRAINT pk_rollup_days PRIMARY KEY (source, day)
        )
        """
    )
    op.execute(
        """
        INSERT INTO rollup_days (source, day, rolled_at)
        SELECT source, CAST(hour AT TIME ZONE 'UTC' AS date), max(rolled_at) FROM rollup_hours
        GROUP BY 1, 2 HAVING count(*) = 24
        """
    )
    op.execute("DROP TABLE rollup_hours")
