"""What is over is kept for `database.history_retention_days`, then deleted.

Samples have their partitions and rollups (monitor.store.partitions); this is the rest of the
history a fleet accumulates: every finding and alert that resolved, every incident that closed
(its acknowledgements go with it), every notification delivered or given up and its attempts,
every silence that ended, the retention button's notices and the data-loss events. Nothing that
is still open is ever deleted here: a firing alert, a pending notification, an active silence.

The resolved findings and alerts are found through their partial `resolved_at` indexes (migration
0034); each table is one statement in its own transaction, so a first run after an upgrade that deletes
years of rows holds no lock the alert cycle waits for (it never updates a row that is over).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, text

from monitor.core.vocabulary import OUTBOX_UNDELIVERED
from monitor.store.base import one_of

EXPIRED: tuple[tuple[str, str], ...] = (
    ("findings", "state = 'resolved' AND resolved_at < :before"),
    ("alerts", "state = 'resolved' AND resolved_at < :before"),
    ("alert_groups", "closed_at < :before"),
    ("notification_outbox", f"NOT {one_of('state', OUTBOX_UNDELIVERED)} AND created_at < :before"),
    ("notification_log", "at < :before"),
    ("silences", "LEAST(ends_at, COALESCE(expired_at, ends_at)) < :before"),
    ("notices", "created_at < :before"),
    ("data_loss_events", "detected_at < :before"),
)
"""(table, the condition of its rows that are over and older than :before)."""


def prune_history(engine: Engine, before: datetime) -> dict[str, int]:
    """Delete the rows of EXPIRED older than `before`; how many per table (tables with none left out)."""
    deleted: dict[str, int] = {}
    for table, condition in EXPIRED:
        with engine.begin() as conn:
            count = conn.execute(text(f"DELETE FROM {table} WHERE {condition}"), {"before": before}).rowcount
        if count:
            deleted[table] = int(count)
    return deleted
