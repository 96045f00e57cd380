"""Read functions the dashboard pages need beyond the rest of the read layer (`clusters`, `topics`,
`lag`, `history`): the alerts someone is being told about, the groups stopped, and each
group's worst partition status, which the group roll-up folds into ERR. Over the same views, from
the same newest evaluation; they take a connection and never write (see `queries` for the
conventions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.vocabulary import STOPPED_STATUSES, Severity, most_severe_first_sql
from monitor.expose.read.lag import WORST_STATUS_FIRST
from monitor.expose.read.queries import records

PAGING_SEVERITY: Severity = "critical"
"""The severity that pages: an overview card counts its alerts apart."""
_FIRING = "state = 'firing' AND silenced_by IS NULL AND inhibited_by IS NULL"
"""Alerts someone is being told about: firing, neither silenced nor inhibited."""
_ALERTING = (
    "SELECT cluster, count(*) AS firing, count(*) FILTER (WHERE severity = :pages) AS critical"
    f" FROM alerts WHERE {_FIRING} {{only}} GROUP BY cluster"
)
"""Alerts firing and critical per cluster (`only`: a condition narrowing the clusters)."""


@dataclass(frozen=True, slots=True)
class ClusterTrouble:
    """What a cluster's overview card counts beside `read_clusters.ClusterState`."""

    cluster: str
    groups_stopped: int
    """groups with a topic in a stopped status (`STOPPED_STATUSES`; the group status folds them into
    ERR)"""
    groups_lost_data: int
    alerts_firing: int
    alerts_critical: int


@dataclass(frozen=True, slots=True)
class FiringAlert:
    id: int
    rule: str
    severity: str
    summary: str
    starts_at: datetime | None


def cluster_trouble(conn: Connection, cluster: str | None = None) -> dict[str, ClusterTrouble]:
    """Per cluster (or of `cluster` only): groups stopped and that lost data (newest
    evaluation), alerts firing."""
    only = "AND cluster = :c" if cluster is not None else ""
    found = records(
        conn,
        ClusterTrouble,
        f"""
        WITH stopped AS (
            SELECT cluster, count(DISTINCT group_id) AS n FROM group_topic_lag
            WHERE status = ANY(:stopped) {only} GROUP BY cluster
        ), lost AS (
            SELECT cluster, count(*) AS n FROM group_lag WHERE data_loss_occurred {only} GROUP BY cluster
        ), alerting AS ({_ALERTING.format(only=only)})
        SELECT c.name AS cluster, coalesce(s.n, 0)::int AS groups_stopped,
               coalesce(l.n, 0)::int AS groups_lost_data, coalesce(a.firing, 0)::int AS alerts_firing,
               coalesce(a.critical, 0)::int AS alerts_critical
        FROM clusters c
        LEFT JOIN stopped s ON s.cluster = c.name
        LEFT JOIN lost l ON l.cluster = c.name
        LEFT JOIN alerting a ON a.cluster = c.name
        {"WHERE c.name = :c" if cluster is not None else ""}
        """,
        {"stopped": list(STOPPED_STATUSES), "pages": PAGING_SEVERITY, "c": cluster},
    )
    return {t.cluster: t for t in found}


def alert_counts(conn: Connection, cluster: str) -> tuple[int, int]:
    """(alerts firing, of which critical) on `cluster`: `ClusterTrouble`'s alert counts alone,
    for a page that keeps the rest of the trouble until the next evaluation."""
    row = conn.execute(
        text(_ALERTING.format(only="AND cluster = :c")), {"c": cluster, "pages": PAGING_SEVERITY}
    ).first()
    return (int(row.firing), int(row.critical)) if row is not None else (0, 0)


@dataclass(frozen=True, slots=True)
class OpenFinding:
    """A rule's match that holds now (pending or firing): what colours the row of its entity."""

    rule: str
    entity: str
    labels: dict[str, str]
    """The entity's key columns (`group_id`, `topic`, `partition`, `broker_id`) as text, and the
    rule's own labels."""
    severity: str


def open_findings(
    conn: Connection, cluster: str, *, topics: Sequence[str], groups: Sequence[str]
) -> list[OpenFinding]:
    """The findings of `cluster` that are not resolved, from the newest evaluation that wrote them,
    on the brokers, on the `topics` and on the `groups` (the rows a page shows)."""
    return records(
        conn,
        OpenFinding,
        "SELECT rule, entity, labels, severity FROM findings WHERE cluster = :c AND state <> 'resolved' AND"
        " (labels ? 'broker_id' OR labels->>'topic' = ANY(:topics) OR labels->>'group_id' = ANY(:groups))",
        {"c": cluster, "topics": list(topics), "groups": list(groups)},
    )


def worst_partition_status(
    conn: Connection, cluster: str, topic: str | None = None, *, groups: Sequence[str] | None = None
) -> dict[str, str]:
    """group id -> the worst status of its partitions (on `topic` when given): STOP, STALL and
    REWIND stay apart, where the group status says ERR. Given `groups` (a page's), of those only,
    and a group whose partitions are all OK is left out."""
    rows = conn.execute(
        text(
            f"""
            SELECT DISTINCT ON (group_id) group_id, status FROM group_partition_lag
            WHERE cluster = :c AND (CAST(:t AS text) IS NULL OR topic = :t) AND status IS NOT NULL
              {"AND group_id = ANY(:g) AND status <> 'OK'" if groups is not None else ""}
            ORDER BY group_id, {WORST_STATUS_FIRST}
            """
        ),
        {"c": cluster, "t": topic, "g": list(groups or ())},
    )
    return {str(row.group_id): str(row.status) for row in rows}


def data_loss_limits(conn: Connection, cluster: str, topic: str) -> dict[str, str]:
    """group id -> which retention limit (time or size) deletes its oldest unread message on
    `topic` first, for the partition closest to losing data."""
    rows = conn.execute(
        text(
            """
            SELECT DISTINCT ON (group_id) group_id, data_loss_limit FROM group_partition_lag
            WHERE cluster = :c AND topic = :t AND time_until_data_loss_seconds IS NOT NULL
              AND data_loss_limit IS NOT NULL
            ORDER BY group_id, time_until_data_loss_seconds
            """
        ),
        {"c": cluster, "t": topic},
    )
    return {str(row.group_id): str(row.data_loss_limit) for row in rows}


def firing_alerts(
    conn: Connection,
    cluster: str,
    *,
    topic: str | None = None,
    group_id: str | None = None,
    entities: Sequence[str] | None = None,
) -> list[FiringAlert]:
    """Alerts firing on the cluster, or on one topic or group of it, critical first; of rules on
    `entities` only, when given."""
    params: dict[str, Any] = {"c": cluster, "t": topic, "g": group_id, "e": list(entities or ())}
    only = "AND entity = ANY(:e)" if entities else ""
    return records(
        conn,
        FiringAlert,
        f"""
        SELECT id, rule, severity, summary, starts_at FROM alerts
        WHERE {_FIRING} AND cluster = :c {only}
          AND (CAST(:t AS text) IS NULL OR labels->>'topic' = :t)
          AND (CAST(:g AS text) IS NULL OR labels->>'group_id' = :g)
        ORDER BY {most_severe_first_sql("severity")}, starts_at, id
        LIMIT 50
        """,
        params,
    )
