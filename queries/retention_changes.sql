-- Question: Every retention change on a cluster during a window: which topic, which setting,
--   from what to what, and who requested and approved it.
-- When: a topic kept less (or more) history than expected, disk filled, or a group lost data
--   after a change: list what changed and when, next to the incident's timeline.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: retention_changes, audit_log, retention_requests
-- Notes: covers retention.ms, retention.bytes, local.retention.ms, local.retention.bytes and
--   cleanup.policy, as the configs collector saw them (changed_at is when it first saw the new
--   value, within one configs interval of the change); -1 means unlimited. A change made through
--   a retention request is matched to the request's audit entry (applied, or reverted at expiry)
--   with the same topic, the same old and new value, at or before changed_at; made_by then names
--   the request, with its requester, approver (approved_by is empty for an instant-tier raise
--   until a reviewer looks at it: review says pending), reason and config-as-code commit. A
--   change with no such entry was made outside the monitor: only its time and values are known.
-- Run: psql -v cluster=prod-eu -v since=2026-11-01 -v until=2026-11-08 -f queries/retention_changes.sql
SELECT c.changed_at,
       c.topic,
       c.name,
       c.old_value,
       c.new_value,
       CASE
           WHEN c.old_value = '-1' THEN 'unlimited'
           WHEN c.name LIKE '%.ms' AND c.old_value ~ '^[0-9]+$'
               THEN justify_interval(CAST(c.old_value AS bigint) * interval '1 millisecond')::text
           WHEN c.name LIKE '%.bytes' AND c.old_value ~ '^[0-9]+$'
               THEN pg_size_pretty(CAST(c.old_value AS bigint))
       END AS old_readable,
       CASE
           WHEN c.new_value = '-1' THEN 'unlimited'
           WHEN c.name LIKE '%.ms' AND c.new_value ~ '^[0-9]+$'
               THEN justify_interval(CAST(c.new_value AS bigint) * interval '1 millisecond')::text
           WHEN c.name LIKE '%.bytes' AND c.new_value ~ '^[0-9]+$'
               THEN pg_size_pretty(CAST(c.new_value AS bigint))
       END AS new_readable,
       CASE
           WHEN r.id IS NULL THEN 'outside the monitor'
           ELSE a.action || ' by request ' || r.id
       END AS made_by,
       r.requested_by,
       r.approved_by,
       r.tier,
       r.review,
       r.reason,
       a.commit_id,
       c.source
FROM retention_changes AS c
LEFT JOIN LATERAL (
    SELECT l.request_id, l.action, l.commit_id
    FROM audit_log AS l
    WHERE l.cluster = c.cluster
      AND l.topic = c.topic
      AND l.action IN ('applied', 'reverted')
      AND l.at <= c.changed_at
      AND l.old_value ->> c.name IS NOT DISTINCT FROM c.old_value
      AND l.new_value ->> c.name = c.new_value
    ORDER BY l.at DESC
    LIMIT 1
) AS a ON true
LEFT JOIN retention_requests AS r ON r.id = a.request_id
WHERE c.cluster = :'cluster'
  AND c.changed_at >= CAST(:'since' AS timestamptz)
  AND c.changed_at < CAST(:'until' AS timestamptz)
ORDER BY c.changed_at, c.topic, c.name;
