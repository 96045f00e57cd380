-- Question: Did each group meet its lag objectives, day by day, during a window: how many good
--   and bad minutes, and what share of the minutes was good?
-- When: in an incident review, to say which days spent the error budget and how much; and in a
--   monthly review of the objectives (evaluate.objectives_file).
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window (e.g. '2026-06-01 00:00+00')
--   until    end of the window
-- Reads: lag_objective_daily
-- Notes: a minute is bad when an evaluation in it saw the group's oldest unread message older
--   than the objective's lag_seconds; minutes without an evaluation are not counted (they are
--   neither good nor bad). Compliance is the percent of the counted minutes that were good, to
--   compare with the objective's target. Days are UTC days.
-- Run: psql -v cluster=prod-eu -v since='2026-06-01 00:00+00' -v until='2026-06-02 00:00+00' -f queries/lag_objective_compliance_by_day.sql
SELECT d.objective,
       d.group_id,
       d.day,
       d.good_minutes,
       d.bad_minutes,
       d.compliance
FROM lag_objective_daily AS d
WHERE d.cluster = :'cluster'
  AND d.day >= date_trunc('day', :'since'::timestamptz, 'UTC')
  AND d.day < :'until'::timestamptz
ORDER BY d.objective, d.group_id, d.day;
