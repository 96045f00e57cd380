"""The log-dirs job: size of every replica in every log dir, and each log dir's total and usable
bytes (DescribeLogDirs, through the only client that has it). Sizes are per replica per broker:
nothing is summed across replicas here."""

from __future__ import annotations

from sqlalchemy import Connection

from monitor.collect.clients import ADMIN, ClientKind
from monitor.collect.context import ClusterContext, CollectorJob, JobRun
from monitor.kafka import LogDirClient
from monitor.kafka.protocol import LogDirReader
from monitor.store.runs import Run
from monitor.store.samples import write_log_dirs

LOG_DIRS: ClientKind[LogDirReader] = ClientKind("log_dirs", lambda cluster, config: LogDirClient(cluster))
"""DescribeLogDirs (kafka-python: librdkafka has no such call)."""


def collect_log_dirs(run: Run, ctx: ClusterContext) -> None:
    cluster = ctx.cluster
    brokers = ctx.admin.describe_cluster().broker_ids
    result = ctx.client(LOG_DIRS).describe(brokers)
    run.problems_from("log dirs of", result.errors, limit=None)
    replicas, usages = result.value
    if cluster.topics.allow != [".*"] or cluster.topics.deny:
        replicas = [r for r in replicas if cluster.topics.accepts(r.topic)]
    if not cluster.include_internal_topics:
        replicas = [r for r in replicas if not r.topic.startswith("__")]
    now = ctx.clock.now()
    run_id = run.run_id

    def write(conn: Connection, replay: bool) -> object:
        return write_log_dirs(conn, cluster.name, now, run_id, replicas, usages, idempotent=replay)

    ctx.writer.submit(f"{cluster.name}:log_dirs", len(replicas) + len(usages), write)
    run.count("brokers", len(brokers))
    run.count("replicas", len(replicas))
    run.count("log_dirs", len(usages))


def build(ctx: ClusterContext) -> JobRun:
    return lambda run: collect_log_dirs(run, ctx)


JOB = CollectorJob(
    name="log_dirs",
    build=build,
    interval=lambda intervals: intervals.log_dirs_seconds,
    tables=("log_dir_sizes", "broker_disks"),
    first_run_in=2.0,
    clients=(ADMIN, LOG_DIRS),
)
