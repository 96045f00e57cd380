-- Question: Who was paged during a window, for what, and how long did it take to acknowledge
--   each page?
-- When: the on-call part of a review: pages sent straight to the pager and warnings escalated to
--   it because nobody acknowledged them; unacknowledged pages have no time_to_acknowledge.
-- Parameters:
--   pager    the paging receiver's name in alert_rules/routing.yaml (oncall-pager by default)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: incident_history
-- Notes: one row per incident (a group of alerts at one receiver); paged_at is its first notice
--   at the pager, or when it was escalated there. group_labels names what the incident groups
--   (cluster and rule with the default routing); acks lists every acknowledgement with its way in.
-- Run: psql -v pager=oncall-pager -v since=2026-11-01 -v until=2026-11-08 -f queries/pages_and_time_to_acknowledge.sql
WITH pages AS (
    SELECT i.*,
           CASE WHEN i.receiver = :'pager' THEN i.first_notified_at ELSE i.escalated_at END AS paged_at
    FROM incident_history AS i
    WHERE i.receiver = :'pager' OR i.escalated_to = :'pager'
)
SELECT id AS incident,
       paged_at,
       CASE WHEN receiver = :'pager' THEN 'paged' ELSE 'escalated from ' || receiver END AS how,
       severity,
       group_labels,
       acknowledged_at,
       acknowledged_by,
       acknowledged_at - paged_at AS time_to_acknowledge,
       acks,
       closed_at
FROM pages
WHERE paged_at >= CAST(:'since' AS timestamptz)
  AND paged_at < CAST(:'until' AS timestamptz)
ORDER BY paged_at, id;
