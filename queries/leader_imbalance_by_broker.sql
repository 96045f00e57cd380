-- Question: How are partition leaders spread over the brokers: which broker leads more than its
--   fair share, and how many of its leaderships are not the preferred ones?
-- When: one broker is hot (CPU, network) after a restart or a failover; a preferred leader
--   election (kafka-leader-election.sh) moves leadership back where non_preferred_leaders says.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: broker_state, replication_state
-- Notes: leaders, fair share (partitions / live brokers) and imbalance (leaders / fair share,
--   1.0 = balanced) are from the latest evaluation; preferred_leaderships counts the partitions
--   whose first assigned replica is the broker, in the current metadata.
-- Run: psql -v cluster=prod-eu -f queries/leader_imbalance_by_broker.sql
SELECT b.broker_id,
       b.host,
       b.rack,
       b.up,
       b.leaders,
       round(CAST(b.fair_share_leaders AS numeric), 1) AS fair_share_leaders,
       round(CAST(b.leader_imbalance AS numeric), 2) AS leader_imbalance,
       b.non_preferred_leaders,
       (SELECT count(*)
        FROM replication_state AS r
        WHERE r.cluster = b.cluster AND r.preferred_leader = b.broker_id) AS preferred_leaderships,
       b.replicas,
       b.evaluated_at
FROM broker_state AS b
WHERE b.cluster = :'cluster'
ORDER BY b.leader_imbalance DESC NULLS LAST, b.broker_id;
