"""The data-loss risk and the sampled flag: new derived columns, and the latest views that show them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

- derived_group_partition: time_to_read_seconds, data_loss_margin_seconds, sampled;
- derived_group_topic, derived_group: data_loss_margin_seconds, sampled;
- derived_topic: min_data_loss_margin_seconds;
- the views of 0005 that select `d.*` of those tables are replaced by the same text, which takes
  in the new columns (appended at the end, as CREATE OR REPLACE VIEW allows, keeping their
  grants); retention_headroom gains min_data_loss_margin_seconds at its end.

The downgrade drops those views, then the columns, and creates the views as 0005 left them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

READER = "kafka_health_reader"

COLUMNS: list[tuple[str, str, sa.types.TypeEngine[object]]] = [
    ("derived_group_partition", "time_to_read_seconds", sa.Double()),
    ("derived_group_partition", "data_loss_margin_seconds", sa.Double()),
    ("derived_group_partition", "sampled", sa.Boolean()),
    ("derived_group_topic", "data_loss_margin_seconds", sa.Double()),
    ("derived_group_topic", "sampled", sa.Boolean()),
    ("derived_group", "data_loss_margin_seconds", sa.Double()),
    ("derived_group", "sampled", sa.Boolean()),
    ("derived_topic", "min_data_loss_margin_seconds", sa.Double()),
]


def _latest(table: str) -> str:
    """Rows of `table` from the newest evaluation of their cluster (0005's text)."""
    return f"""
        SELECT d.* FROM {table} d
        JOIN latest_evaluations l ON l.cluster = d.cluster AND l.evaluated_at = d.evaluated_at
    """


def _retention_headroom(with_margin: bool) -> str:
    """0005's retention_headroom, with min_data_loss_margin_seconds at its end or without."""
    margin_in = ",\n                   min(data_loss_margin_seconds) AS min_data_loss_margin_seconds"
    margin_out = ",\n               u.min_data_loss_margin_seconds"
    return (
        """
        WITH urgent AS (
            SELECT cluster, topic, partition,
                   count(*) FILTER (WHERE offset_lag > 0) AS lagging_groups,
                   min(time_until_data_loss_seconds) AS min_time_until_data_loss_seconds,
                   bool_or(coalesce(data_loss_occurred, false)) AS data_loss_occurred"""
        + (margin_in if with_margin else "")
        + """
            FROM group_partition_lag GROUP BY cluster, topic, partition
        )
        SELECT p.cluster, p.topic, p.partition, p.evaluated_at, p.size_bytes, p.retention_bytes,
               CASE WHEN p.retention_bytes > 0 THEN p.retention_bytes - p.size_bytes END
                   AS headroom_bytes,
               p.size_ratio, p.retention_ms, p.time_coverage_seconds,
               p.retention_shortfall_seconds, p.produce_rate, p.produce_bytes_rate,
               coalesce(u.lagging_groups, 0) AS lagging_groups,
               u.min_time_until_data_loss_seconds,
               coalesce(u.data_loss_occurred, false) AS data_loss_occurred"""
        + (margin_out if with_margin else "")
        + """
        FROM ("""
        + _latest("derived_partition")
        + """) p
        LEFT JOIN urgent u USING (cluster, topic, partition)
        """
    )


def _views(with_margin: bool) -> list[tuple[str, str]]:
    """The views these columns show in, in creation order."""
    return [
        ("group_partition_lag", _latest("derived_group_partition")),
        ("group_topic_lag", _latest("derived_group_topic")),
        ("group_lag", _latest("derived_group")),
        ("topic_state", _latest("derived_topic")),
        ("retention_headroom", _retention_headroom(with_margin)),
    ]


_GRANT_VIEWS = f"""
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN
        EXECUTE 'GRANT SELECT ON {{views}} TO {READER}';
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'could not grant {READER} SELECT on the recreated views';
END
$$;
"""


def upgrade() -> None:
    for table, column, type_ in COLUMNS:
        op.add_column(table, sa.Column(column, type_, nullable=True))
    for name, body in _views(with_margin=True):
        op.execute(f"CREATE OR REPLACE VIEW {name} AS {body}")


def downgrade() -> None:
    views = _views(with_margin=False)
    for name, _ in reversed(views):
        op.execute(f"DROP VIEW {name}")
    for table, column, _ in reversed(COLUMNS):
        op.drop_column(table, column)
    for name, body in views:
        op.execute(f"CREATE VIEW {name} AS {body}")
    op.execute(_GRANT_VIEWS.replace("{views}", ", ".join(name for name, _ in views)))
