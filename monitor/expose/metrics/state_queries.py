"""The set-based SQL a build of the `/metrics` snapshot runs: one query per group of metric
families (never one per series), over the views of migration 0005 and, for the lag objectives,
`derived_lag_objective` at each cluster's newest evaluation; for a cluster without an evaluation
yet (the daemon's first minutes, a cluster just added), its groups' offset lag from the newest
offsets stored (`monitor.store.fresh_lag`).

Each query returns the label columns (`cluster`, `group_id`, `topic`, `partition`, `broker_id`,
`status`, `group_state`, `objective`, `burn_window`) and the value columns the catalogue names.
The partition-level queries also come ordered by urgency and limited: the cap keeps the rows that
matter most, and the window sum `total_series` (computed before LIMIT) says how much was left
out; they leave out the clusters whose partition-level series are switched off
(`clusters[].partition_series`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.core.objectives import BURN_WINDOWS
from monitor.expose.metrics.catalogue import STATE, MetricSpec
from monitor.store.evaluation import latest_rows
from monitor.store.fresh_lag import FRESH_GROUP_TOPICS_UNEVALUATED, FRESH_PARTITIONS_UNEVALUATED

LABEL_COLUMNS: dict[str, str] = {
    "cluster": "cluster",
    "clustername": "cluster",
    "group": "group_id",
    "topic": "topic",
    "partition": "partition",
    "broker": "broker_id",
    "status": "status",
    "state": "group_state",
    "objective": "objective",
    "window": "burn_window",
}
"""Prometheus label -> the query column it is read from."""


@dataclass(frozen=True, slots=True)
class StateQuery:
    name: str
    sql: str
    order_by: str | None = None
    """Set for partition-level queries: the urgency order in which the cap keeps rows."""

    @property
    def partition_level(self) -> bool:
        return self.order_by is not None

    @property
    def specs(self) -> tuple[MetricSpec, ...]:
        return tuple(spec for spec in STATE if spec.query == self.name)

    @property
    def value_columns(self) -> list[str]:
        """The columns its series read their values from, sorted: a row gives one series each."""
        return sorted({spec.column for spec in self.specs if spec.column})

    def statement(self) -> str:
        """The SQL to run. Partition-level: only rows with at least one value, of the clusters
        not in the array `:off`, the most urgent first, at most `:limit` of them, each with the
        totals before the limit."""
        if not self.partition_level:
            return self.sql
        columns = self.value_columns
        present = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        series = " + ".join(f"({c} IS NOT NULL)::int" for c in columns)
        return (
            f"SELECT *, sum({series}) OVER () AS total_series FROM ({self.sql}) q"
            f" WHERE ({present}) AND cluster <> ALL(CAST(:off AS text[]))"
            f" ORDER BY {self.order_by} LIMIT :limit"
        )


_SUM_LAG_SECONDS = """
    SELECT cluster, group_id, {keys}sum(lag_seconds) AS sum_lag_seconds
    FROM group_partition_lag GROUP BY cluster, group_id{group_by}
