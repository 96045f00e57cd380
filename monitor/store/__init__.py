"""The store stage: PostgreSQL models, engines and sessions, bulk ingest, partitions and retention.

Other stages meet here only through the tables. Data-access functions take a connection or a session
and never commit: the caller owns the transaction.
"""

from __future__ import annotations

from monitor.store.engine import make_engine, mask_url, normalize_url, session_factory
from monitor.store.ingest import copy_rows
from monitor.store.partitions import (
    PARTITIONED_TABLES,
    drop_expired_partitions,
    ensure_partitions,
    maintain_partitions,
)
from monitor.store.schema import metadata

__all__ = [
    "PARTITIONED_TABLES",
    "copy_rows",
    "drop_expired_partitions",
    "ensure_partitions",
    "maintain_partitions",
    "make_engine",
    "mask_url",
    "metadata",
    "normalize_url",
    "session_factory",
]
