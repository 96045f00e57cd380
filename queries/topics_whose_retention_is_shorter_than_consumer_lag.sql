-- Question: On which topics is a consumer group further behind than the topic keeps history
--   (its lag exceeds retention.ms, or the history actually on disk)?
-- When: a group lost data or is about to: retention, not the consumer, sets the deadline. Raise
--   the topic's retention (a retention request) or accept the loss; lag_to_history above 1 means
--   the oldest unread message is older than what the topic keeps.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: group_topic_lag, topic_state
-- Notes: from the latest evaluation. history_kept is the smallest partition time coverage (now -
--   timestamp of the oldest retained record); it is shorter than retention when retention.bytes
--   deletes first (see retention_shortfall_topics.sql).
-- Run: psql -v cluster=prod-eu -f queries/topics_whose_retention_is_shorter_than_consumer_lag.sql
SELECT g.topic,
       g.group_id,
       g.max_lag_seconds * interval '1 second' AS max_lag,
       t.retention_ms * interval '1 millisecond' AS retention,
       t.min_time_coverage_seconds * interval '1 second' AS history_kept,
       round(CAST(g.max_lag_seconds / nullif(least(t.retention_ms / 1000.0, t.min_time_coverage_seconds), 0)
                  AS numeric), 2) AS lag_to_history,
       g.max_offset_lag,
       g.data_loss_occurred,
       g.time_until_data_loss_seconds * interval '1 second' AS time_until_data_loss,
       g.evaluated_at
FROM group_topic_lag AS g
JOIN topic_state AS t USING (cluster, topic)
WHERE g.cluster = :'cluster'
  AND g.max_lag_seconds > 0
  AND (g.max_lag_seconds * 1000 >= t.retention_ms OR g.max_lag_seconds >= t.min_time_coverage_seconds)
ORDER BY g.max_lag_seconds / nullif(least(t.retention_ms / 1000.0, t.min_time_coverage_seconds), 0)
             DESC NULLS LAST,
         g.topic,
         g.group_id;
