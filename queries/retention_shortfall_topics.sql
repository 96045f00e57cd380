-- Question: Which topics keep less history than their retention.ms promises, because
--   retention.bytes deletes first ("we thought we kept 2 hours, we keep 10 minutes")?
-- When: after a data loss on a topic whose retention.ms looked generous, or before relying on a
--   topic's history for a replay.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: topic_state
-- Notes: from the latest evaluation; shortfall = retention.ms - history kept, for the worst
--   partition. retention.bytes is per partition; at the current produce rate a partition fills
--   it in retention_bytes / produce_bytes_rate x partitions.
-- Run: psql -v cluster=prod-eu -f queries/retention_shortfall_topics.sql
SELECT topic,
       retention_ms * interval '1 millisecond' AS retention_promised,
       min_time_coverage_seconds * interval '1 second' AS history_kept,
       retention_shortfall_seconds * interval '1 second' AS shortfall,
       pg_size_pretty(retention_bytes) AS retention_bytes_per_partition,
       round(CAST(max_size_ratio AS numeric), 2) AS max_size_ratio,
       pg_size_pretty(CAST(produce_bytes_rate AS numeric)) || '/s' AS produce_bytes_rate,
       partitions,
       min_time_until_data_loss_seconds * interval '1 second' AS min_time_until_data_loss,
       evaluated_at
FROM topic_state
WHERE cluster = :'cluster'
  AND retention_shortfall_seconds > 0
ORDER BY retention_shortfall_seconds DESC, topic;
