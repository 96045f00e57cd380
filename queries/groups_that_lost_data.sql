-- Question: Which consumer groups lost data (retention deleted messages before they read them),
--   on which partitions, and how many messages?
-- When: first question of a data-loss review ("which groups lost data last week?"). The messages
--   counted are gone: tell the owners of each group listed what was skipped, then look at
--   top_lagging_partitions_in_window.sql and retention_changes.sql for why.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: data_loss_events
-- Notes: a loss is recorded once per group, partition and committed offset, when a sample first
--   shows the committed offset below the log start; messages_lost = log start - committed.
-- Run: psql -v cluster=prod-eu -v since=2026-11-01 -v until=2026-11-08 -f queries/groups_that_lost_data.sql
SELECT group_id,
       topic,
       array_agg(DISTINCT partition ORDER BY partition) AS partitions,
       count(*) AS losses,
       sum(messages_lost) AS messages_lost,
       min(detected_at) AS first_detected_at,
       max(detected_at) AS last_detected_at
FROM data_loss_events
WHERE cluster = :'cluster'
  AND detected_at >= CAST(:'since' AS timestamptz)
  AND detected_at < CAST(:'until' AS timestamptz)
GROUP BY group_id, topic
ORDER BY messages_lost DESC, group_id, topic;
