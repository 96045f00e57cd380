-- Question: Which group-partitions lagged the most during a given window, and when was each at
--   its worst?
-- When: reconstructing an incident: who fell behind, how far (in time and in messages), whether
--   retention caught up with them. The 25 worst, by lag in seconds, then by offset lag.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: lag_history
-- Notes: lag_seconds is exact or interpolated (lag_seconds_methods says which); an interpolated
--   value has an error bound, see lag_history_of_group.sql for a group's whole curve.
-- Run: psql -v cluster=prod-eu -v since='2026-11-03 02:00+00' -v until='2026-11-03 06:00+00' -f queries/top_lagging_partitions_in_window.sql
SELECT group_id,
       topic,
       partition,
       max(lag_seconds) * interval '1 second' AS max_lag,
       max(offset_lag) AS max_offset_lag,
       (array_agg(evaluated_at ORDER BY lag_seconds DESC NULLS LAST, offset_lag DESC))[1] AS worst_at,
       min(time_until_data_loss_seconds) * interval '1 second' AS min_time_until_data_loss,
       bool_or(coalesce(data_loss_occurred, false)) AS data_loss_occurred,
       count(*) FILTER (WHERE offset_lag > 0) AS lagging_evaluations,
       count(*) AS evaluations,
       string_agg(DISTINCT lag_seconds_method, ', ') AS lag_seconds_methods
FROM lag_history
WHERE cluster = :'cluster'
  AND evaluated_at >= CAST(:'since' AS timestamptz)
  AND evaluated_at < CAST(:'until' AS timestamptz)
GROUP BY group_id, topic, partition
HAVING max(offset_lag) > 0
ORDER BY max(lag_seconds) DESC NULLS LAST, max(offset_lag) DESC, group_id, topic, partition
LIMIT 25;
