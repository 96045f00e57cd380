"""Read functions the dashboard pages need beyond `monitor.expose.queries`: one call per block of
a page, each over the SQL views of migration 0005 (the read model), so every number on a page
comes from its cluster's newest evaluation. They take a connection and never write.

Rows come back as plain dicts keyed by view column; the pages decide what is red or amber.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

Row = dict[str, Any]

SEVERITY_ORDER = (
    "CASE {col} WHEN 'REWIND' THEN 6 WHEN 'STALL' THEN 5 WHEN 'STOP' THEN 4 WHEN 'ERR' THEN 3"
    " WHEN 'WARN' THEN 2 WHEN 'OK' THEN 1 ELSE 0 END"
)
"""Burrow's ordering of statuses as SQL (`monitor.evaluate.transforms.status.SEVERITY`)."""

_FIRING = "state = 'firing' AND silenced_by IS NULL AND inhibited_by IS NULL"
"""Alerts someone is being told about: firing, neither silenced nor inhibited."""


def _rows(conn: Connection, sql: str, **params: Any) -> list[Row]:
    return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def _one(conn: Connection, sql: str, **params: Any) -> Row | None:
    rows = _rows(conn, sql, **params)
    return rows[0] if rows else None


def cluster_cards(conn: Connection, cluster: str | None = None) -> list[Row]:
    """Every cluster (or the one named) with its newest evaluation's counts, its groups lagging
    and stopped, and the alerts firing on it."""
    return _rows(
        conn,
        """
        WITH groups AS (
            SELECT cluster, count(*) AS groups,
                   count(*) FILTER (WHERE status IN ('WARN', 'ERR')) AS groups_lagging,
                   count(*) FILTER (WHERE data_loss_occurred) AS groups_lost_data
            FROM group_lag GROUP BY cluster
        ), stopped AS (
            SELECT cluster, count(DISTINCT group_id) AS groups_stopped
            FROM group_topic_lag WHERE status IN ('STOP', 'STALL') GROUP BY cluster
        ), alerting AS (
            SELECT cluster, count(*) AS alerts_firing,
                   count(*) FILTER (WHERE severity = 'critical') AS alerts_critical
            FROM alerts WHERE """
        + _FIRING
        + """ GROUP BY cluster
        )
        SELECT s.cluster, s.controller_id, s.last_seen, s.evaluated_at, s.unreachable,
               s.collection_age_seconds,
               (SELECT count(*) FROM brokers b WHERE b.cluster = s.cluster) AS brokers,
               (SELECT count(*) FROM brokers b WHERE b.cluster = s.cluster AND b.up) AS brokers_up,
               s.partitions, s.offline_partitions, s.under_min_isr_partitions,
               s.under_replicated_partitions,
               coalesce(g.groups, 0) AS groups, coalesce(g.groups_lagging, 0) AS groups_lagging,
               coalesce(g.groups_lost_data, 0) AS groups_lost_data,
               coalesce(st.groups_stopped, 0) AS groups_stopped,
               coalesce(a.alerts_firing, 0) AS alerts_firing,
               coalesce(a.alerts_critical, 0) AS alerts_critical
        FROM cluster_state s
        LEFT JOIN groups g USING (cluster)
        LEFT JOIN stopped st USING (cluster)
        LEFT JOIN alerting a USING (cluster)
        WHERE CAST(:c AS text) IS NULL OR s.cluster = :c
        ORDER BY s.cluster
        """,
        c=cluster,
    )


def brokers(conn: Connection, cluster: str | None = None) -> list[Row]:
    """Brokers with leaders vs fair share and disk, by cluster and id."""
    return _rows(
        conn,
        """
        SELECT cluster, broker_id, host, port, rack, up, last_seen, leaders, fair_share_leaders,
               leader_imbalance, non_preferred_leaders, replicas, disk_total_bytes,
               disk_usable_bytes, disk_used_ratio
        FROM broker_state WHERE (CAST(:c AS text) IS NULL OR cluster = :c)
        ORDER BY cluster, broker_id
        """,
        c=cluster,
    )


