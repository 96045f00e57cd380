"""The topic-configs job: retention, cleanup, min ISR, segment, timestamp type and tiered-storage
settings of every allowed topic, stored as history rows only when a value changes.

Configs are state, not samples: when PostgreSQL is down the run fails and the next run records
whatever changed, so nothing needs buffering.
"""

from __future__ import annotations

from sqlalchemy import Engine

from monitor.core.clock import Clock
from monitor.core.settings import ClusterConfig
from monitor.kafka import KafkaAdmin
from monitor.store.runs import Run
from monitor.store.samples import record_topic_configs


def collect_configs(
    run: Run, cluster: ClusterConfig, admin: KafkaAdmin, engine: Engine, clock: Clock
) -> None:
    topics = [
        name
        for name in admin.list_topic_names(include_internal=cluster.include_internal_topics)
        if cluster.topics.accepts(name)
    ]
    described = admin.describe_topic_configs(topics)
    run.problems_from("configs of topic", described.errors)
    entries = [entry for per_topic in described.value.values() for entry in per_topic]
    with engine.begin() as conn:
        changed = record_topic_configs(conn, cluster.name, entries, described.value.keys(), clock.now())
    run.count("topics", len(described.value))
    run.count("configs", len(entries))
    run.count("changes", changed)
