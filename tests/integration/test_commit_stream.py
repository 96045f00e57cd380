"""The commits job on the real cluster and PostgreSQL: a commit made by a client is a
`commit_observations` row within about a second, every commit that moves the offset is one (a
rewind and its recovery included, so REWIND and commit lag are exact), and the offsets job
computes lag from the stream without OffsetFetch once the snapshot is taken. The stream survives
a restart of the broker leading the group's partition of `__consumer_offsets`, the coordinator
moving, and the log cleaner compacting that partition."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from sqlalchemy import Engine

from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.records import CommittedOffset, OffsetCommitRecord
from monitor.core.settings import CollectConfig, NameFilter
from monitor.kafka.commit_stream import OFFSETS_TOPIC, CommitStreamReader
from monitor.kafka.offsets_topic import decode
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import RunRecorder
from tests.conditions import wait_for
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.sql import last_run, ms, rows


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
    # Forward, a rewind, the same offset again (within an offsets interval: no row), recovered.
    for offset, row in ((20, True), (15, True), (15, False), (30, True)):
        before = len(observations(engine, "stream", group))
        committed_at = time.monotonic()
        kafka.commit(group, topic, 0, offset)
        if not row:
            continue
        wait_for(
            lambda n=before: len(observations(engine, "stream", group)) > n, 5, f"the commit of {offset}"
        )
        latencies.append(time.monotonic() - committed_at)

    seen = observations(engine, "stream", group)
    assert [(o["previous_offset"], o["committed_offset"]) for o in seen] == [
        (10, 20),
        (20, 15),
        (15, 30),
    ], "the repeated 15 came within an offsets interval of the first: no row of its own"
    # The commit call itself waits for the coordinator; the observation follows it closely.
    assert sorted(latencies)[len(latencies) // 2] < 1.5, latencies
    c.run("offsets")
    run = last_run(engine, "stream", "offsets")
    assert run["status"] == "ok" and run["counts"]["commits_streamed"] == 1
    (g,) = rows(engine, "SELECT * FROM latest_group_offsets WHERE cluster='stream' AND group_id=:g", g=group)
    assert (g["committed_offset"], g["lag"]) == (30, 20)
    (last,) = rows(engine, "SELECT * FROM latest_commits WHERE cluster='stream' AND group_id=:g", g=group)
    assert ms(last["observed_at"]) == ms(seen[-1]["observed_at"]), "the exact commit time"
    c.run("commits")
    report = last_run(engine, "stream", "commits")["counts"]
    assert report["stream_live"] == 1 and report["commits_observed"] == 3
    assert report["commits"] == 4 and report["unchanged_commits_skipped"] == 1


def test_a_poll_returns_with_the_first_commit_rather_than_waiting_out_its_time(
    kafka: KafkaTestHelper,
) -> None:
    topic = kafka.create_topic(partitions=1)
    kafka.produce(topic, [b"m"] * 5)
    group = f"prompt-{topic}"
    kafka.commit(group, topic, 0, 1)  # the group's partition of __consumer_offsets exists
    reader = CommitStreamReader(kafka.cluster_config("prompt"))
    reader.start()
    try:
        reader.seek_to_end()
        while reader.poll(1.0).commits:
            pass  # past whatever was committed meanwhile
        kafka.commit(group, topic, 0, 4)
        waited: list[float] = []

        def seen() -> bool:
            started = time.monotonic()
            batch = reader.poll(60)
            waited.append(time.monotonic() - started)
            return any(c.group_id == group and c.offset == 4 for c in batch.commits)

        wait_for(seen, 120, "the commit in a poll")
    finally:
        reader.close()
    # A poll that waited for a full batch would have taken its 60 s whatever came in.
    assert waited[-1] < 30, waited


def test_the_stream_follows_a_coordinator_that_moves(
    kafka: KafkaTestHelper, engine: Engine, collector: Any
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    kafka.produce(topic, [b"x"] * 10)
    group = f"moved-{topic}"
    kafka.commit(group, topic, 0, 1)
    c = live_collector(collector, "moving", topic)
    (described,) = c.context.admin.describe_groups([group]).value
    assert described.coordinator is not None

    kafka.stop_broker(described.coordinator)
    visible = commit_and_time(kafka, engine, "moving", group, topic, 7)  # through the new coordinator

    assert visible < VISIBLE_SECONDS
    assert commits_of(engine, "moving", group, 0) == [(1, 7)]
    c.run("commits")
    assert last_run(engine, "moving", "commits")["status"] == "ok"
    assert c.context.commits.committed([group])[group][0].offset == 7


def test_a_consumer_committing_the_same_offset_again_and_again_is_one_row(
    kafka: KafkaTestHelper, engine: Engine, collector: Any
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    kafka.produce(topic, [b"x"] * 10)
    group = f"idle-{topic}"
    kafka.commit(group, topic, 0, 5)
    c = live_collector(collector, "idle", topic)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        for _ in range(12):  # an idle consumer's auto-commit: the same offset, every time
            kafka.wait_for(
                lambda: consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False),
                30,
                "the commit",
                (Exception,),
            )
    finally:
        consumer.close()
    read: list[dict[str, Any]] = []

    def all_read() -> bool:
        c.run("commits")
        read.append(last_run(engine, "idle", "commits")["counts"])
        return sum(r["commits"] for r in read) >= 12

    wait_for(all_read, 10, "the twelve commits read from the stream")

    assert commits_of(engine, "idle", group, 0) == [(5, 10)], "written once, the others within an interval"
    assert sum(r["unchanged_commits_skipped"] for r in read) == sum(r["commits"] for r in read) - 1


# -- the stream through broker restarts and compaction ----------------------------------------

VISIBLE_SECONDS = 3.0
"""A commit made after the disturbance is a row within this long ("a couple of seconds")."""


def offsets_partition(kafka: KafkaTestHelper, group: str) -> int:
    """The partition of `__consumer_offsets` holding `group`: abs(Java's String.hashCode) modulo
    the partition count, as the group coordinator places it."""
    h = 0
    for char in group:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    kafka.committed(group, "any")  # looking up the coordinator makes Kafka create the topic
    count = kafka.wait_for(
        lambda: len(kafka.admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions),
        60,
        f"{OFFSETS_TOPIC} to exist",
        (KeyError,),
    )
    return (0 if signed == -(1 << 31) else abs(signed)) % count


def partition_state(kafka: KafkaTestHelper, partition: int) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, in-sync replicas) of a partition of `__consumer_offsets`."""
    kafka.renew_admin()  # fresh metadata: the old client's can lag behind a restart
    found = kafka.admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions[partition]
    return found.leader, list(found.replicas), list(found.isrs)


def commits_of(engine: Engine, cluster: str, group: str, partition: int) -> list[tuple[int | None, int]]:
    return [
        (o["previous_offset"], o["committed_offset"])
        for o in rows(
            engine,
            "SELECT previous_offset, committed_offset FROM commit_observations "
            "WHERE cluster = :c AND group_id = :g AND partition = :p ORDER BY observed_at, committed_offset",
            c=cluster,
            g=group,
            p=partition,
        )
    ]


def commit_and_time(
    kafka: KafkaTestHelper, engine: Engine, cluster: str, group: str, topic: str, offset: int
) -> float:
    """Commit `offset` on partition 0 and return the seconds from the commit's answer to its row."""
    kafka.commit(group, topic, 0, offset)
    answered = time.monotonic()
    wait_for(
        lambda: (
            commits_of(engine, cluster, group, 0)[-1:]
            and commits_of(engine, cluster, group, 0)[-1][1] == offset
        ),
        30,
        f"the commit of {offset} in the store",
        interval=0.05,
    )
    return time.monotonic() - answered


def live_collector(collector: Any, name: str, topic: str) -> ClusterCollector:
    c: ClusterCollector = collector(name, topic)
    c.run("commits")
    wait_for(lambda: c.context.commits.positioned, 30, "the stream to be positioned")

    def snapshot() -> bool:
        c.run("offsets")  # fails while a coordinator that just moved loads its groups
        return c.context.commits.live

    wait_for(snapshot, 60, "the snapshot of the committed offsets")
    return c


def test_the_stream_sees_commits_after_the_broker_leading_the_group_partition_restarts(
    kafka: KafkaTestHelper, engine: Engine, collector: Any
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    kafka.produce(topic, [b"x"] * 20)
    group = f"restarted-{topic}"
    kafka.commit(group, topic, 0, 1)
    partition = offsets_partition(kafka, group)
    kafka.wait_for(
        lambda: kafka.elect_preferred_leaders(OFFSETS_TOPIC) or True,
        60,
        "the preferred leaders",
        (Exception,),
    )
    leader, replicas, _ = partition_state(kafka, partition)
    assert leader == replicas[0], "the restarted broker can lead the partition again once elected"
    c = live_collector(collector, "restart", topic)
    assert commit_and_time(kafka, engine, "restart", group, topic, 2) < VISIBLE_SECONDS

    kafka.stop_broker(leader)
    during = commit_and_time(kafka, engine, "restart", group, topic, 3)  # through another leader
    kafka.start_broker(leader)
    kafka.wait_for(lambda: leader in partition_state(kafka, partition)[2], 120, "the broker back in sync")
    kafka.wait_for(
        lambda: (
            kafka.elect_preferred_leaders(OFFSETS_TOPIC) or partition_state(kafka, partition)[0] == leader
        ),
        60,
        "the restarted broker to lead the partition again",
        (Exception,),
    )
    after = [commit_and_time(kafka, engine, "restart", group, topic, offset) for offset in (4, 5)]

    assert commits_of(engine, "restart", group, 0) == [(1, 2), (2, 3), (3, 4), (4, 5)]
    assert during < VISIBLE_SECONDS and max(after) < VISIBLE_SECONDS, (during, after)
    c.run("commits")
    assert last_run(engine, "restart", "commits")["status"] == "ok"
    assert c.context.commits.committed([group])[group] == [CommittedOffset(group, topic, 0, 5)]


@contextlib.contextmanager
def compacting(kafka: KafkaTestHelper) -> Iterator[None]:
    """`__consumer_offsets` rolls a segment on the first append after 300 ms and every segment
    but the active one is cleanable at once; the topic's own settings are back afterwards."""
    resource = ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC)
    settings = {"segment.ms": "300", "min.cleanable.dirty.ratio": "0.01"}

    def alter(operation: AlterConfigOpType) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=operation) for k, v in settings.items()]
        change = ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC, incremental_configs=entries)
        kafka.admin.incremental_alter_configs([change])[change].result(timeout=30)

    alter(AlterConfigOpType.SET)
    try:
        yield
    finally:
        alter(AlterConfigOpType.DELETE)
        kafka.wait_for(
            lambda: (
                kafka.admin.describe_configs([resource])[resource].result(timeout=10)["segment.ms"].value
                != settings["segment.ms"]
            ),
            30,
            f"the settings of {OFFSETS_TOPIC} back to the broker's",
        )


