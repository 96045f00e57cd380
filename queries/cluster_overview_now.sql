-- Question: How is every monitored cluster doing right now: brokers down, offline and
--   under-replicated partitions, leader imbalance, collection freshness, alerts firing?
-- When: the first query of any review or incident, to know which clusters to look at.
-- Parameters: none
-- Reads: cluster_state, alert_history
-- Notes: from each cluster's latest evaluation; collection_age is the time since the last
--   successful offsets collection, so a large one means the other numbers are old.
-- Run: psql -f queries/cluster_overview_now.sql
SELECT c.cluster,
       c.unreachable,
       c.brokers,
       c.brokers_down,
       c.partitions,
       c.offline_partitions,
       c.under_min_isr_partitions,
       c.under_replicated_partitions,
       round(CAST(c.max_leader_imbalance AS numeric), 2) AS max_leader_imbalance,
       c.collection_age_seconds * interval '1 second' AS collection_age,
       (SELECT count(*) FROM alert_history AS a WHERE a.cluster = c.cluster AND a.state = 'firing')
           AS alerts_firing,
       (SELECT count(*)
        FROM alert_history AS a
        WHERE a.cluster = c.cluster AND a.state = 'firing' AND a.severity = 'critical') AS critical_firing,
       c.evaluated_at,
       c.last_seen
FROM cluster_state AS c
ORDER BY c.cluster;
