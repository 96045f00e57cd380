"""The Kafka adapter against the real 3-node cluster: offsets, groups, configs, log dirs and
record timestamps, with the ground truth taken from what each test produced."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import GroupDescription, PartitionOffsets, RecordTimestamp
from monitor.core.settings import ClusterConfig
from monitor.kafka import CONFIG_KEYS, KafkaAdmin, LogDirClient, RecordTimestampReader, describe_log_dirs
from tests.fixtures.kafka import KafkaTestHelper


@pytest.fixture
def cluster(kafka: KafkaTestHelper) -> ClusterConfig:
    return kafka.cluster_config(request_timeout_seconds=10)


@pytest.fixture
def admin(cluster: ClusterConfig) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(cluster) as client:
        yield client


@pytest.fixture
def reader(cluster: ClusterConfig) -> Iterator[RecordTimestampReader]:
    with RecordTimestampReader(cluster) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def no_record(topic: str, partition: int, offset: int) -> RecordTimestamp:
    return RecordTimestamp(topic, partition, offset, None, None)


# -- offsets -----------------------------------------------------------------------------------


def test_list_offsets_of_partitions_with_known_records(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=3, replication_factor=3)
    base = now_ms() - 60_000
    kafka.produce(
        topic,
        [b"a", b"b", b"c", b"d", b"e"],
        partition=0,
        timestamps_ms=[base, base + 40, base + 10, base + 20, base + 30],
    )
    kafka.produce(topic, [b"x", b"y"], partition=1, timestamps_ms=[base + 5, base + 6])

    result = admin.list_offsets([(topic, 0), (topic, 1), (topic, 2), (topic, 7), ("no-such-topic", 0)])

    assert result.value == {
        (topic, 0): PartitionOffsets(
            topic, 0, start=0, end=5, max_timestamp_offset=1, max_timestamp_ms=base + 40
        ),
        (topic, 1): PartitionOffsets(
            topic, 1, start=0, end=2, max_timestamp_offset=1, max_timestamp_ms=base + 6
        ),
        (topic, 2): PartitionOffsets(
            topic, 2, start=0, end=0, max_timestamp_offset=None, max_timestamp_ms=None
        ),
    }
    assert set(result.errors) == {f"{topic}:7", "no-such-topic:0"}
    assert "UNKNOWN_TOPIC_OR_PART" in result.errors["no-such-topic:0"]


def test_list_offsets_of_many_partitions_in_one_call(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=500, replication_factor=1)
    kafka.produce(topic, [b"1", b"2", b"3"], partition=499)
    # A broker serves ListOffsets for a new partition a moment after the metadata names it leader
    # (until then: NOT_LEADER_FOR_PARTITION, reported per partition).
    kafka.wait_for(lambda: not admin.list_offsets([(topic, p) for p in range(500)]).errors, 60, "all leaders")

    started = time.monotonic()
    result = admin.list_offsets([(topic, p) for p in range(500)])
    elapsed = time.monotonic() - started

    assert result.errors == {}
    assert len(result.value) == 500
    assert result.value[(topic, 499)].end == 3
    assert sum(o.end for o in result.value.values()) == 3
    assert elapsed < 5, f"500 partitions took {elapsed:.2f}s"


# -- consumer groups -----------------------------------------------------------------------------


def wait_for_assignment(consumer: Consumer, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not consumer.assignment():
        consumer.poll(0.2)
        if time.monotonic() > deadline:
            raise AssertionError("the consumer got no assignment")


def describe_one(admin: KafkaAdmin, group: str) -> GroupDescription:
    result = admin.describe_groups([group])
    assert result.errors == {}
    (description,) = result.value
    return description


def test_a_live_group_then_its_empty_remains(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=2, replication_factor=3)
    kafka.produce(topic, [b"a", b"b", b"c"], partition=0)
    kafka.produce(topic, [b"d"], partition=1)
    group = unique("live")
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "client.id": "adapter-test-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        wait_for_assignment(consumer)
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 1)], asynchronous=False
        )

        live = describe_one(admin, group)
        listed = admin.list_group_ids()
        committed = admin.committed_offsets([group])
    finally:
        consumer.close()

    assert group in listed
    assert live.state == "Stable"
    assert (live.protocol_type, live.protocol, live.is_simple) == ("consumer", "range", False)
    assert live.coordinator in kafka.broker_ids
    (member,) = live.members
    assert member.client_id == "adapter-test-client"
    assert member.host
    assert member.assignment == ((topic, 0), (topic, 1))
    assert committed.errors == {}
    assert [(c.group_id, c.topic, c.partition, c.offset) for c in committed.value[group]] == [
        (group, topic, 0, 3),
        (group, topic, 1, 1),
    ]

    empty = kafka.wait_for(
        lambda: (d := describe_one(admin, group)).state == "Empty" and d, 30, "the group to become Empty"
    )
    assert empty.members == ()
    assert group in admin.list_group_ids()
    after = admin.committed_offsets([group])
    assert [(c.topic, c.partition, c.offset) for c in after.value[group]] == [(topic, 0, 3), (topic, 1, 1)]


def test_a_consumer_protocol_group_is_listed_and_described(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    # A KIP-848 group: DescribeGroups answers for it as for an unknown group, so it is described
    # with ConsumerGroupDescribe; its assignor runs on the broker ("uniform" by default).
    topic = kafka.create_topic(partitions=2, replication_factor=3)
    kafka.produce(topic, [b"a", b"b"], partition=1)
    group = unique("kip848")
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": "kip848-client",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        wait_for_assignment(consumer)
        consumer.commit(offsets=[TopicPartition(topic, 1, 2)], asynchronous=False)
        listed = admin.list_group_ids()
        described = describe_one(admin, group)
    finally:
        consumer.close()

    assert group in listed
    assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "uniform")
    assert (described.is_simple, described.coordinator in kafka.broker_ids) == (False, True)
    (member,) = described.members
    assert (member.client_id, member.host, member.assignment) == (
        "kip848-client",
        "/127.0.0.1",
        ((topic, 0), (topic, 1)),
    )

    empty = kafka.wait_for(
        lambda: (d := describe_one(admin, group)).state == "Empty" and d, 30, "the group to become Empty"
    )
    assert (empty.protocol_type, empty.members) == ("consumer", ())
    assert [(c.partition, c.offset) for c in admin.committed_offsets([group]).value[group]] == [(1, 2)]


def test_classic_kip848_and_unknown_groups_in_one_call(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=3, replication_factor=3)
    groups = {unique("classic"): "classic", unique("kip848"): "consumer"}
    consumers = [
        Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": g, "group.protocol": protocol})
        for g, protocol in groups.items()
    ]
    never = unique("never")
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        for consumer in consumers:
            wait_for_assignment(consumer)
        result = admin.describe_groups([never, *groups])
    finally:
        for consumer in consumers:
            consumer.close()

    assert result.errors == {}
    assert [(d.group_id, d.state, d.protocol) for d in result.value] == [
        (never, "Dead", None),
        *((g, "Stable", "range" if protocol == "classic" else "uniform") for g, protocol in groups.items()),
    ]
    for described in result.value[1:]:
        assert [m.assignment for m in described.members] == [((topic, 0), (topic, 1), (topic, 2))]


def test_a_group_that_does_not_exist_is_dead(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    group = unique("never")

    result = admin.describe_groups([group])

    assert result.errors == {}
    (dead,) = result.value
    assert (dead.group_id, dead.state, dead.protocol_type, dead.protocol, dead.members, dead.is_simple) == (
        group,
        "Dead",
        "",
        None,
        (),
        False,
    )
    assert dead.coordinator in kafka.broker_ids


def test_groups_are_described_while_a_coordinator_dies(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    # The moment librdkafka's coordinator requests can bring the process down: here the groups of
    # the dead coordinator fail (or are found at their new one), the others are described, and
    # once Kafka has moved the coordinators every group answers again.
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    kafka.elect_preferred_leaders("__consumer_offsets")
    groups = [unique("dies") for _ in range(60)]
    kafka.commit_groups({g: [TopicPartition(topic, 0, 1)] for g in groups})
    before = admin.describe_groups(groups)
    assert before.errors == {}
    victim = before.value[0].coordinator
    assert victim is not None
    survivors = {d.group_id for d in before.value if d.coordinator != victim}
    assert survivors, "60 groups all on one coordinator"

    kafka.kill_broker(victim)
    during = admin.describe_groups(groups)
    offsets = admin.committed_offsets(groups)

    assert survivors <= {d.group_id for d in during.value}
    assert {d.group_id for d in during.value} | set(during.errors) == set(groups)
    assert set(offsets.value) | set(offsets.errors) == set(groups)
    # A coordinator that has just taken over a partition of the offsets topic can, for a moment,
    # call its groups unknown (described as "Dead") before it has loaded them: wait for "Empty".
    kafka.wait_for(
        lambda: _all_answer_empty(admin, groups),
        60,
        "the groups of the dead coordinator to answer from their new one",
    )
    after = admin.describe_groups(groups)
    assert {d.state for d in after.value} == {"Empty"}
    assert victim not in {d.coordinator for d in after.value}


def _all_answer_empty(admin: KafkaAdmin, groups: list[str]) -> bool:
    described = admin.describe_groups(groups)
    offsets = admin.committed_offsets(groups)
    return not described.errors and not offsets.errors and {d.state for d in described.value} == {"Empty"}


def test_a_group_whose_consumers_are_gone_is_listed_with_its_offsets(
    admin: KafkaAdmin, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic()
    kafka.produce(topic, [b"1", b"2", b"3"])
    group = unique("gone")
    kafka.consume_and_commit(group, topic, 2)

    assert group in admin.list_group_ids()
    described = describe_one(admin, group)
    committed = admin.committed_offsets([group, unique("never-committed")])

    assert (described.state, described.members) == ("Empty", ())
    assert committed.errors == {}
    assert [(c.topic, c.offset) for c in committed.value[group]] == [(topic, 2)]
    assert [v for k, v in committed.value.items() if k != group] == [[]]


@pytest.mark.parametrize("count", [50, 500])
def test_committed_offsets_of_many_groups(admin: KafkaAdmin, kafka: KafkaTestHelper, count: int) -> None:
    topic = kafka.create_topic(partitions=3, replication_factor=1)
    prefix = unique("fan")
    groups = {f"{prefix}-{i}": [TopicPartition(topic, p, i + p) for p in range(3)] for i in range(count)}
    kafka.commit_groups(groups)

    started = time.monotonic()
    result = admin.committed_offsets(list(groups))
    elapsed = time.monotonic() - started

    assert result.errors == {}
    assert {g: [(c.partition, c.offset) for c in offsets] for g, offsets in result.value.items()} == {
        g: [(tp.partition, tp.offset) for tp in offsets] for g, offsets in groups.items()
    }
    assert elapsed < 10, f"{count} groups took {elapsed:.2f}s"
    described = admin.describe_groups(list(groups))
    assert described.errors == {}
    assert {d.group_id for d in described.value} == set(groups)
    assert {d.state for d in described.value} == {"Empty"}


def test_thousands_of_groups_are_all_described_in_one_call(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    # About eight describes of 100 groups to each of the three coordinators in each step: sent all
    # at once, kafka-python failed those past its five in flight ("Node paused: max_in_flight").
    topic = kafka.create_topic(partitions=1, replication_factor=1)
    prefix = unique("many")
    committed = {f"{prefix}-c{i}": [TopicPartition(topic, 0, i)] for i in range(200)}
    kafka.commit_groups(committed)
    never = [f"{prefix}-n{i}" for i in range(2_200)]

    described = admin.describe_groups([*committed, *never])

    assert described.errors == {}
    assert [(d.group_id, d.state) for d in described.value] == [(g, "Empty") for g in committed] + [
        (g, "Dead") for g in never
    ]
    assert {d.coordinator for d in described.value} <= set(kafka.broker_ids)


# -- topic configs -------------------------------------------------------------------------------


def test_topic_configs_with_their_sources(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(config={"retention.ms": "3600000"})

    # Right after a broker restart (an earlier test) a new topic may not be describable at once.
    result = kafka.wait_for(
        lambda: (r := admin.describe_topic_configs([topic, "no-such-topic"])).value.get(topic) and r,
        30,
        f"the configs of {topic}",
    )
    everything = admin.describe_topic_configs([topic], names=None)

    entries = {e.name: e for e in result.value[topic]}
    assert set(entries) == set(CONFIG_KEYS)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert (entries["retention.bytes"].value, entries["retention.bytes"].source) == ("-1", "DEFAULT_CONFIG")
    assert entries["cleanup.policy"].value == "delete"
    assert "UNKNOWN_TOPIC_OR_PART" in result.errors["no-such-topic"]
    assert len(everything.value[topic]) > len(CONFIG_KEYS)
    assert all(e.value is None for e in everything.value[topic] if e.sensitive)


# -- log dirs ------------------------------------------------------------------------------------


def test_every_replica_reports_its_size_and_every_log_dir_its_volume(
    cluster: ClusterConfig, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    payload = [bytes(1000)] * 200
    kafka.produce(topic, payload)

    with LogDirClient(cluster) as client:
        result = client.describe([*kafka.broker_ids, 99])
    replicas, usages = result.value

    assert set(result.errors) == {"broker:99"}
    mine = [r for r in replicas if r.topic == topic]
    assert sorted(r.broker_id for r in mine) == kafka.broker_ids
    assert all(r.size_bytes >= 200 * 1000 and r.partition == 0 and not r.is_future for r in mine)
    assert sorted({u.broker_id for u in usages}) == kafka.broker_ids
    for usage in usages:
        assert usage.error is None
        assert usage.total_bytes is not None and usage.total_bytes > 0
        assert usage.usable_bytes is not None and 0 < usage.usable_bytes <= usage.total_bytes
    one_off = describe_log_dirs(cluster, [kafka.broker_ids[0]])
    assert one_off.errors == {}
    assert {r.broker_id for r in one_off.value[0]} == {kafka.broker_ids[0]}


# -- record timestamps ----------------------------------------------------------------------------


def test_timestamps_read_back_exactly(reader: RecordTimestampReader, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=2, replication_factor=3)
    base = now_ms() - 3_600_000
    stamps = [base + 1000 * i for i in range(6)]
    kafka.produce(topic, [f"v{i}".encode() for i in range(6)], partition=0, timestamps_ms=stamps)
    targets = [(topic, 0, o) for o in (0, 3, 5, 6, 100, -1)] + [(topic, 1, 0)]

    resolved, unread = reader.read(targets, budget_seconds=10)

    assert unread == []
    assert [resolved[t] for t in targets] == [
        RecordTimestamp(topic, 0, 0, 0, stamps[0], "CreateTime"),
        RecordTimestamp(topic, 0, 3, 3, stamps[3], "CreateTime"),
        RecordTimestamp(topic, 0, 5, 5, stamps[5], "CreateTime"),
        no_record(topic, 0, 6),
        no_record(topic, 0, 100),
        no_record(topic, 0, -1),
        no_record(topic, 1, 0),
    ]
    again, _ = reader.read(targets, budget_seconds=10)
    assert again == resolved


def test_log_append_time_is_reported_as_such(reader: RecordTimestampReader, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(config={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    kafka.produce(topic, [b"a"], timestamps_ms=[before - 86_400_000])
    after = now_ms()

    resolved, _ = reader.read([(topic, 0, 0)], budget_seconds=10)

    read = resolved[(topic, 0, 0)]
    assert read.timestamp_type == "LogAppendTime"
    assert read.timestamp_ms is not None and before <= read.timestamp_ms <= after


def test_offsets_below_the_log_start_resolve_promptly_as_no_record(
    reader: RecordTimestampReader, admin: KafkaAdmin, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic(replication_factor=3)
    kafka.produce(topic, [f"{i}".encode() for i in range(10)])

    def delete_below_6() -> bool:
        try:
            (deleted,) = kafka.admin.delete_records(
                [TopicPartition(topic, 0, 6)], request_timeout=10
            ).values()
            deleted.result(timeout=10)
        except KafkaException:
            kafka.renew_admin()  # after broker restarts a client can keep answering "No leaders found"
            raise
        return True

    kafka.wait_for(delete_below_6, 60, "records below offset 6 to be deleted", ignore=(KafkaException,))
    assert admin.list_offsets([(topic, 0)]).value[(topic, 0)].start == 6

    started = time.monotonic()
    resolved, unread = reader.read(
        [(topic, 0, 2), (topic, 0, 5), (topic, 0, 6), (topic, 0, 9)], budget_seconds=10
    )

    assert time.monotonic() - started < 3
    assert unread == []
    assert [resolved[(topic, 0, o)].record_offset for o in (2, 5, 6, 9)] == [None, None, 6, 9]


def test_transaction_markers_are_skipped(
    reader: RecordTimestampReader, admin: KafkaAdmin, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic(replication_factor=3)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    for values in ([b"a", b"b", b"c"], [b"d", b"e"]):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        producer.commit_transaction(30)
    # Offsets: 0-2 records, 3 the first commit marker, 4-5 records, 6 the second marker. The
    # coordinator writes the markers after commit_transaction returns.
    kafka.wait_for(lambda: admin.list_offsets([(topic, 0)]).value[(topic, 0)].end == 7, 30, "the last marker")

    resolved, unread = reader.read([(topic, 0, o) for o in (2, 3, 4, 6)], budget_seconds=10)

    assert unread == []
    assert [resolved[(topic, 0, o)].record_offset for o in (2, 3, 4, 6)] == [2, 4, 4, None]


def test_many_partitions_in_one_read(reader: RecordTimestampReader, kafka: KafkaTestHelper) -> None:
    partitions = 200
    topic = kafka.create_topic(partitions=partitions, replication_factor=1)
    base = now_ms() - 600_000
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20})
    for partition in range(partitions):
        for offset in range(5):
            producer.produce(
                topic, b"x" * 100, partition=partition, timestamp=base + 1000 * partition + offset
            )
    assert producer.flush(60) == 0
    targets = [(topic, p, o) for p in range(partitions) for o in (0, 2, 3, 5)]
    # Warm the consumer up (connections, metadata) so the second read measures the reads alone.
    reader.read(targets[:4], budget_seconds=10)

    started = time.monotonic()
    resolved, unread = reader.read(targets, budget_seconds=20)
    elapsed = time.monotonic() - started

    assert unread == []
    for topic_name, partition, offset in targets:
        expected = base + 1000 * partition + offset if offset < 5 else None
        assert resolved[(topic_name, partition, offset)].timestamp_ms == expected
    assert elapsed < 5, f"{len(targets)} targets took {elapsed:.2f}s"
    print(f"\n{len(targets)} record timestamps in {elapsed:.2f}s ({len(targets) / elapsed:.0f}/s)")


def test_a_budget_too_small_leaves_targets_unread(
    reader: RecordTimestampReader, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic(partitions=50, replication_factor=1)
    for partition in range(0, 50, 10):
        kafka.produce(topic, [b"x"], partition=partition)
    targets = [(topic, p, 0) for p in range(50)]

    started = time.monotonic()
    nothing, all_unread = reader.read(targets, budget_seconds=0)
    short, unread = reader.read(targets, budget_seconds=0.02)
    elapsed = time.monotonic() - started

    assert (nothing, all_unread) == ({}, targets)
    assert elapsed < 1
    assert sorted(list(short) + unread) == sorted(targets)
    full, none_left = reader.read(targets, budget_seconds=10)
    assert none_left == []
    assert sum(1 for r in full.values() if r.record_offset == 0) == 5


def test_a_stopped_broker_costs_its_partitions_not_the_read(
    cluster: ClusterConfig, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic(partitions=6, replication_factor=1)
    for partition in range(6):
        kafka.produce(topic, [b"a", b"b"], partition=partition)
    targets = [(topic, p, o) for p in range(6) for o in (0, 1, 2)]
    with KafkaAdmin(cluster) as admin, RecordTimestampReader(cluster) as reader:
        (info,) = admin.describe_topics([topic])
        leaders = {p.partition: p.leader for p in info.partitions}
        victim = leaders[0]
        lost = {p for p, leader in leaders.items() if leader == victim}
        assert reader.read(targets, budget_seconds=10)[1] == []

        kafka.stop_broker(victim)
        started = time.monotonic()
        resolved, unread = reader.read(targets, budget_seconds=3)
        elapsed = time.monotonic() - started
        offsets = kafka.wait_for(
            lambda: (r := admin.list_offsets([(topic, p) for p in range(6)])).errors and r,
            30,
            "the stopped broker's partitions to fail",
            ignore=(KafkaUnavailableError,),
        )
        with LogDirClient(cluster) as log_dirs:
            dirs = log_dirs.describe(kafka.broker_ids)

    assert elapsed < 3 + 2
    assert {t[1] for t in unread} == lost
    assert {t[1] for t in resolved} == set(range(6)) - lost
    assert set(offsets.errors) == {f"{topic}:{p}" for p in lost}
    assert set(offsets.value) == {(topic, p) for p in range(6) if p not in lost}
    assert set(dirs.errors) == {f"broker:{victim}"}
    assert {u.broker_id for u in dirs.value[1]} == set(kafka.broker_ids) - {victim}


# -- threads and an unreachable cluster ------------------------------------------------------------


def test_one_admin_serves_several_threads(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=4, replication_factor=3)
    kafka.produce(topic, [b"x"], partition=2)
    group = unique("threads")
    kafka.commit(group, topic, 1, 5)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                assert admin.list_offsets([(topic, p) for p in range(4)]).value[(topic, 2)].end == 1
                assert admin.committed_offsets([group]).value[group][0].offset == 5
                assert admin.describe_groups([group]).value[0].state == "Empty"
                assert admin.describe_topic_configs([topic]).errors == {}
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []


def test_an_unreachable_cluster_raises_unavailable_within_the_timeout() -> None:
    port = closed_port()
    cluster = ClusterConfig(
        name="nowhere", bootstrap_servers=[f"127.0.0.1:{port}"], request_timeout_seconds=2
    )

    with KafkaAdmin(cluster) as admin:
        for request in (
            lambda: admin.list_offsets([("t", 0)]),
            admin.list_group_ids,
            lambda: admin.describe_groups(["g"]),
            lambda: admin.committed_offsets(["g1", "g2"]),
            lambda: admin.describe_topic_configs(["t"]),
        ):
            started = time.monotonic()
            with pytest.raises(KafkaUnavailableError, match=f"127.0.0.1:{port}"):
                request()
            assert time.monotonic() - started < 2 + 6
    with LogDirClient(cluster) as log_dirs, pytest.raises(KafkaUnavailableError):
        log_dirs.describe([1])
    with RecordTimestampReader(cluster) as reader:
        started = time.monotonic()
        resolved, unread = reader.read([("t", 0, 0)], budget_seconds=2)
        assert (resolved, unread) == ({}, [("t", 0, 0)])
        assert time.monotonic() - started < 2 + 1
