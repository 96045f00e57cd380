-- Question: Who consumes a group right now: its members (client id, host) and the partitions
--   each is assigned, next to the group's state and lag?
-- When: a group is stopped, stalled or lagging on some partitions: find the host and client that
--   own those partitions, to look at their logs or restart them.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
--   group    the consumer group id
-- Reads: group_members, group_lag
-- Notes: members are the current ones (refreshed by every offsets collection); an empty result
--   means the group has no members (state Empty). Assignments are topic:partition.
-- Run: psql -v cluster=prod-eu -v group=billing -f queries/group_members_now.sql
SELECT m.member_id,
       m.client_id,
       m.host,
       m.group_instance_id,
       array_to_string(m.assignment, ', ') AS assignment,
       cardinality(m.assignment) AS partitions,
       g.group_state,
       g.status,
       g.offset_lag AS group_offset_lag,
       m.updated_at
FROM group_members AS m
LEFT JOIN group_lag AS g ON g.cluster = m.cluster AND g.group_id = m.group_id
WHERE m.cluster = :'cluster'
  AND m.group_id = :'group'
ORDER BY m.client_id, m.member_id;
