-- Question: Which share groups have records waiting now, how many, how is that known, and is
--   any member there to take them?
-- When: a queue (KIP-932 share group) is behind or its consumers are gone: find the groups with
--   the most records waiting and whether they have members at all.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: share_group_state, share_group_support
-- Notes: the newest share-groups sample of the cluster. lag_method says how the lag is known:
--   broker (reported by Kafka 4.2+), end_minus_start (end offset - start offset, an upper bound
--   on Kafka 4.1), none. A cluster without share groups has no rows; share_group_support says why.
-- Run: psql -v cluster=prod-eu -f queries/share_groups_waiting.sql
SELECT g.group_id,
       g.state,
       g.members,
       g.partitions,
       g.lag AS records_waiting,
       g.max_lag AS most_waiting_on_one_partition,
       g.lag_method,
       g.sampled_at
FROM share_group_state AS g
JOIN share_group_support AS s ON s.cluster = g.cluster AND s.available
WHERE g.cluster = :'cluster'
ORDER BY g.lag DESC NULLS LAST, g.group_id;
