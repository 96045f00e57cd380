"""A finding's texts besides its summary and description as one map: `annotations` (jsonb, name
-> text, monitor.core.annotations) on `findings` and `alerts`, holding what `runbook` held (as
`annotations.runbook`), and the `runbook` columns dropped. `alert_history` keeps its `runbook`
column, read from the map, and shows the whole map at its end, so queries/ reading it still work.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0027"
down_revision: str | Sequence[str] | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("findings", "alerts")


def _alert_history(runbook: str, extra: str) -> str:
    """`alert_history` as 0005 made it, with `runbook` given as `runbook` and `extra` at its end."""
    return f"""
        CREATE OR REPLACE VIEW alert_history AS
        SELECT id, rule, cluster, entity, entity_key, labels, severity, state, summary, value,
               {runbook} AS runbook, pending_since, starts_at, resolved_at,
               extract(epoch FROM coalesce(resolved_at, updated_at) - starts_at) AS firing_seconds,
               silenced_by, inhibited_by, updated_at{extra}
        FROM alerts
    """


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table, sa.Column("annotations", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False)
        )
        op.execute(
            f"UPDATE {table} SET annotations = jsonb_build_object('runbook', runbook) WHERE runbook IS NOT NULL"
        )
    op.execute(_alert_history("annotations ->> 'runbook'", ", annotations"))
    for table in TABLES:
        op.drop_column(table, "runbook")


def downgrade() -> None:
    # The view loses its last column, which CREATE OR REPLACE cannot do: it is made again as 0005
    # made it, and granted to the reader role again.
    op.execute("DROP VIEW alert_history")
    for table in TABLES:
        op.add_column(table, sa.Column("runbook", sa.Text(), nullable=True))
        op.execute(f"UPDATE {table} SET runbook = annotations ->> 'runbook'")
        op.drop_column(table, "annotations")
    op.execute(_alert_history("runbook", ""))
    op.execute(
        "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'kafka_health_reader') THEN"
        " EXECUTE 'GRANT SELECT ON alert_history TO kafka_health_reader'; END IF;"
        " EXCEPTION WHEN insufficient_privilege"
        " THEN RAISE WARNING 'could not grant kafka_health_reader SELECT on alert_history'; END $$;"
    )
