-- Question: Which consumer groups were stopped, stalled or rewound during a window, on which
--   partitions, and did they have members?
-- When: a consumer stopped committing, got stuck on a message, or reset its offsets; find the
--   groups, the partitions and since when, before reading their lag curves.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: lag_history, group_lag_history
-- Notes: statuses are the sliding-window statuses of each partition (Burrow's rules, without
--   false STOPs for consumers with nothing to read): STOP = no commit for longer than the window
--   spans while there is lag; STALL = committing the same offset while there is lag; REWIND = the
--   committed offset went backwards; ERR = any of them.
-- Run: psql -v cluster=prod-eu -v since='2026-11-03 02:00+00' -v until='2026-11-03 06:00+00' -f queries/groups_stopped_or_stalled.sql
WITH bad AS (
    SELECT group_id,
           string_agg(DISTINCT status, ', ' ORDER BY status) AS statuses,
           string_agg(DISTINCT topic || '-' || partition, ', ' ORDER BY topic || '-' || partition)
               AS partitions,
           min(evaluated_at) AS first_seen,
           max(evaluated_at) AS last_seen,
           max(offset_lag) AS max_offset_lag,
           max(lag_seconds) * interval '1 second' AS max_lag
    FROM lag_history
    WHERE cluster = :'cluster'
      AND evaluated_at >= CAST(:'since' AS timestamptz)
      AND evaluated_at < CAST(:'until' AS timestamptz)
      AND status IN ('STOP', 'STALL', 'REWIND', 'ERR')
    GROUP BY group_id
),
states AS (
    SELECT group_id,
           string_agg(DISTINCT group_state, ', ' ORDER BY group_state) AS group_states,
           min(members) AS min_members,
           max(members) AS max_members
    FROM group_lag_history
    WHERE cluster = :'cluster'
      AND evaluated_at >= CAST(:'since' AS timestamptz)
      AND evaluated_at < CAST(:'until' AS timestamptz)
    GROUP BY group_id
)
SELECT bad.group_id,
       bad.statuses,
       bad.partitions,
       bad.first_seen,
       bad.last_seen,
       bad.max_offset_lag,
       bad.max_lag,
       states.group_states,
       states.min_members,
       states.max_members
FROM bad
LEFT JOIN states USING (group_id)
ORDER BY bad.first_seen, bad.group_id;
