-- Question: Which alerts fired on a cluster during a window, for how long, and were they
--   silenced or inhibited?
-- When: building an incident's timeline: what the monitor saw and in which order. An alert that
--   fired before the window and was still firing in it is listed too.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: alert_history
-- Notes: alerts that stayed pending (their rule's `for` never held) never fired and are not
--   listed. silenced_by is a silence id (silences_during_window.sql); inhibited_by is the
--   fingerprint of the alert that muted this one (a broker down mutes the lag it causes).
-- Run: psql -v cluster=prod-eu -v since='2026-11-03 02:00+00' -v until='2026-11-03 06:00+00' -f queries/alerts_fired_in_window.sql
SELECT starts_at,
       resolved_at,
       rule,
       severity,
       state,
       entity_key,
       labels ->> 'team' AS team,
       summary,
       firing_seconds * interval '1 second' AS fired_for,
       silenced_by,
       inhibited_by,
       runbook
FROM alert_history
WHERE cluster = :'cluster'
  AND starts_at < CAST(:'until' AS timestamptz)
  AND (resolved_at IS NULL OR resolved_at >= CAST(:'since' AS timestamptz))
ORDER BY starts_at, rule, entity_key;
