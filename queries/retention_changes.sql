-- Question: Every retention change on a cluster during a window: which topic, which setting,
--   from what to what, and who approved it.
-- When: a topic kept less (or more) history than expected, disk filled, or a group lost data
--   after a change: list what changed and when, next to the incident's timeline.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: retention_changes
-- Notes: covers retention.ms, retention.bytes, local.retention.ms, local.retention.bytes and
--   cleanup.policy, as the configs collector saw them (changed_at is when it first saw the new
--   value, within one configs interval of the change); -1 means unlimited. Who approved: the
--   approval records come with retention requests (not built yet); when they exist, this query
--   joins them on (cluster, topic, name, changed_at) and gains requested_by and approved_by
--   columns. Until then a change listed here carries no approver: it was made outside the
--   monitor, and only its time and values are known.
-- Run: psql -v cluster=prod-eu -v since=2026-11-01 -v until=2026-11-08 -f queries/retention_changes.sql
SELECT changed_at,
       topic,
       name,
       old_value,
       new_value,
       CASE
           WHEN old_value = '-1' THEN 'unlimited'
           WHEN name LIKE '%.ms' AND old_value ~ '^[0-9]+$'
               THEN justify_interval(CAST(old_value AS bigint) * interval '1 millisecond')::text
           WHEN name LIKE '%.bytes' AND old_value ~ '^[0-9]+$'
               THEN pg_size_pretty(CAST(old_value AS bigint))
       END AS old_readable,
       CASE
           WHEN new_value = '-1' THEN 'unlimited'
           WHEN name LIKE '%.ms' AND new_value ~ '^[0-9]+$'
               THEN justify_interval(CAST(new_value AS bigint) * interval '1 millisecond')::text
           WHEN name LIKE '%.bytes' AND new_value ~ '^[0-9]+$'
               THEN pg_size_pretty(CAST(new_value AS bigint))
       END AS new_readable,
       source
FROM retention_changes
WHERE cluster = :'cluster'
  AND changed_at >= CAST(:'since' AS timestamptz)
  AND changed_at < CAST(:'until' AS timestamptz)
ORDER BY changed_at, topic, name;
