"""The topic-configs job: retention, cleanup, min ISR, segment, timestamp type and tiered-storage
settings of every allowed topic, stored as history rows only when a value changes.

Configs are state, not samples: when PostgreSQL is down the run fails and the next run records
whatever changed, so nothing needs buffering.
"""

from __future__ import annotations

from monitor.collect.context import ClusterContext, CollectorJob, JobRun
from monitor.store.runs import Run
from monitor.store.samples import record_topic_configs


def collect_configs(run: Run, ctx: ClusterContext) -> None:
    described = ctx.admin.describe_topic_configs(ctx.allowed_topics())
    run.problems_from("configs of topic", described.errors)
    entries = [entry for per_topic in described.value.values() for entry in per_topic]
    with ctx.engine.begin() as conn:
        changed = record_topic_configs(
            conn, ctx.cluster.name, entries, described.value.keys(), ctx.clock.now()
        )
    run.count("topics", len(described.value))
    run.count("configs", len(entries))
    run.count("changes", changed)


def build(ctx: ClusterContext) -> JobRun:
    return lambda run: collect_configs(run, ctx)


JOB = CollectorJob(
    name="configs",
    build=build,
    interval=lambda intervals: intervals.metadata_seconds,
    tables=("topic_configs",),
)
