"""Read-only queries the web pages and API share. They take a connection and never write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    name: str
    controller_id: int | None
    brokers_up: int
    brokers_known: int
    topics: int
    partitions: int
    under_replicated: int
    offline: int
    last_seen: datetime | None


_CLUSTERS = text(
    """
    SELECT c.name, c.controller_id, c.last_seen,
           (SELECT count(*) FROM brokers b WHERE b.cluster = c.name AND b.up) AS brokers_up,
           (SELECT count(*) FROM brokers b WHERE b.cluster = c.name) AS brokers_known,
           (SELECT count(*) FROM topics t WHERE t.cluster = c.name AND t.deleted_at IS NULL) AS topics,
           (SELECT count(*) FROM partitions p WHERE p.cluster = c.name) AS partitions,
           (SELECT count(*) FROM partitions p WHERE p.cluster = c.name
                AND cardinality(p.isr) < cardinality(p.replicas)) AS under_replicated,
           (SELECT count(*) FROM partitions p WHERE p.cluster = c.name AND p.leader IS NULL) AS offline
    FROM clusters c ORDER BY c.name
    """
)

_LAST_RUNS = text(
    """
    SELECT DISTINCT ON (cluster, job) cluster, job, started_at, status, duration_ms, error
    FROM collection_runs ORDER BY cluster, job, started_at DESC
    """
)


def cluster_summaries(conn: Connection) -> list[ClusterSummary]:
    return [ClusterSummary(**row._mapping) for row in conn.execute(_CLUSTERS)]


def last_runs(conn: Connection) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in conn.execute(_LAST_RUNS)]


def newest_successful_run(conn: Connection) -> datetime | None:
    value = conn.execute(
        text("SELECT max(finished_at) FROM collection_runs WHERE status IN ('ok', 'partial')")
    ).scalar()
    return value if isinstance(value, datetime) else None
