"""What the read models of a cluster are computed from, checked cheaply: its newest evaluation
(the `latest_evaluations` view, the one definition of "newest"), its newest metadata collection
(`clusters.last_seen`) and the newest change of its findings (every change of a finding sets
its `evaluated_at`; the findings are merged just after the derived rows).

Whatever is computed once and kept until these change (the `/metrics` snapshot,
`monitor.expose.metrics.snapshot`; the pages' and API lists' read models,
`monitor.expose.read.cache`) asks here, so "a new evaluation landed" means the same thing to
each. An evaluation publishes its `derived_cluster` row after every other derived table
(`monitor.core.derived.ENTITIES` order), so a new `evaluated_at` means its rows are all there.

Read-only functions that take a connection and never commit.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, text

Evaluations = tuple[tuple[str, datetime], ...]
"""The newest evaluation of each evaluated cluster, by cluster name."""

Collections = tuple[tuple[str, datetime | None], ...]
"""The newest offsets run of each cluster without an evaluation yet, by cluster name (None before
its first)."""

Version = tuple[datetime | None, datetime, datetime | None]
"""(newest evaluation, newest metadata collection, newest change of a finding) of one cluster;
None before the first evaluation or finding."""

_NEWEST_EVALUATIONS = text("SELECT cluster, evaluated_at FROM latest_evaluations ORDER BY cluster")
UNEVALUATED_CLUSTERS = (
    "SELECT c.name FROM clusters c"
    " WHERE NOT EXISTS (SELECT 1 FROM latest_evaluations l WHERE l.cluster = c.name)"
)
"""The names of the clusters without an evaluation yet (SQL)."""

_UNEVALUATED_COLLECTIONS = text(
    f"""
    SELECT u.name AS cluster,
           (SELECT r.finished_at FROM collection_runs r
            WHERE r.cluster = u.name AND r.job = 'offsets' AND r.status IN ('ok', 'partial')
            ORDER BY r.started_at DESC LIMIT 1) AS collected_at
    FROM ({UNEVALUATED_CLUSTERS}) u
    ORDER BY u.name
    """
)
_VERSION = text(
    """
    SELECT (SELECT evaluated_at FROM latest_evaluations l WHERE l.cluster = c.name) AS evaluated_at,
           c.last_seen AS collected_at,
           (SELECT max(f.evaluated_at) FROM findings f WHERE f.cluster = c.name) AS findings_at
    FROM clusters c WHERE c.name = :c
    """
)


def newest_evaluations(conn: Connection) -> Evaluations:
    """The newest evaluation of each cluster that has one: a new one means new derived state."""
    return tuple((str(row.cluster), row.evaluated_at) for row in conn.execute(_NEWEST_EVALUATIONS))


def unevaluated_collections(conn: Connection) -> Collections:
    """The newest offsets run of each cluster without an evaluation yet (one index probe each): a
    new one means new offset lag of its groups, which readers serve from the store until its first
    evaluation (`monitor.store.fresh_lag.FRESH_PARTITIONS_UNEVALUATED`)."""
    return tuple((str(row.cluster), row.collected_at) for row in conn.execute(_UNEVALUATED_COLLECTIONS))


def cluster_version(conn: Connection, cluster: str) -> Version | None:
    """What `cluster`'s read models come from now (an index lookup per table); None when the
    monitor has never collected a cluster of that name."""
    row = conn.execute(_VERSION, {"c": cluster}).first()
    return None if row is None else (row.evaluated_at, row.collected_at, row.findings_at)
