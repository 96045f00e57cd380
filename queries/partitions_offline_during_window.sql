-- Question: Which partitions had no leader (offline) during a window, from when to when, and
--   when did each get a leader back?
-- When: reviewing an outage: which topics could neither be written nor read, and for how long.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   since    start of the window, inclusive: a date or a timestamp ('2026-11-01 14:00+00');
--            without an offset it is read in the session's time zone
--   until    end of the window, exclusive
-- Reads: replica_states
-- Notes: replica_states holds the metadata samples (one per partition per metadata interval, 60 s
--   by default), so times are accurate to one interval; no sample is taken while the cluster is
--   unreachable (see collection_failures.sql). replication_state has the current state only.
-- Run: psql -v cluster=prod-eu -v since='2026-11-03 02:00+00' -v until='2026-11-03 06:00+00' -f queries/partitions_offline_during_window.sql
SELECT s.topic,
       s.partition,
       min(s.sampled_at) AS first_seen_offline,
       max(s.sampled_at) AS last_seen_offline,
       count(*) AS offline_samples,
       (SELECT min(b.sampled_at)
        FROM replica_states AS b
        WHERE b.cluster = s.cluster
          AND b.topic = s.topic
          AND b.partition = s.partition
          AND b.sampled_at > max(s.sampled_at)
          AND b.leader IS NOT NULL) AS leader_back_at
FROM replica_states AS s
WHERE s.cluster = :'cluster'
  AND s.sampled_at >= CAST(:'since' AS timestamptz)
  AND s.sampled_at < CAST(:'until' AS timestamptz)
  AND s.leader IS NULL
GROUP BY s.cluster, s.topic, s.partition
ORDER BY first_seen_offline, s.topic, s.partition;
