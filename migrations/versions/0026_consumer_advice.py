"""The consumer advice: `consumers_needed`, `advice_limited_by`, `hot_topic` and `hot_partition`
on `derived_group_topic` and `derived_group` (monitor.core.derived), and the group views
(`group_topic_lag`, `group_lag`, made with `d.*`) recreated to show them at their end.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | Sequence[str] | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("derived_group_topic", "derived_group")
ADDED: tuple[tuple[str, sa.types.TypeEngine[object]], ...] = (
    ("consumers_needed", sa.Integer()),
    ("advice_limited_by", sa.Text()),
    ("hot_topic", sa.Text()),
    ("hot_partition", sa.Integer()),
)
VIEWS = (("group_topic_lag", "derived_group_topic"), ("group_lag", "derived_group"))
READER = "kafka_health_reader"


def _latest(columns: str, table: str) -> str:
    """Rows of `table` from the newest evaluation of their cluster (0005's text)."""
    return (
        f"SELECT {columns} FROM {table} d"
        " JOIN latest_evaluations l ON l.cluster = d.cluster AND l.evaluated_at = d.evaluated_at"
    )


def upgrade() -> None:
    for table in TABLES:
        for column, type_ in ADDED:
            op.add_column(table, sa.Column(column, type_, nullable=True))
    for view, table in VIEWS:
        op.execute(f"CREATE OR REPLACE VIEW {view} AS {_latest('d.*', table)}")


def downgrade() -> None:
    # The views go first (they depend on the columns) and come back as 0025 made them: `d.*` of
    # the tables without the columns, granted to the reader role again.
    for view, _ in VIEWS:
        op.execute(f"DROP VIEW {view}")
    for table in reversed(TABLES):
        for column, _ in reversed(ADDED):
            op.drop_column(table, column)
    for view, table in VIEWS:
        op.execute(f"CREATE VIEW {view} AS {_latest('d.*', table)}")
        op.execute(
            f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN"
            f" EXECUTE 'GRANT SELECT ON {view} TO {READER}'; END IF; EXCEPTION WHEN insufficient_privilege"
            f" THEN RAISE WARNING 'could not grant {READER} SELECT on {view}'; END $$;"
        )
