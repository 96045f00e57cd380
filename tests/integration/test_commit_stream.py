"""The commits job on the real cluster and PostgreSQL: a commit made by a client is a
`commit_observations` row within about a second, every commit is one (a rewind and its recovery
included, so REWIND and commit lag are exact), and the offsets job computes lag from the stream
without OffsetFetch once the snapshot is taken."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.settings import CollectConfig, NameFilter
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import RunRecorder
from tests.conditions import wait_for
from tests.fixtures.kafka import KafkaTestHelper
from tests.integration.test_collectors import last_run, ms, rows


@pytest.fixture
def collector(kafka: KafkaTestHelper, engine: Engine) -> Iterator[Any]:
    made: list[ClusterCollector] = []

    def make(name: str, topic: str) -> ClusterCollector:
        clock = SystemClock()
        config = kafka.cluster_config(name, topics=NameFilter(allow=[topic]), request_timeout_seconds=10)
        writer = BufferedWriter(engine, 1_000_000, clock)
        made.append(
            ClusterCollector(
                config, engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig()
            )
        )
        made[-1].start()
        return made[-1]

    yield make
    for c in made:
        c.stop()


def observations(engine: Engine, cluster: str, group: str) -> list[dict[str, Any]]:
    return rows(
        engine,
        "SELECT committed_offset, previous_offset, observed_at FROM commit_observations "
        "WHERE cluster = :c AND group_id = :g ORDER BY observed_at, committed_offset",
        c=cluster,
        g=group,
    )


def test_a_commit_is_in_the_store_within_a_second_and_every_commit_counts(
    kafka: KafkaTestHelper, engine: Engine, collector: Any
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    kafka.produce(topic, [f"m{i}".encode() for i in range(50)])
    group = f"streamed-{topic}"
    kafka.commit(group, topic, 0, 10)
    c = collector("stream", topic)
    c.run("commits")
    commits = c.context.commits
    wait_for(lambda: commits.positioned, 30, "the stream to be positioned")
    c.run("offsets")  # the snapshot
    assert commits.live

    latencies = []
    for offset in (20, 15, 15, 30):  # forward, a rewind, the same offset again, recovered
        before = len(observations(engine, "stream", group))
        committed_at = time.monotonic()
        kafka.commit(group, topic, 0, offset)
        wait_for(
            lambda n=before: len(observations(engine, "stream", group)) > n, 5, f"the commit of {offset}"
        )
        latencies.append(time.monotonic() - committed_at)

    seen = observations(engine, "stream", group)
    assert [(o["previous_offset"], o["committed_offset"]) for o in seen] == [
        (10, 20),
        (20, 15),
        (15, 15),
        (15, 30),
    ]
    # The commit call itself waits for the coordinator; the observation follows it closely.
    assert sorted(latencies)[len(latencies) // 2] < 1.5, latencies
    c.run("offsets")
    run = last_run(engine, "stream", "offsets")
    assert run["status"] == "ok" and run["counts"]["commits_streamed"] == 1
    (g,) = rows(engine, "SELECT * FROM latest_group_offsets WHERE cluster='stream' AND group_id=:g", g=group)
    assert (g["committed_offset"], g["lag"]) == (30, 20)
    assert ms(g["last_commit_observed_at"]) == ms(seen[-1]["observed_at"]), "the exact commit time"
    c.run("commits")
    report = last_run(engine, "stream", "commits")["counts"]
    assert report["stream_live"] == 1 and report["commits_observed"] == 4


def test_the_stream_follows_a_coordinator_that_moves(
    kafka: KafkaTestHelper, engine: Engine, collector: Any
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    kafka.produce(topic, [b"x"] * 10)
    group = f"moved-{topic}"
    kafka.commit(group, topic, 0, 1)
    c = collector("moving", topic)
    c.run("commits")
    wait_for(lambda: c.context.commits.positioned, 30, "the stream to be positioned")
    c.run("offsets")
    (described,) = c.context.admin.describe_groups([group]).value
    assert described.coordinator is not None

    kafka.stop_broker(described.coordinator)
    kafka.commit(group, topic, 0, 7)

    wait_for(
        lambda: [o["committed_offset"] for o in observations(engine, "moving", group)] == [7],
        60,
        "the commit made through the new coordinator",
    )
    c.run("commits")
    assert last_run(engine, "moving", "commits")["status"] == "ok"
    assert c.context.commits.committed([group])[group][0].offset == 7
