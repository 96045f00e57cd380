-- Question: Which silences were in force during a window, who created them and why, and how many
--   alerts did each mute?
-- When: an alert "should have fired" but nobody was told: check whether a silence muted it.
-- Parameters:
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: silences, alert_history
-- Notes: a silence is in force from starts_at until ends_at, or until it was expired early
--   (expired_at). alerts_muted counts the alerts recorded as silenced by it (its matchers are
--   label matchers: =, !=, =~, !~).
-- Run: psql -v since=2026-11-01 -v until=2026-11-08 -f queries/silences_during_window.sql
SELECT s.id AS silence,
       s.starts_at,
       least(s.ends_at, s.expired_at) AS ended_at,
       s.created_by,
       s.comment,
       s.matchers::text AS matchers,
       (SELECT count(*) FROM alert_history AS a WHERE a.silenced_by = s.id) AS alerts_muted,
       s.created_at
FROM silences AS s
WHERE s.starts_at < CAST(:'until' AS timestamptz)
  AND least(s.ends_at, s.expired_at) >= CAST(:'since' AS timestamptz)
ORDER BY s.starts_at, s.id;
