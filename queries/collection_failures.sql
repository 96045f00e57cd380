-- Question: Did collection fail or only partly succeed during a window (was the monitor blind),
--   which jobs, how often, and with which errors?
-- When: before trusting the numbers of a window (gaps in lag, no metadata samples), or when the
--   monitor itself is suspected (cluster unreachable, a broker timing out).
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: collection_runs
-- Notes: failed = the cluster could not be reached and nothing was written; partial = some
--   partitions, groups or brokers failed and the rest was written. runs_of_job counts all the
--   job's runs in the window, so runs / runs_of_job is the share that failed.
-- Run: psql -v cluster=prod-eu -v since='2026-11-03 02:00+00' -v until='2026-11-03 06:00+00' -f queries/collection_failures.sql
WITH window_runs AS (
    SELECT *
    FROM collection_runs
    WHERE cluster = :'cluster'
      AND started_at >= CAST(:'since' AS timestamptz)
      AND started_at < CAST(:'until' AS timestamptz)
),
totals AS (
    SELECT job, count(*) AS runs_of_job FROM window_runs GROUP BY job
)
SELECT r.job,
       r.status,
       r.error,
       count(*) AS runs,
       t.runs_of_job,
       min(r.started_at) AS first_at,
       max(r.started_at) AS last_at,
       string_agg(DISTINCT r.instance, ', ') AS instances
FROM window_runs AS r
JOIN totals AS t USING (job)
WHERE r.status IN ('failed', 'partial')
GROUP BY r.job, r.status, r.error, t.runs_of_job
ORDER BY first_at, r.job, r.status;
