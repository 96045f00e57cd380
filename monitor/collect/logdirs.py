"""The log-dirs job: size of every replica in every log dir, and each log dir's total and usable
bytes (DescribeLogDirs, through the only client that has it). Sizes are per replica per broker:
nothing is summed across replicas here."""

from __future__ import annotations

from sqlalchemy import Connection

from monitor.core.clock import Clock
from monitor.core.settings import ClusterConfig
from monitor.kafka import KafkaAdmin, LogDirClient
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import Run
from monitor.store.samples import write_log_dirs


def collect_log_dirs(
    run: Run,
    cluster: ClusterConfig,
    admin: KafkaAdmin,
    client: LogDirClient,
    clock: Clock,
    writer: BufferedWriter,
) -> None:
    brokers = admin.describe_cluster().broker_ids
    result = client.describe(brokers)
    run.problems_from("log dirs of", result.errors, limit=None)
    replicas, usages = result.value
    if cluster.topics.allow != [".*"] or cluster.topics.deny:
        replicas = [r for r in replicas if cluster.topics.accepts(r.topic)]
    if not cluster.include_internal_topics:
        replicas = [r for r in replicas if not r.topic.startswith("__")]
    now = clock.now()
    run_id = run.run_id

    def write(conn: Connection, replay: bool) -> object:
        return write_log_dirs(conn, cluster.name, now, run_id, replicas, usages, idempotent=replay)

    writer.submit(f"{cluster.name}:log_dirs", len(replicas) + len(usages), write)
    run.count("brokers", len(brokers))
    run.count("replicas", len(replicas))
    run.count("log_dirs", len(usages))