"""

GROUP_PARTITION = StateQuery(
    "group_partition",
    f"""
    SELECT cluster, group_id, topic, partition, offset_lag, lag_seconds FROM group_partition_lag
    UNION ALL
    SELECT cluster, group_id, topic, partition, offset_lag, NULL FROM ({FRESH_PARTITIONS_UNEVALUATED}) f
    """,
    order_by="offset_lag DESC NULLS LAST, lag_seconds DESC NULLS LAST, cluster, group_id, topic, partition",
)

PARTITION = StateQuery(
    "partition",
    """
    SELECT h.cluster, h.topic, h.partition, h.headroom_bytes, h.retention_shortfall_seconds,
           h.min_time_until_data_loss_seconds, r.replicas_lost, r.under_min_isr, r.offline
    FROM retention_headroom h
    LEFT JOIN replication_state r USING (cluster, topic, partition)
    """,
    order_by="offline DESC NULLS LAST, under_min_isr DESC NULLS LAST, replicas_lost DESC NULLS LAST,"
    " min_time_until_data_loss_seconds NULLS LAST, headroom_bytes NULLS LAST, cluster, topic, partition",
)

_LATEST_OBJECTIVES = f"FROM {latest_rows('lag_objective')} d"

_BURN_WINDOWS = ", ".join(f"('{w.label}', d.{w.column})" for w in BURN_WINDOWS)
"""One (window label, burn rate) row per burn-rate column: `window` is a label, not a name part."""

QUERIES: tuple[StateQuery, ...] = (
    GROUP_PARTITION,
    PARTITION,
    StateQuery(
        "group_topic",
        f"""
        SELECT t.cluster, t.group_id, t.topic, t.offset_lag, t.max_offset_lag, t.max_lag_seconds,
               s.sum_lag_seconds, t.append_lag_seconds, t.commit_lag_seconds,
               t.time_since_last_commit_seconds, t.time_until_data_loss_seconds, t.data_loss_occurred
        FROM group_topic_lag t
        LEFT JOIN ({_SUM_LAG_SECONDS.format(keys="topic, ", group_by=", topic")}) s
            USING (cluster, group_id, topic)
        UNION ALL
        SELECT cluster, group_id, topic, offset_lag, max_offset_lag, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM ({FRESH_GROUP_TOPICS_UNEVALUATED}) u
        """,
    ),
    StateQuery(
        "group",
        f"""
        SELECT g.cluster, g.group_id, g.offset_lag, g.max_offset_lag, g.max_lag_seconds,
               s.sum_lag_seconds, g.members, g.status, g.group_state, g.consumers_needed,
               g.time_to_catch_up_seconds, g.catching_up, 1 AS one
        FROM group_lag g
        LEFT JOIN ({_SUM_LAG_SECONDS.format(keys="", group_by="")}) s USING (cluster, group_id)
        UNION ALL
        SELECT cluster, group_id, sum(offset_lag), max(max_offset_lag), NULL, NULL, NULL, NULL, NULL, NULL,
               NULL, NULL, NULL
        FROM ({FRESH_GROUP_TOPICS_UNEVALUATED}) u GROUP BY cluster, group_id
        """,
    ),
    StateQuery(
        "objective",
        f"""
        SELECT d.cluster, d.group_id, d.objective, d.budget_remaining, d.bad_minutes,
               d.compliance / 100.0 AS compliance_ratio, d.target / 100.0 AS target_ratio
        {_LATEST_OBJECTIVES}
        """,
    ),
    StateQuery(
        "objective_burn",
        f"""
        SELECT d.cluster, d.group_id, d.objective, w.burn_window, w.burn_rate
        {_LATEST_OBJECTIVES}
        CROSS JOIN LATERAL (VALUES {_BURN_WINDOWS}) AS w (burn_window, burn_rate)
        """,
    ),
    StateQuery(
        "share_group",
        "SELECT cluster, group_id, lag, max_lag, members, partitions FROM share_group_state",
    ),
    StateQuery(
        "topic",
        """
        SELECT t.cluster, t.topic, t.partitions, t.size_bytes, h.min_headroom_bytes, t.max_size_ratio,
               t.min_time_coverage_seconds, t.retention_shortfall_seconds,
               t.min_time_until_data_loss_seconds, t.max_replicas_lost, t.under_replicated_partitions,
               t.under_min_isr_partitions, t.offline_partitions
        FROM topic_state t
        LEFT JOIN (
            SELECT cluster, topic, min(headroom_bytes) AS min_headroom_bytes
            FROM retention_headroom GROUP BY cluster, topic
        ) h USING (cluster, topic)
        """,
    ),
    StateQuery(
        "broker",
        """
        SELECT cluster, broker_id, up, leaders, fair_share_leaders, leader_imbalance,
               non_preferred_leaders, disk_total_bytes, disk_usable_bytes, disk_used_ratio,
               probe_successes, probe_failures, probe_failing, probe_produce_latency_seconds,
               probe_end_to_end_latency_seconds, probe_commit_latency_seconds
        FROM broker_state
        """,
    ),
    StateQuery(
        "cluster",
        """
        SELECT c.cluster, c.brokers, c.brokers_down, c.partitions, c.under_replicated_partitions,
               c.under_min_isr_partitions, c.offline_partitions, c.max_leader_imbalance,
               c.collection_age_seconds, c.unreachable,
               extract(epoch FROM c.evaluated_at) AS evaluated_at_seconds,
               CASE WHEN c.evaluated_at IS NOT NULL THEN coalesce(g.groups, 0) END AS groups
        FROM cluster_state c
        LEFT JOIN (SELECT cluster, count(*) AS groups FROM group_lag GROUP BY cluster) g USING (cluster)
        """,
    ),
)


def queries(partition_series: bool) -> Sequence[StateQuery]:
    """The queries of one build; the partition-level ones only when they are switched on."""
    return [q for q in QUERIES if partition_series or not q.partition_level]
