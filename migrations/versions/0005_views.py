"""SQL investigation views and a read-only role.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22

The views are the read model: the web pages, the API, `/metrics`, the CLI reports and people
running SQL during an incident review all read the same definitions. "Latest" means the newest
evaluation of each cluster (`latest_evaluations`), so every number on one page comes from the
same evaluation.

- latest_evaluations        newest evaluated_at per cluster
- group_partition_lag       latest lag per (cluster, group, topic, partition)
- group_topic_lag, group_lag  the same rolled up per group-topic and per group
- lag_history, group_lag_history  every evaluation, for plots and "during this window" questions
- topic_state               latest per-topic rollup
- retention_headroom        latest per partition: size vs retention.bytes, time coverage vs
                            retention.ms, shortfall, and the most urgent lagging group
- replication_state         current replicas/ISR/leader per partition with the derived flags
- broker_state, cluster_state  latest per broker and per cluster
- alert_history, incident_history, notification_history  what fired, who was told, who acked
- retention_changes         every change of a retention setting seen on a topic

The role `kafka_health_reader` (NOLOGIN) can read every table and view and change nothing; grant
it to people: `GRANT kafka_health_reader TO alice;`.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

READER = "kafka_health_reader"


def _latest(table: str) -> str:
    """Rows of `table` from the newest evaluation of their cluster."""
    return f"""
        SELECT d.* FROM {table} d
        JOIN latest_evaluations l ON l.cluster = d.cluster AND l.evaluated_at = d.evaluated_at
    """


# (name, body) in creation order; dropped in reverse.
VIEWS: list[tuple[str, str]] = [
    (
        "latest_evaluations",
        """
        SELECT cluster, max(evaluated_at) AS evaluated_at FROM derived_cluster GROUP BY cluster
        """,
    ),
    ("group_partition_lag", _latest("derived_group_partition")),
    ("group_topic_lag", _latest("derived_group_topic")),
    ("group_lag", _latest("derived_group")),
    (
        "lag_history",
        """
        SELECT cluster, group_id, topic, partition, evaluated_at, committed_offset, end_offset,
               offset_lag, lag_seconds, lag_seconds_method, append_lag_seconds,
               commit_lag_seconds, consume_rate, produce_rate, time_until_data_loss_seconds,
               data_loss_occurred, status
        FROM derived_group_partition
        """,
    ),
    (
        "group_lag_history",
        """
        SELECT cluster, group_id, evaluated_at, offset_lag, max_offset_lag, lag_seconds,
               max_lag_seconds, append_lag_seconds, commit_lag_seconds, consume_rate,
               produce_rate, time_until_data_loss_seconds, data_loss_occurred, status,
               group_state, members
        FROM derived_group
        """,
    ),
    ("topic_state", _latest("derived_topic")),
    (
        "retention_headroom",
        """
        WITH urgent AS (
            SELECT cluster, topic, partition,
                   count(*) FILTER (WHERE offset_lag > 0) AS lagging_groups,
                   min(time_until_data_loss_seconds) AS min_time_until_data_loss_seconds,
                   bool_or(coalesce(data_loss_occurred, false)) AS data_loss_occurred
            FROM group_partition_lag GROUP BY cluster, topic, partition
        )
        SELECT p.cluster, p.topic, p.partition, p.evaluated_at, p.size_bytes, p.retention_bytes,
               CASE WHEN p.retention_bytes > 0 THEN p.retention_bytes - p.size_bytes END
                   AS headroom_bytes,
               p.size_ratio, p.retention_ms, p.time_coverage_seconds,
               p.retention_shortfall_seconds, p.produce_rate, p.produce_bytes_rate,
               coalesce(u.lagging_groups, 0) AS lagging_groups,
               u.min_time_until_data_loss_seconds,
               coalesce(u.data_loss_occurred, false) AS data_loss_occurred
        FROM ("""
        + _latest("derived_partition")
        + """) p
        LEFT JOIN urgent u USING (cluster, topic, partition)
        """,
    ),
    (
        "replication_state",
        """
        SELECT pt.cluster, pt.topic, pt.partition, pt.leader, pt.replicas, pt.isr,
               pt.replicas[1] AS preferred_leader, pt.updated_at,
               d.replication_factor, d.min_insync_replicas, d.replicas_lost, d.under_replicated,
               d.under_min_isr, d.offline, d.non_preferred_leader, d.replicas_sharing_rack,
               d.evaluated_at
        FROM partitions pt
        LEFT JOIN ("""
        + _latest("derived_partition")
        + """) d USING (cluster, topic, partition)
        """,
    ),
    (
        "broker_state",
        """
        SELECT b.cluster, b.broker_id, b.host, b.port, b.rack, b.up, b.first_seen, b.last_seen,
               d.leaders, d.fair_share_leaders, d.leader_imbalance, d.non_preferred_leaders,
               d.replicas, d.disk_total_bytes, d.disk_usable_bytes, d.disk_used_ratio,
               d.evaluated_at
        FROM brokers b
        LEFT JOIN ("""
        + _latest("derived_broker")
        + """) d USING (cluster, broker_id)
        """,
    ),
    (
        "cluster_state",
        """
        SELECT c.name AS cluster, c.cluster_id, c.bootstrap, c.controller_id, c.first_seen,
               c.last_seen, d.brokers, d.brokers_down, d.partitions, d.offline_partitions,
               d.under_replicated_partitions, d.under_min_isr_partitions,
               d.max_leader_imbalance, d.collection_age_seconds, d.unreachable, d.evaluated_at
        FROM clusters c
        LEFT JOIN ("""
        + _latest("derived_cluster")
        + """) d ON d.cluster = c.name
        """,
    ),
    (
        "alert_history",
        """
        SELECT id, rule, cluster, entity, entity_key, labels, severity, state, summary, value,
               runbook, pending_since, starts_at, resolved_at,
               extract(epoch FROM coalesce(resolved_at, updated_at) - starts_at) AS firing_seconds,
               silenced_by, inhibited_by, updated_at
        FROM alerts
        """,
    ),
    (
        "incident_history",
        """
        SELECT g.id, g.receiver, g.group_labels, g.severity, g.route_path, g.created_at,
               g.first_notified_at, g.last_notified_at, g.acknowledged_at, g.acknowledged_by,
               g.escalated_at, g.escalated_to, g.closed_at,
               extract(epoch FROM g.acknowledged_at - g.first_notified_at) AS seconds_to_ack,
               (SELECT string_agg(a.acknowledged_by || ' via ' || a.via
                                  || CASE WHEN a.comment <> '' THEN ': ' || a.comment ELSE '' END,
                                  '; ' ORDER BY a.created_at)
                FROM acks a WHERE a.alert_group_id = g.id) AS acks
        FROM alert_groups g
        """,
    ),
    (
        "notification_history",
        """
        SELECT l.at, l.receiver, l.kind, l.dedup_key, l.attempt, l.outcome, l.status, l.reason,
               l.alerts, l.instance, o.group_key, o.created_at AS queued_at, o.state AS outbox_state
        FROM notification_log l
        LEFT JOIN notification_outbox o ON o.id = l.outbox_id
        """,
    ),
    (
        "retention_changes",
        """
        SELECT cluster, topic, name, changed_at, old_value, new_value, new_source AS source
        FROM (
            SELECT cluster, topic, name, valid_from AS changed_at, value AS new_value,
                   source AS new_source,
                   lag(value) OVER w AS old_value, lag(valid_from) OVER w AS previous_from
            FROM topic_configs
            WHERE name IN ('retention.ms', 'retention.bytes', 'local.retention.ms',
                           'local.retention.bytes', 'cleanup.policy')
            WINDOW w AS (PARTITION BY cluster, topic, name ORDER BY valid_from)
        ) h
        WHERE previous_from IS NOT NULL AND old_value IS DISTINCT FROM new_value
        """,
    ),
]

_GRANT_READER = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN
        CREATE ROLE {READER} NOLOGIN;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO {READER}', current_database());
    GRANT USAGE ON SCHEMA public TO {READER};
    GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER};
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {READER};
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'kafka_health_reader not set up: the migrating user may not create roles; '
                  'ask a superuser to run: CREATE ROLE {READER} NOLOGIN; '
                  'GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER}';
END
$$;
"""

_REVOKE_READER = f"""
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN
        ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT ON TABLES FROM {READER};
        REVOKE SELECT ON ALL TABLES IN SCHEMA public FROM {READER};
        REVOKE USAGE ON SCHEMA public FROM {READER};
        EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM {READER}', current_database());
    END IF;
END
$$;
"""


def upgrade() -> None:
    for name, body in VIEWS:
        op.execute(f"CREATE VIEW {name} AS {body}")
    op.execute(_GRANT_READER)


def downgrade() -> None:
    op.execute(_REVOKE_READER)
    for name, _ in reversed(VIEWS):
        op.execute(f"DROP VIEW {name}")