def topics(conn: Connection, cluster: str, name: str | None = None) -> list[Row]:
    """Topics of `cluster` (or the one named) with their newest evaluation (null columns before
    the first one)."""
    return _rows(
        conn,
        """
        SELECT t.topic, t.partition_count, t.replication_factor, t.internal,
               s.size_bytes, s.max_size_ratio, s.min_time_coverage_seconds, s.retention_ms,
               s.retention_bytes, s.retention_shortfall_seconds, s.max_replicas_lost,
               coalesce(s.under_replicated_partitions, 0) AS under_replicated_partitions,
               coalesce(s.under_min_isr_partitions, 0) AS under_min_isr_partitions,
               coalesce(s.offline_partitions, 0) AS offline_partitions,
               s.min_time_until_data_loss_seconds, s.produce_rate, s.produce_bytes_rate
        FROM topics t LEFT JOIN topic_state s USING (cluster, topic)
        WHERE t.cluster = :c AND t.deleted_at IS NULL AND (CAST(:t AS text) IS NULL OR t.topic = :t)
        ORDER BY t.topic
        """,
        c=cluster,
        t=name,
    )


def groups(conn: Connection, cluster: str, group_id: str | None = None) -> list[Row]:
    """Consumer groups of `cluster` as the newest evaluation saw them, with their worst
    partition status (STOP, STALL and REWIND, which the group status folds into ERR)."""
    return _rows(
        conn,
        f"""
        SELECT g.group_id, g.status, g.group_state, g.members, g.topics, g.partitions,
               g.offset_lag, g.lag_seconds, g.max_lag_seconds, g.append_lag_seconds,
               g.commit_lag_seconds, g.time_since_last_commit_seconds,
               g.time_until_data_loss_seconds, g.data_loss_occurred, g.lag_growing,
               (SELECT p.status FROM group_partition_lag p
                WHERE p.cluster = g.cluster AND p.group_id = g.group_id
                ORDER BY {SEVERITY_ORDER.format(col="p.status")} DESC LIMIT 1) AS worst_status
        FROM group_lag g WHERE g.cluster = :c AND (CAST(:g AS text) IS NULL OR g.group_id = :g)
        ORDER BY g.group_id
        """,
        c=cluster,
        g=group_id,
    )


def cluster_exists(conn: Connection, cluster: str) -> bool:
    return _one(conn, "SELECT 1 AS x FROM clusters WHERE name = :c", c=cluster) is not None


def evaluated_at(conn: Connection, cluster: str) -> datetime | None:
    """The newest evaluation of `cluster`: the time every number of its pages is from."""
    row = _one(conn, "SELECT evaluated_at FROM latest_evaluations WHERE cluster = :c", c=cluster)
    return row["evaluated_at"] if row else None


def topic(conn: Connection, cluster: str, name: str) -> Row | None:
    """The topic with its newest evaluation, or None when the cluster does not have it."""
    found = topics(conn, cluster, name)
    return found[0] if found else None


def topic_configs(conn: Connection, cluster: str, name: str) -> Row:
    """The topic's current configuration values by name (only the ones the pages explain)."""
    rows = _rows(
        conn,
        """
        SELECT name, value, source FROM topic_configs
        WHERE cluster = :c AND topic = :t AND valid_to IS NULL
          AND name IN ('retention.ms', 'retention.bytes', 'cleanup.policy', 'min.insync.replicas',
                       'segment.bytes', 'segment.ms', 'message.timestamp.type',
                       'remote.storage.enable', 'local.retention.ms', 'local.retention.bytes')
        ORDER BY name
        """,
        c=cluster,
        t=name,
    )
    return {r["name"]: r for r in rows}


def topic_partitions(conn: Connection, cluster: str, name: str) -> list[Row]:
    """Each partition's leader, replicas and ISR now, with the newest evaluation's replication
    flags and retention figures."""
    return _rows(
        conn,
        """
        SELECT r.partition, r.leader, r.replicas, r.isr, r.preferred_leader,
               r.min_insync_replicas, r.replicas_lost, r.under_replicated, r.under_min_isr,
               coalesce(r.offline, r.leader IS NULL) AS offline, r.non_preferred_leader,
               r.replicas_sharing_rack,
               h.size_bytes, h.retention_bytes, h.size_ratio, h.retention_ms,
               h.time_coverage_seconds, h.retention_shortfall_seconds, h.produce_bytes_rate,
               h.lagging_groups, h.min_time_until_data_loss_seconds, h.data_loss_occurred
        FROM replication_state r
        LEFT JOIN retention_headroom h USING (cluster, topic, partition)
        WHERE r.cluster = :c AND r.topic = :t
        ORDER BY r.partition
        """,
        c=cluster,
        t=name,
    )


