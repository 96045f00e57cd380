"""The metadata job on the real cluster: brokers, topics, replication state, and run records."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text

from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.kafka_features import parse_version, version_text
from monitor.core.settings import ClusterConfig, CollectConfig, NameFilter
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import RunRecorder
from tests.fixtures.kafka import KafkaTestHelper, session_kafka_version


def last_run(engine: Engine, cluster: str, job: str = "metadata") -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT status, counts, error, duration_ms FROM collection_runs"
                " WHERE cluster = :c AND job = :j ORDER BY id DESC LIMIT 1"
            ),
            {"c": cluster, "j": job},
        ).one()
    return dict(row._mapping)


def collector(engine: Engine, config: ClusterConfig) -> ClusterCollector:
    clock = SystemClock()
    writer = BufferedWriter(engine, 100_000, clock)
    c = ClusterCollector(
        config, engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig()
    )
    c.start()
    return c


def test_metadata_sample_and_broker_loss(kafka: KafkaTestHelper, engine: Engine) -> None:
    topic = kafka.create_topic(partitions=3, replication_factor=3)
    config = kafka.cluster_config("meta", topics=NameFilter(allow=[topic]))
    c = collector(engine, config)
    try:
        c.run("metadata")
        run = last_run(engine, "meta")
        assert run["status"] == "ok", run
        assert run["counts"]["brokers"] == 3 and run["counts"]["topics"] == 1
        assert run["counts"]["partitions"] == 3 and run["counts"]["under_replicated"] == 0
        with engine.connect() as conn:
            release = conn.execute(text("SELECT kafka_version FROM clusters WHERE name='meta'")).scalar()
            assert release == version_text(parse_version(session_kafka_version()))  # "4.1" by default
            brokers = conn.execute(
                text("SELECT broker_id, up FROM brokers WHERE cluster='meta' ORDER BY 1")
            ).all()
            assert [tuple(b) for b in brokers] == [(1, True), (2, True), (3, True)]
            topics = conn.execute(
                text("SELECT topic, partition_count, replication_factor FROM topics WHERE cluster='meta'")
            ).all()
            assert [tuple(t) for t in topics] == [(topic, 3, 3)]
            isr = (
                conn.execute(text("SELECT cardinality(isr) FROM partitions WHERE cluster='meta'"))
                .scalars()
                .all()
            )
            assert isr == [3, 3, 3]
            samples = conn.execute(text("SELECT count(*) FROM replica_states WHERE cluster='meta'")).scalar()
            assert samples == 3

        kafka.stop_broker(3)
        kafka.wait_for(
            lambda: all(
                len(p.isrs) == 2
                for p in kafka.admin.list_topics(topic, timeout=5).topics[topic].partitions.values()
            ),
            60,
            "the ISR to shrink",
        )
        c.run("metadata")
        run = last_run(engine, "meta")
        assert run["status"] == "ok"
        assert run["counts"]["brokers"] == 2 and run["counts"]["brokers_went_down"] == 1
        assert run["counts"]["under_replicated"] == 3
        with engine.connect() as conn:
            assert (
                conn.execute(text("SELECT up FROM brokers WHERE cluster='meta' AND broker_id=3")).scalar()
                is False
            )
            lost = (
                conn.execute(
                    text(
                        "SELECT cardinality(replicas) - cardinality(isr) FROM partitions WHERE cluster='meta'"
                    )
                )
                .scalars()
                .all()
            )
            assert lost == [1, 1, 1]
            assert (
                conn.execute(text("SELECT count(*) FROM replica_states WHERE cluster='meta'")).scalar() == 6
            )
    finally:
        c.stop()


def test_unreachable_cluster_is_a_failed_run(engine: Engine) -> None:
    config = ClusterConfig(name="nowhere", bootstrap_servers=["127.0.0.1:1"], request_timeout_seconds=2)
    c = collector(engine, config)
    try:
        c.run("metadata")
    finally:
        c.stop()
    run = last_run(engine, "nowhere")
    assert run["status"] == "failed"
    assert "127.0.0.1:1" in run["error"]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM brokers WHERE cluster='nowhere'")).scalar() == 0
