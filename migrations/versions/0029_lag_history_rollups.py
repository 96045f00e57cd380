"""The lag history kept beyond the raw evaluations: 15-minute and hourly rollups.

- derived_group_15m, derived_group_1h, derived_group_partition_15m, derived_group_partition_1h:
  the key of the raw table, `evaluated_at` (the bucket's newest evaluation), `bucket` (its start),
  `samples`, and the summaries of `monitor.store.rollups` (worst, least and newest lag, mean rates,
  worst status, newest offsets); partitioned by day on `evaluated_at` like the raw tables, so
  their own retention is a partition drop;
- rollup_days: which raw days are rolled up, so each is rolled up once;
- oldest_day_partition(table): the start of the oldest ``<table>_pYYYYMMDD`` partition;
- group_lag_history and lag_history: the raw rows, then the 15-minute rows before the oldest raw
  day, then the hourly rows before the oldest 15-minute day, with the same columns as before and
  `resolution` ('raw', '15m', '1h') at the end: a window of any age reads the finest rows kept.

Revision ID: 0029
Revises: 0027
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0029"
down_revision: str | Sequence[str] | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LAG = """
    offset_lag BIGINT, offset_lag_min BIGINT, offset_lag_last BIGINT,
    lag_seconds DOUBLE PRECISION, lag_seconds_min DOUBLE PRECISION, lag_seconds_last DOUBLE PRECISION,
    append_lag_seconds DOUBLE PRECISION, commit_lag_seconds DOUBLE PRECISION,
    consume_rate DOUBLE PRECISION, produce_rate DOUBLE PRECISION,
    time_until_data_loss_seconds DOUBLE PRECISION, data_loss_occurred BOOLEAN, status TEXT,
"""

# raw table -> (its key after cluster, the rollup's own columns) as of this revision
ROLLED: dict[str, tuple[str, str]] = {
    "derived_group": (
        "group_id",
        "max_offset_lag BIGINT, max_lag_seconds DOUBLE PRECISION, group_state TEXT, members INTEGER",
    ),
    "derived_group_partition": (
        "group_id, topic, partition",
        "committed_offset BIGINT, end_offset BIGINT, lag_seconds_method TEXT, "
        "committed_offset_min BIGINT, end_offset_min BIGINT",
    ),
}
KEY_TYPES = {"group_id": "TEXT", "topic": "TEXT", "partition": "INTEGER"}

# view -> (raw table, its columns as migration 0005 made them)
VIEWS: dict[str, tuple[str, str]] = {
    "lag_history": (
        "derived_group_partition",
        "cluster, group_id, topic, partition, evaluated_at, committed_offset, end_offset, "
        "offset_lag, lag_seconds, lag_seconds_method, append_lag_seconds, "
        "commit_lag_seconds, consume_rate, produce_rate, time_until_data_loss_seconds, "
        "data_loss_occurred, status",
    ),
    "group_lag_history": (
        "derived_group",
        "cluster, group_id, evaluated_at, offset_lag, max_offset_lag, lag_seconds, "
        "max_lag_seconds, append_lag_seconds, commit_lag_seconds, consume_rate, "
        "produce_rate, time_until_data_loss_seconds, data_loss_occurred, status, "
        "group_state, members",
    ),
}

_OLDEST = r"""
CREATE FUNCTION oldest_day_partition(parent regclass) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CAST(CAST(min(substring(c.relname FROM '_p(\d{8})$')) AS date) AS timestamp) AT TIME ZONE 'UTC'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = parent AND c.relname ~ '_p\d{8}$'
$$
"""


def _table(raw: str, suffix: str) -> str:
    key, own = ROLLED[raw]
    name = f"{raw}_{suffix}"
    keys = ", ".join(f"{k} {KEY_TYPES[k]} NOT NULL" for k in key.split(", "))
    return f"""
        CREATE TABLE {name} (
            cluster TEXT NOT NULL, {keys}, evaluated_at TIMESTAMP WITH TIME ZONE NOT NULL,
            bucket TIMESTAMP WITH TIME ZONE NOT NULL, samples INTEGER NOT NULL, {_LAG} {own},
            CONSTRAINT pk_{name} PRIMARY KEY (cluster, {key}, evaluated_at)
        ) PARTITION BY RANGE (evaluated_at)
    """


def _history(raw: str, columns: str) -> str:
    fine, coarse = f"{raw}_15m", f"{raw}_1h"
    return f"""
        SELECT {columns}, 'raw' AS resolution FROM {raw}
        UNION ALL
        SELECT {columns}, '15m' FROM {fine}
        WHERE evaluated_at < (SELECT coalesce(oldest_day_partition('{raw}'), 'infinity'))
        UNION ALL
        SELECT {columns}, '1h' FROM {coarse}
        WHERE evaluated_at < (SELECT coalesce(least(oldest_day_partition('{raw}'),
                                                    oldest_day_partition('{fine}')), 'infinity'))
    """


def upgrade() -> None:
    for raw in ROLLED:
        for suffix in ("15m", "1h"):
            op.execute(_table(raw, suffix))
    op.execute(
        """
        CREATE TABLE rollup_days (
            source TEXT NOT NULL, day DATE NOT NULL, rolled_at TIMESTAMP WITH TIME ZONE NOT NULL,
            CONSTRAINT pk_rollup_days PRIMARY KEY (source, day)
        )
        """
    )
    op.execute(_OLDEST)
    for view, (raw, columns) in VIEWS.items():
        op.execute(f"CREATE OR REPLACE VIEW {view} AS {_history(raw, columns)}")


def downgrade() -> None:
    for view, (raw, columns) in VIEWS.items():
        # A view's columns cannot be dropped in place: replaced as 0005 made it.
        op.execute(f"DROP VIEW {view}")
        op.execute(f"CREATE VIEW {view} AS SELECT {columns} FROM {raw}")
    op.execute("DROP FUNCTION oldest_day_partition(regclass)")
    op.execute("DROP TABLE rollup_days")
    for raw in ROLLED:
        for suffix in ("15m", "1h"):
            op.execute(f"DROP TABLE {raw}_{suffix}")
