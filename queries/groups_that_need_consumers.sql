-- Question: Which lagging groups need more consumers (or more partitions) to read their backlog
--   before retention deletes it, how many, and which cannot be helped by more consumers at all?
-- When: during a lag incident, before scaling a consumer group: the count to scale to, and the
--   groups where scaling is no answer (a hot partition, or already one consumer per partition).
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: group_lag
-- Notes: from the latest evaluation. consumers_needed is what reads the backlog before the
--   deletion ahead (or within 30 minutes when none is ahead) at the group's consume rate per
--   consumer, at most one consumer per partition; advice_limited_by says 'partitions' when even
--   that is not enough and 'hot_partition' when one partition alone gets more than a consumer
--   reads (hot_topic, hot_partition). A group without members (stopped) needs one started first.
-- Run: psql -v cluster=prod-eu -f queries/groups_that_need_consumers.sql
SELECT g.group_id,
       g.members,
       g.consumers_needed,
       g.consumers_needed - g.members AS consumers_to_add,
       g.advice_limited_by,
       g.hot_topic,
       g.hot_partition,
       g.partitions,
       g.offset_lag,
       g.consume_rate,
       g.produce_rate,
       g.catching_up,
       g.time_to_catch_up_seconds * interval '1 second' AS time_to_catch_up,
       g.time_until_data_loss_seconds * interval '1 second' AS time_until_data_loss,
       g.evaluated_at
FROM group_lag AS g
WHERE g.cluster = :'cluster'
  AND g.offset_lag > 0
  AND (g.consumers_needed > g.members OR g.advice_limited_by IS NOT NULL OR g.members = 0)
ORDER BY g.time_until_data_loss_seconds NULLS LAST,
         g.offset_lag DESC,
         g.group_id
LIMIT 50;
