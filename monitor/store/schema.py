"""Every table of the store in one metadata: the table modules imported together, for what
needs all of them (migrations, the partition maintenance, the schema test)."""

from __future__ import annotations

from sqlalchemy import MetaData

from monitor.store import (
    alerting,
    audit,
    carry,
    evaluation,
    leases,
    models,
    objectives,
    refresh,
    repairs,
    retention,
    rollups,
    share_groups,
)
from monitor.store.base import PARTITION_COLUMN_KEY, Base

TABLE_MODULES = (
    models, evaluation, carry, alerting, audit, retention, repairs, share_groups, leases, objectives, rollups,
    refresh,
)  # fmt: skip
"""Imported for their tables; a new table module goes here."""

metadata: MetaData = Base.metadata


def partitioned_tables() -> dict[str, str]:
    """Name -> time column of every table partitioned by day, in metadata order."""
    return {
        table.name: table.info[PARTITION_COLUMN_KEY]
        for table in Base.metadata.sorted_tables
        if PARTITION_COLUMN_KEY in table.info
    }
