-- Question: Which lagging groups will lose data first (retention deletes their oldest unread
--   message), how soon, and will they catch up before it happens?
-- When: during a lag incident, to decide what to do first: raise a topic's retention, scale a
--   consumer, or accept the loss. Groups that already lost data come first (time_left 0).
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: group_partition_lag, retention_headroom
-- Notes: from the latest evaluation. data_loss_limit says which retention limit deletes first
--   (time: retention.ms; size: retention.bytes at the produce rate); deletion is per segment, so
--   it can come up to one segment earlier.
-- Run: psql -v cluster=prod-eu -f queries/time_until_data_loss_most_urgent.sql
SELECT g.group_id,
       g.topic,
       g.partition,
       CASE WHEN g.data_loss_occurred THEN 0 ELSE g.time_until_data_loss_seconds END
           * interval '1 second' AS time_left,
       g.data_loss_occurred,
       g.data_loss_limit,
       g.evaluated_at + g.time_until_data_loss_seconds * interval '1 second' AS deleted_around,
       g.offset_lag,
       g.lag_seconds * interval '1 second' AS lag,
       g.lag_seconds_method,
       g.consume_rate,
       g.produce_rate,
       g.time_to_catch_up_seconds * interval '1 second' AS time_to_catch_up,
       g.time_to_catch_up_seconds < g.time_until_data_loss_seconds AS catches_up_in_time,
       r.retention_ms * interval '1 millisecond' AS retention,
       pg_size_pretty(r.retention_bytes) AS retention_bytes,
       g.status,
       g.evaluated_at
FROM group_partition_lag AS g
LEFT JOIN retention_headroom AS r USING (cluster, topic, partition)
WHERE g.cluster = :'cluster'
  AND g.offset_lag > 0
  AND (g.time_until_data_loss_seconds IS NOT NULL OR g.data_loss_occurred)
ORDER BY CASE WHEN g.data_loss_occurred THEN 0 ELSE g.time_until_data_loss_seconds END,
         g.group_id,
         g.topic,
         g.partition
LIMIT 50;
