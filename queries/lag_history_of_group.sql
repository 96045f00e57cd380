-- Question: How did one consumer group's lag, status and members evolve during a window?
-- When: after finding a group in top_lagging_partitions_in_window.sql or
--   groups_stopped_or_stalled.sql: when it started falling behind, whether it was consuming, when
--   it recovered. One row per evaluation (every 30 s by default) while raw evaluations are kept
--   (database.sample_retention_days, 7 by default); before that one row per 15 minutes (kept 30
--   days), then per hour (400 days): a window of 90 days answers too, `resolution` says which.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   group    the consumer group id
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: group_lag_history
-- Notes: offset_lag is summed over the group's partitions, max_offset_lag and max_lag are its
--   worst partition; lag is the age of the oldest unconsumed message; append_lag keeps growing
--   while producers produce even if every consumer has died. Per partition: lag_history.
--   A 15-minute or hourly row holds its bucket's worst lag and status, its mean rates, and
--   evaluated_at is its newest evaluation.
-- Run: psql -v cluster=prod-eu -v group=billing -v since='2026-11-03 02:00+00' -v until='2026-11-03 06:00+00' -f queries/lag_history_of_group.sql
SELECT evaluated_at,
       status,
       group_state,
       members,
       offset_lag,
       max_offset_lag,
       lag_seconds * interval '1 second' AS lag,
       max_lag_seconds * interval '1 second' AS max_lag,
       append_lag_seconds * interval '1 second' AS append_lag,
       commit_lag_seconds * interval '1 second' AS commit_lag,
       consume_rate,
       produce_rate,
       time_until_data_loss_seconds * interval '1 second' AS time_until_data_loss,
       data_loss_occurred,
       resolution
FROM group_lag_history
WHERE cluster = :'cluster'
  AND group_id = :'group'
  AND evaluated_at >= CAST(:'since' AS timestamptz)
  AND evaluated_at < CAST(:'until' AS timestamptz)
ORDER BY evaluated_at;
