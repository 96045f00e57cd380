"""The group views show what 0017 added to their tables: `partitions_beyond_end` in `group_lag`
and `group_topic_lag` (the views were made with `d.*`, which PostgreSQL expands once, when a view
is created), so that the group lists say "committed beyond the end".

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = (("group_topic_lag", "derived_group_topic"), ("group_lag", "derived_group"))
ADDED = "partitions_beyond_end"
READER = "kafka_health_reader"


def _latest(columns: str, table: str) -> str:
    """Rows of `table` from the newest evaluation of their cluster (0005's text)."""
    return (
        f"SELECT {columns} FROM {table} d"
        " JOIN latest_evaluations l ON l.cluster = d.cluster AND l.evaluated_at = d.evaluated_at"
    )


def upgrade() -> None:
    # The new column comes last in the table, so the view keeps its columns and gains it at the end.
    for view, table in VIEWS:
        op.execute(f"CREATE OR REPLACE VIEW {view} AS {_latest('d.*', table)}")


def downgrade() -> None:
    conn = op.get_bind()
    for view, table in VIEWS:
        columns = [
            str(name)
            for name in conn.execute(
                sa.text(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                    " AND table_name = :v"
                    " AND column_name <> :added ORDER BY ordinal_position"
                ),
                {"v": view, "added": ADDED},
            ).scalars()
        ]
        op.execute(f"DROP VIEW {view}")
        op.execute(f"CREATE VIEW {view} AS {_latest(', '.join(f'd.{c}' for c in columns), table)}")
        op.execute(
            f"""
            DO $$
            BEGIN
                IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN
                    EXECUTE 'GRANT SELECT ON {view} TO {READER}';
                END IF;
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE WARNING 'could not grant {READER} SELECT on {view}';
            END
            $$;
            """
        )