def topic_groups(conn: Connection, cluster: str, name: str) -> list[Row]:
    """The groups reading the topic, with the partition closest to losing data and which
    retention limit would delete it."""
    return _rows(
        conn,
        f"""
        SELECT g.group_id, g.status, g.group_state, g.partitions, g.offset_lag, g.lag_seconds,
               g.max_lag_seconds, g.time_until_data_loss_seconds, g.data_loss_occurred,
               (SELECT p.data_loss_limit FROM group_partition_lag p
                WHERE p.cluster = g.cluster AND p.group_id = g.group_id AND p.topic = g.topic
                  AND p.time_until_data_loss_seconds IS NOT NULL
                ORDER BY p.time_until_data_loss_seconds LIMIT 1) AS data_loss_limit,
               (SELECT p.status FROM group_partition_lag p
                WHERE p.cluster = g.cluster AND p.group_id = g.group_id AND p.topic = g.topic
                ORDER BY {SEVERITY_ORDER.format(col="p.status")} DESC LIMIT 1) AS worst_status
        FROM group_topic_lag g WHERE g.cluster = :c AND g.topic = :t
        ORDER BY g.group_id
        """,
        c=cluster,
        t=name,
    )


def group(conn: Connection, cluster: str, group_id: str) -> Row | None:
    """The group's newest evaluation; a bare row when it was collected but not evaluated yet;
    None when the monitor never saw it."""
    found = groups(conn, cluster, group_id)
    if found:
        return found[0]
    return _one(
        conn,
        "SELECT group_id FROM latest_group_offsets WHERE cluster = :c AND group_id = :g"
        " UNION SELECT group_id FROM group_members WHERE cluster = :c AND group_id = :g",
        c=cluster,
        g=group_id,
    )


def group_partitions(conn: Connection, cluster: str, group_id: str) -> list[Row]:
    """The group's lag on every partition it committed on, with when a commit was last seen."""
    return _rows(
        conn,
        """
        SELECT p.topic, p.partition, p.status, p.committed_offset, p.end_offset, p.offset_lag,
               p.lag_seconds, p.lag_seconds_method, p.lag_seconds_error, p.append_lag_seconds,
               p.commit_lag_seconds, p.time_since_last_commit_seconds,
               p.time_until_data_loss_seconds, p.data_loss_limit, p.data_loss_occurred,
               p.consume_rate, p.produce_rate, o.last_commit_observed_at
        FROM group_partition_lag p
        LEFT JOIN latest_group_offsets o USING (cluster, group_id, topic, partition)
        WHERE p.cluster = :c AND p.group_id = :g
        ORDER BY p.topic, p.partition
        """,
        c=cluster,
        g=group_id,
    )


def group_members(conn: Connection, cluster: str, group_id: str) -> list[Row]:
    return _rows(
        conn,
        """
        SELECT member_id, client_id, host, group_instance_id, assignment, updated_at
        FROM group_members WHERE cluster = :c AND group_id = :g ORDER BY client_id, member_id
        """,
        c=cluster,
        g=group_id,
    )


def group_lag_history(
    conn: Connection, cluster: str, group_id: str, since: datetime, until: datetime, points: int
) -> list[Row]:
    """The group's lag at each evaluation in [since, until], in at most `points` time buckets,
    each keeping its peak (a 7-day window holds about 20,000 evaluations)."""
    bucket = max((until - since) / points, timedelta(seconds=1))
    return _rows(
        conn,
        """
        SELECT max(evaluated_at) AS at, max(offset_lag) AS offset_lag,
               max(lag_seconds) AS lag_seconds
        FROM group_lag_history
        WHERE cluster = :c AND group_id = :g AND evaluated_at >= :since AND evaluated_at <= :until
        GROUP BY date_bin(:bucket, evaluated_at, :since)
        ORDER BY 1
        """,
        c=cluster,
        g=group_id,
        since=since,
        until=until,
        bucket=bucket,
    )


def firing_alerts(
    conn: Connection, cluster: str, *, topic: str | None = None, group_id: str | None = None
) -> list[Row]:
    """Alerts firing on the cluster, or on one topic or group of it, critical first."""
    return _rows(
        conn,
        """
        SELECT id, rule, severity, summary, starts_at, labels FROM alerts
        WHERE """
        + _FIRING
        + """ AND cluster = :c
          AND (CAST(:t AS text) IS NULL OR labels->>'topic' = :t)
          AND (CAST(:g AS text) IS NULL OR labels->>'group_id' = :g)
        ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, starts_at
        """,
        c=cluster,
        t=topic,
        g=group_id,
    )
