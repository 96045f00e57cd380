-- Question: How full is each broker's disk (all its log dirs), and which broker fills first?
-- When: a broker ran out of disk, or before raising a topic's retention: raising it costs about
--   produce bytes/s x added seconds x replication factor of disk.
-- Parameters:
--   cluster  the cluster, by its configured name (e.g. prod-eu)
-- Reads: broker_state
-- Notes: from the latest evaluation; total and usable bytes are summed over the broker's log dirs
--   as DescribeLogDirs reports them (null when the broker is down or too old to report them).
-- Run: psql -v cluster=prod-eu -f queries/broker_disk_headroom.sql
SELECT broker_id,
       host,
       rack,
       up,
       round(CAST(100 * disk_used_ratio AS numeric), 1) AS used_percent,
       pg_size_pretty(disk_usable_bytes) AS usable,
       pg_size_pretty(disk_total_bytes) AS total,
       disk_usable_bytes,
       disk_total_bytes,
       replicas,
       evaluated_at
FROM broker_state
WHERE cluster = :'cluster'
ORDER BY disk_used_ratio DESC NULLS LAST, broker_id;
