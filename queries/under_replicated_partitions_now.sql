-- Question: Which partitions are under-replicated or offline right now, which brokers are missing
--   from their ISR, and are they under min.insync.replicas?
-- When: during a broker or disk incident, to see the blast radius; offline and under-min-ISR
--   partitions come first (producers with acks=all fail on them).
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: replication_state
-- Notes: replicas, ISR and leader are the current metadata (refreshed every metadata interval);
--   min_insync_replicas comes from the latest evaluation. For the past, see
--   partitions_offline_during_window.sql.
-- Run: psql -v cluster=prod-eu -f queries/under_replicated_partitions_now.sql
SELECT topic,
       partition,
       leader,
       replicas,
       isr,
       ARRAY(SELECT r FROM unnest(replicas) AS r WHERE r <> ALL (isr)) AS out_of_sync,
       cardinality(replicas) - cardinality(isr) AS replicas_lost,
       min_insync_replicas,
       cardinality(isr) < min_insync_replicas AS under_min_isr,
       leader IS NULL AS offline,
       updated_at
FROM replication_state
WHERE cluster = :'cluster'
  AND (cardinality(isr) < cardinality(replicas) OR leader IS NULL)
ORDER BY leader IS NULL DESC,
         coalesce(cardinality(isr) < min_insync_replicas, false) DESC,
         cardinality(replicas) - cardinality(isr) DESC,
         topic,
         partition;