def read_commits(kafka: KafkaTestHelper, partition: int, group: str, topic: str) -> list[int | None]:
    """The offsets (None: tombstone) of every record of (group, topic, 0) that a read of the
    partition of `__consumer_offsets` from its beginning finds, in log order."""
    reader = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        _, high = reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, partition), timeout=10)
        reader.assign([TopicPartition(OFFSETS_TOPIC, partition, OFFSET_BEGINNING)])
        found: list[int | None] = []
        deadline = time.monotonic() + 30
        position = 0
        while position < high and time.monotonic() < deadline:
            for message in reader.consume(1000, timeout=0.5):
                if message.error() is not None:
                    continue
                position = (message.offset() or 0) + 1
                record = decode(message.key(), message.value())
                if isinstance(record, OffsetCommitRecord) and (
                    record.group_id,
                    record.topic,
                    record.partition,
                ) == (
                    group,
                    topic,
                    0,
                ):
                    found.append(record.offset)
        assert position >= high, f"read {OFFSETS_TOPIC}[{partition}] to {position} of {high}"
        return found
    finally:
        reader.close()


def test_the_stream_keeps_the_right_offsets_through_compaction_and_a_restart(
    kafka: KafkaTestHelper, engine: Engine, collector: Any
) -> None:
    topic = kafka.create_topic(partitions=2, replication_factor=3)
    group = f"compacted-{topic}"
    partition = offsets_partition(kafka, group)
    c = live_collector(collector, "compact", topic)
    committed = 0

    def compacted() -> list[int | None] | None:
        nonlocal committed
        committed += 1
        kafka.commit(group, topic, 0, committed)
        kafka.commit(group, topic, 1, 1000 + committed)
        kept = read_commits(kafka, partition, group, topic)
        # Compacted: the records of the first commits are gone, the latest is still there.
        return kept if kept and kept[0] != 1 and kept[-1] == committed else None

    with compacting(kafka):
        kept = kafka.wait_for(compacted, 180, "the log cleaner to compact the group's commits")
    assert len(kept) < committed, kept

    wait_for(
        lambda: commits_of(engine, "compact", group, 1)[-1:] == [(999 + committed, 1000 + committed)],
        10,
        "the last commit streamed",
    )
    assert commits_of(engine, "compact", group, 0) == [(None, 1)] + [(i, i + 1) for i in range(1, committed)]
    expected = [
        CommittedOffset(group, topic, 0, committed),
        CommittedOffset(group, topic, 1, 1000 + committed),
    ]
    assert c.context.commits.committed([group])[group] == expected

    c.stop()  # the monitor restarts: its new stream reads the compacted topic
    again = live_collector(collector, "compact", topic)
    assert again.context.commits.committed([group])[group] == expected
    assert commit_and_time(kafka, engine, "compact", group, topic, committed + 5) < VISIBLE_SECONDS
    assert commits_of(engine, "compact", group, 0)[-1] == (committed, committed + 5)
    again.run("offsets")
    (g,) = rows(
        engine,
        "SELECT committed_offset FROM latest_group_offsets WHERE cluster='compact' AND group_id=:g "
        "AND partition = 0",
        g=group,
    )
    assert g["committed_offset"] == committed + 5
