-- Question: Which notifications failed to be delivered during a window (Slack, email, PagerDuty,
--   webhooks), why, and were they delivered in the end?
-- When: someone says "I was never told": check whether the monitor tried, what the receiver
--   answered, and whether a retry got through.
-- Parameters:
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: notification_history
-- Notes: one row per failed attempt: retry (429, 5xx, timeouts: tried again with backoff), failed
--   (other 4xx, or retried for longer than alert.give_up_after_seconds: given up), lost (another
--   instance took the notification over). final_state is the notification's state now: sent means
--   a later attempt got through.
-- Run: psql -v since=2026-11-01 -v until=2026-11-08 -f queries/notification_failures.sql
SELECT at,
       receiver,
       kind,
       attempt,
       outcome,
       status,
       reason,
       alerts,
       group_key,
       queued_at,
       outbox_state AS final_state,
       instance
FROM notification_history
WHERE outcome <> 'sent'
  AND at >= CAST(:'since' AS timestamptz)
  AND at < CAST(:'until' AS timestamptz)
ORDER BY at, receiver;
