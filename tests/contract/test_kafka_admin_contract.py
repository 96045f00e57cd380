"""One contract for the collectors' Kafka protocols (monitor/kafka/protocol.py), run on the fake
cluster (monitor/kafka/fake.py, marked `unit`) and on the real 3-node dev cluster
(tests/fixtures/kafka.py, marked `integration`): the same operations, the same answers. What the
fake does not model (timing, librdkafka's retries) is tested against the real cluster alone, in
tests/integration/test_kafka_adapter.py.

The real cluster runs the session's Kafka version (KAFKA_HEALTH_TEST_KAFKA_VERSION; `make
test-compat` runs this contract at every supported one): what an older broker cannot give
(`monitor.core.kafka_features`) is expected absent there, and the fake gives everything."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import pytest

from monitor.core.clock import SystemClock
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.kafka_features import FIRST_RELEASE, Feature, KafkaVersion, available, parse_version
from monitor.core.records import (
    CommitStreamBatch,
    GroupMetadataRecord,
    OffsetCommitRecord,
    PartitionOffsets,
    ProbePartition,
    RecordTimestamp,
    TopicInfo,
)
from monitor.kafka import (
    CONFIG_KEYS,
    CommitStreamReader,
    KafkaAdmin,
    LeaderAdmin,
    LogDirClient,
    ProbeClient,
    RecordTimestampReader,
)
from monitor.kafka.fake import FakeCluster
from monitor.kafka.protocol import AdminApi, CommitStream, LeaderApi, LogDirReader, ProbeApi, TimestampReader
from tests.fixtures.kafka import session_kafka_version

T = TypeVar("T")


class Backend:
    """A cluster behind the protocols, and the few things a test does to it from outside
    (create topics, produce, commit as a group, stop a broker)."""

    name: str
    admin: AdminApi
    reader: TimestampReader
    log_dirs: LogDirReader
    stream: CommitStream
    leaders: LeaderApi
    probe: ProbeApi
    probe_group: str
    broker_ids: list[int]
    kafka_version: KafkaVersion

    def has(self, feature: Feature) -> bool:
        """Whether this cluster's Kafka version gives `feature`."""
        return available(feature, self.kafka_version)

    def create_topic(
        self, partitions: int = 1, replication_factor: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        raise NotImplementedError

    def produce(
        self,
        topic: str,
        values: Sequence[bytes],
        partition: int = 0,
        timestamps_ms: Sequence[int] | None = None,
    ) -> list[int]:
        raise NotImplementedError

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        raise NotImplementedError

    def stop_broker(self, broker_id: int) -> None:
        raise NotImplementedError

    def delete_group(self, group: str) -> None:
        raise NotImplementedError

    def start_broker(self, broker_id: int) -> None:
        raise NotImplementedError

    def wait_for(self, predicate: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
        """Poll until `predicate` gives something truthy (at once on the fake: it has no delays)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = predicate()
            except KafkaUnavailableError:
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what} on the {self.name} cluster")
            time.sleep(0.2)

    def close(self) -> None:
        for client in (self.probe, self.stream, self.leaders, self.log_dirs, self.reader, self.admin):
            client.close()


class FakeBackend(Backend):
    name = "fake"
    kafka_version = max(FIRST_RELEASE.values())

    def __init__(self) -> None:
        self.fake = FakeCluster("test", brokers=3, clock=SystemClock())
        self.admin, self.reader, self.log_dirs = self.fake.admin(), self.fake.reader(), self.fake.log_dirs()
        self.stream = self.fake.commit_stream()
        self.leaders = self.fake.admin()
        self.probe_group = unique("probe")
        self.probe = self.fake.probe(self.probe_group)
        for client in (self.admin, self.reader, self.log_dirs, self.stream, self.leaders, self.probe):
            client.start()
        self.broker_ids = sorted(self.fake.brokers)

    def create_topic(
        self, partitions: int = 1, replication_factor: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        name = f"test-{uuid.uuid4().hex[:12]}"
        self.fake.create_topic(name, partitions, replication_factor, config)
        return name

    def produce(
        self,
        topic: str,
        values: Sequence[bytes],
        partition: int = 0,
        timestamps_ms: Sequence[int] | None = None,
    ) -> list[int]:
        offsets = []
        for index, value in enumerate(values):
            stamps = [timestamps_ms[index]] if timestamps_ms is not None else None
            offsets += self.fake.produce(topic, partition, 1, stamps, size_bytes=len(value))
        return offsets

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.fake.commit(group, {(topic, partition): offset})

    def stop_broker(self, broker_id: int) -> None:
        self.fake.stop_broker(broker_id)

    def delete_group(self, group: str) -> None:
        self.fake.delete_group(group)

    def start_broker(self, broker_id: int) -> None:
        self.fake.start_broker(broker_id)


class RealBackend(Backend):
    name = "real"

    def __init__(self, kafka: Any) -> None:
        self.kafka = kafka
        config = kafka.cluster_config("test", request_timeout_seconds=10)
        self.admin, self.reader, self.log_dirs = (
            KafkaAdmin(config),
            RecordTimestampReader(config),
            LogDirClient(config),
        )
        self.stream = CommitStreamReader(config)
        self.leaders = LeaderAdmin(config)
        self.probe_group = unique("probe")
        self.probe = ProbeClient(config, self.probe_group)
        for client in (self.admin, self.reader, self.log_dirs, self.stream, self.leaders, self.probe):
            client.start()
        self.broker_ids = list(kafka.broker_ids)
        self.kafka_version = parse_version(session_kafka_version())

    def create_topic(
        self, partitions: int = 1, replication_factor: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        topic = str(
            self.kafka.create_topic(
                partitions=partitions, replication_factor=replication_factor, config=config
            )
        )
        # Made by another client: the monitor's admin knows the topic once its brokers do.
        self.kafka.wait_for(
            lambda: self.admin.describe_topics([topic]),
            30,
            f"{topic} to be described",
            ignore=(KafkaRequestError,),
        )
        return topic

    def produce(
        self,
        topic: str,
        values: Sequence[bytes],
        partition: int = 0,
        timestamps_ms: Sequence[int] | None = None,
    ) -> list[int]:
        return list(self.kafka.produce(topic, values, partition=partition, timestamps_ms=timestamps_ms))

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.kafka.commit(group, topic, partition, offset)

    def stop_broker(self, broker_id: int) -> None:
        self.kafka.stop_broker(broker_id)

    def delete_group(self, group: str) -> None:
        for future in self.kafka.admin.delete_consumer_groups([group], request_timeout=10).values():
            future.result()

    def start_broker(self, broker_id: int) -> None:
        self.kafka.start_broker(broker_id)

    def close(self) -> None:
        super().close()
        # The kafka fixtures' guard restarts only for tests that name the cluster fixture.
        self.kafka.restart_stopped_brokers()


@pytest.fixture(
    params=[
        pytest.param("fake", marks=pytest.mark.unit),
        # the cluster is asked for by name below, so its marker is not found from the fixtures
        pytest.param("real", marks=[pytest.mark.integration, pytest.mark.kafka]),
    ]
)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    made: Backend = (
        FakeBackend() if request.param == "fake" else RealBackend(request.getfixturevalue("kafka"))
    )
    try:
        yield made
    finally:
        made.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


# -- cluster and topics -----------------------------------------------------------------------------


def test_the_cluster_names_its_live_brokers_and_controller(backend: Backend) -> None:
    # A KRaft broker is fenced for a moment after it registers and DescribeCluster leaves it out
    # meanwhile: on a cluster started just before this test (the first of a version's run), the
    # answer may name one broker less for that moment. Asked again until every broker is named.
    info = backend.admin.describe_cluster()
    deadline = time.monotonic() + 20
    while info.broker_ids != backend.broker_ids and time.monotonic() < deadline:
        time.sleep(0.2)
        info = backend.admin.describe_cluster()

    assert info.broker_ids == backend.broker_ids
    assert info.controller_id is None or info.controller_id in backend.broker_ids
    # The active controller, not any broker: a KRaft broker's DescribeCluster names a live broker
    # chosen anew for each answer, so asked again it would name another most of the time.
    again = [backend.admin.describe_cluster().controller_id for _ in range(6)]
    assert again == [info.controller_id] * 6, (info.controller_id, again)
    assert all(b.host and b.port > 0 for b in info.brokers)
    assert info.kafka_version == backend.kafka_version


def test_a_created_topic_is_listed_and_described_with_its_replicas(backend: Backend) -> None:
    topic = backend.create_topic(partitions=3, replication_factor=3)

    # Each listing asks one broker; one that has just started (a test before stops and starts
    # brokers) may not have the cluster's metadata yet, and lists nothing until it does.
    names, everything = backend.wait_for(
        lambda: (
            (listed, whole)
            if topic in (listed := backend.admin.list_topic_names(include_internal=False))
            and topic in (whole := backend.admin.list_topic_names(include_internal=True))
            else None
        ),
        "both listings to have the new topic",
    )
    (info,) = backend.admin.describe_topics([topic])

    assert topic in names and names == sorted(names)
    assert not any(n.startswith("__") for n in names)
    assert set(names) <= set(everything)
    assert (info.name, info.is_internal, [p.partition for p in info.partitions]) == (topic, False, [0, 1, 2])
    for p in info.partitions:
        assert sorted(p.replicas) == backend.broker_ids
        assert p.leader in p.replicas
        assert sorted(p.isr) == backend.broker_ids
        assert not p.under_replicated and not p.offline


def test_an_unknown_topic_is_refused_by_name(backend: Backend) -> None:
    with pytest.raises(KafkaRequestError, match="no-such-topic"):
        backend.admin.describe_topics(["no-such-topic"])


def test_an_unknown_topic_is_left_out_when_asked_to(backend: Backend) -> None:
    # A topic deleted between the listing and the describe: the collectors describe what is left.
    topic = backend.create_topic(partitions=2)

    described = backend.admin.describe_topics(["no-such-topic", topic], skip_unknown=True)

    assert [(t.name, len(t.partitions)) for t in described] == [(topic, 2)]
    assert backend.admin.describe_topics(["no-such-topic"], skip_unknown=True) == []


def test_a_topic_that_exists_cannot_be_created_again(backend: Backend) -> None:
    topic = backend.create_topic()

    with pytest.raises(KafkaRequestError, match="TOPIC_ALREADY_EXISTS"):
        backend.admin.create_topic(topic, 1, 1)


def test_topic_configs_with_their_sources(backend: Backend) -> None:
    topic = backend.create_topic(config={"retention.ms": "3600000"})

    result = backend.wait_for(
        lambda: (r := backend.admin.describe_topic_configs([topic, "no-such-topic"])).value.get(topic) and r,
        f"the configs of {topic}",
    )
    everything = backend.admin.describe_topic_configs([topic], names=None)

    entries = {e.name: e for e in result.value[topic]}
    tiered = set() if backend.has(Feature.TIERED_STORAGE_CONFIGS) else TIERED_STORAGE_KEYS
    assert set(entries) == set(CONFIG_KEYS) - tiered
    assert [e.name for e in result.value[topic]] == sorted(entries)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert (entries["retention.bytes"].value, entries["retention.bytes"].source) == ("-1", "DEFAULT_CONFIG")
    assert entries["cleanup.policy"].value == "delete"
    assert list(result.errors) == ["no-such-topic"]
    assert "UNKNOWN_TOPIC_OR_PART" in result.errors["no-such-topic"]
    assert len(everything.value[topic]) > len(CONFIG_KEYS)


TIERED_STORAGE_KEYS = {"remote.storage.enable", "local.retention.ms", "local.retention.bytes"}


# -- offsets ------------------------------------------------------------------------------------------


def test_list_offsets_of_partitions_with_known_records(backend: Backend) -> None:
    topic = backend.create_topic(partitions=3, replication_factor=3)
    base = now_ms() - 60_000
    stamps = [base, base + 40, base + 10, base + 20, base + 30]
    assert backend.produce(topic, [b"a", b"b", b"c", b"d", b"e"], 0, stamps) == [0, 1, 2, 3, 4]
    backend.produce(topic, [b"x", b"y"], 1, [base + 5, base + 6])

    result = backend.admin.list_offsets(
        [(topic, 0), (topic, 1), (topic, 2), (topic, 7), ("no-such-topic", 0)]
    )

    newest = backend.has(Feature.MAX_TIMESTAMP)
    assert result.value == {
        (topic, 0): PartitionOffsets(topic, 0, 0, 5, *((1, base + 40) if newest else (None, None))),
        (topic, 1): PartitionOffsets(topic, 1, 0, 2, *((1, base + 6) if newest else (None, None))),
        (topic, 2): PartitionOffsets(
            topic, 2, start=0, end=0, max_timestamp_offset=None, max_timestamp_ms=None
        ),
    }
    assert set(result.errors) == {f"{topic}:7", "no-such-topic:0"}
    assert "UNKNOWN_TOPIC_OR_PART" in result.errors["no-such-topic:0"]
    assert result.held_back == {}


def test_list_end_offsets_answers_the_end_alone(backend: Backend) -> None:
    topic = backend.create_topic(partitions=2, replication_factor=3)
    backend.produce(topic, [b"a", b"b", b"c"], 0, [now_ms()] * 3)

    result = backend.admin.list_end_offsets([(topic, 0), (topic, 1), (topic, 7), ("no-such-topic", 0)])

    assert result.value == {(topic, 0): 3, (topic, 1): 0}
    assert set(result.errors) == {f"{topic}:7", "no-such-topic:0"}
    assert "UNKNOWN_TOPIC_OR_PART" in result.errors["no-such-topic:0"]


# -- consumer groups ----------------------------------------------------------------------------------


def test_a_group_that_only_committed_is_listed_empty_with_its_offsets(backend: Backend) -> None:
    topic = backend.create_topic(partitions=2, replication_factor=3)
    backend.produce(topic, [b"r"] * 5, 1)
    group, never = unique("simple"), unique("never")
    backend.commit(group, topic, 1, 3)

    listed = backend.wait_for(
        lambda: group in (ids := backend.admin.list_group_ids()) and ids, f"{group} listed"
    )
    committed = backend.admin.committed_offsets([group])
    described = backend.admin.describe_groups([group, never])

    assert listed == sorted(listed)
    assert backend.admin.list_unwatched_groups() == {}, "consumer groups alone: none of another type"
    assert committed.errors == {}
    assert [(c.group_id, c.topic, c.partition, c.offset) for c in committed.value[group]] == [
        (group, topic, 1, 3)
    ]
    assert described.errors == {}
    simple, dead = described.value
    assert (simple.group_id, simple.state, simple.protocol_type, simple.members, simple.is_simple) == (
        group,
        "Empty",
        "",
        (),
        True,
    )
    assert (dead.group_id, dead.state, dead.protocol, dead.members, dead.is_simple) == (
        never,
        "Dead",
        None,
        (),
        False,
    )
    assert simple.coordinator in backend.broker_ids and dead.coordinator in backend.broker_ids


# -- record timestamps --------------------------------------------------------------------------------


def no_record(topic: str, partition: int, offset: int) -> RecordTimestamp:
    return RecordTimestamp(topic, partition, offset, None, None)


def test_timestamps_read_back_exactly(backend: Backend) -> None:
    topic = backend.create_topic(partitions=2, replication_factor=3)
    base = now_ms() - 3_600_000
    stamps = [base + 1000 * i for i in range(6)]
    backend.produce(topic, [f"v{i}".encode() for i in range(6)], 0, stamps)
    targets = [(topic, 0, o) for o in (0, 3, 5, 6, 100, -1)] + [(topic, 1, 0)]

    resolved, unread = backend.reader.read(targets, budget_seconds=10)

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


def test_log_append_time_is_reported_as_such(backend: Backend) -> None:
    topic = backend.create_topic(config={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    backend.produce(topic, [b"a"], 0, [before - 86_400_000])
    after = now_ms()

    resolved, _ = backend.reader.read([(topic, 0, 0)], budget_seconds=10)

    read = resolved[(topic, 0, 0)]
    assert read.timestamp_type == "LogAppendTime"
    assert read.timestamp_ms is not None and before <= read.timestamp_ms <= after


# -- log dirs -----------------------------------------------------------------------------------------


def test_every_replica_reports_its_size_and_every_log_dir_its_volume(backend: Backend) -> None:
    topic = backend.create_topic(partitions=1, replication_factor=3)
    backend.produce(topic, [bytes(1000)] * 200)

    result = backend.log_dirs.describe([*backend.broker_ids, 99])
    replicas, usages = result.value

    assert set(result.errors) == {"broker:99"}
    mine = [r for r in replicas if r.topic == topic]
    assert sorted(r.broker_id for r in mine) == backend.broker_ids
    assert all(r.size_bytes >= 200 * 1000 and r.partition == 0 and not r.is_future for r in mine)
    assert sorted({u.broker_id for u in usages}) == backend.broker_ids
    for usage in usages:
        assert usage.error is None
        if not backend.has(Feature.LOG_DIR_VOLUME):
            assert (usage.total_bytes, usage.usable_bytes) == (None, None)
            continue
        assert usage.total_bytes is not None and usage.total_bytes > 0
        assert usage.usable_bytes is not None and 0 < usage.usable_bytes <= usage.total_bytes


# -- a broker down ------------------------------------------------------------------------------------


def test_a_stopped_broker_fails_its_own_partitions_only(backend: Backend) -> None:
    topic = backend.create_topic(partitions=6, replication_factor=1)
    for partition in range(6):
        backend.produce(topic, [b"a", b"b"], partition)
    (info,) = backend.admin.describe_topics([topic])
    leaders = {p.partition: p.leader for p in info.partitions}
    victim = leaders[0]
    assert victim is not None
    lost = {p for p, leader in leaders.items() if leader == victim}
    wanted = [(topic, p) for p in range(6)]

    backend.stop_broker(victim)
    offsets = backend.wait_for(
        lambda: (r := backend.admin.list_offsets(wanted)).errors and r,
        "the stopped broker's partitions to fail",
    )
    cluster = backend.wait_for(
        lambda: victim not in (c := backend.admin.describe_cluster()).broker_ids and c,
        "the broker to leave the metadata",
    )
    resolved, unread = backend.reader.read([(topic, p, 0) for p in range(6)], budget_seconds=3)
    dirs = backend.log_dirs.describe(backend.broker_ids)

    assert set(offsets.errors) == {f"{topic}:{p}" for p in lost}
    assert set(offsets.value) == {(topic, p) for p in range(6) if p not in lost}
    assert cluster.broker_ids == [b for b in backend.broker_ids if b != victim]
    assert {t[1] for t in unread} == lost
    assert {t[1] for t in resolved} == set(range(6)) - lost
    assert set(dirs.errors) == {f"broker:{victim}"}
    (again,) = backend.admin.describe_topics([topic])
    assert {p.partition for p in again.partitions if p.offline} == lost


# -- the commit stream ---------------------------------------------------------------------------------


def streamed(backend: Backend, wanted: Callable[[CommitStreamBatch], bool], what: str) -> CommitStreamBatch:
    """Poll the stream until the records polled so far satisfy `wanted`; all of them."""
    seen = CommitStreamBatch()

    def poll() -> CommitStreamBatch | None:
        batch = backend.stream.poll(0.5)
        seen.commits.extend(batch.commits)
        seen.groups.extend(batch.groups)
        return seen if wanted(seen) else None

    return backend.wait_for(poll, what)


def test_commits_are_streamed_from_the_end_on_with_their_time(backend: Backend) -> None:
    topic = backend.create_topic(partitions=2)
    before, after = unique("before"), unique("after")
    backend.commit(before, topic, 0, 1)
    backend.stream.seek_to_end()
    started = now_ms()

    backend.commit(after, topic, 1, 3)
    backend.commit(after, topic, 1, 2)
    seen = streamed(
        backend, lambda b: sum(c.group_id == after for c in b.commits) >= 2, f"two commits of {after}"
    )

    mine = [c for c in seen.commits if c.group_id == after]
    assert [(c.topic, c.partition, c.offset) for c in mine] == [(topic, 1, 3), (topic, 1, 2)]
    for commit in mine:
        assert commit.commit_timestamp_ms is not None
        assert started - 5000 <= commit.commit_timestamp_ms <= now_ms() + 5000
    assert not [c for c in seen.commits if c.group_id == before], "commits before the seek are not streamed"


def test_a_deleted_group_streams_tombstones_for_its_offsets_and_itself(backend: Backend) -> None:
    topic = backend.create_topic()
    group = unique("deleted")
    backend.commit(group, topic, 0, 4)
    backend.stream.seek_to_end()

    backend.delete_group(group)
    offset_tombstone = OffsetCommitRecord(group, topic, 0, None)
    group_tombstone = GroupMetadataRecord(group, deleted=True)
    # Before Kafka 4.0 a group that never joined leaves no group tombstone: its offsets' tombstones say so.
    wanted = group_tombstone if backend.has(Feature.SIMPLE_GROUP_TOMBSTONE) else offset_tombstone
    seen = streamed(
        backend, lambda b: wanted in b.groups or wanted in b.commits, f"the tombstones of {group}"
    )

    assert offset_tombstone in seen.commits
    assert (group_tombstone in seen.groups) is backend.has(Feature.SIMPLE_GROUP_TOMBSTONE)


# -- leadership (the repair actions) ----------------------------------------------------------------


def _partition(backend: Backend, topic: str, number: int) -> Any:
    (info,) = backend.admin.describe_topics([topic])
    return info.partitions[number]


def test_a_preferred_election_gives_leadership_back_after_a_restart(backend: Backend) -> None:
    topic = backend.create_topic(partitions=3, replication_factor=3)
    preferred = _partition(backend, topic, 0).replicas[0]
    backend.wait_for(lambda: _partition(backend, topic, 0).leader == preferred, "the first leader")

    backend.stop_broker(preferred)
    backend.wait_for(lambda: _partition(backend, topic, 0).leader not in (None, preferred), "a new leader")
    backend.start_broker(preferred)
    backend.wait_for(lambda: preferred in _partition(backend, topic, 0).isr, "the broker back in sync", 90)
    assert _partition(backend, topic, 0).leader != preferred  # Kafka does not move it back by itself

    asked = [(topic, p) for p in range(3)]
    elected = backend.wait_for(lambda: _elected(backend, asked), "the preferred leaders elected")
    assert elected.value == asked  # the ones already led by their first replica count as done
    for number in range(3):
        backend.wait_for(partial(_led_by_first, backend, topic, number), "the preferred leader")


def _led_by_first(backend: Backend, topic: str, number: int) -> bool:
    part = _partition(backend, topic, number)
    return bool(part.leader == part.replicas[0])


def _elected(backend: Backend, asked: list[tuple[str, int]]) -> Any:
    result = backend.leaders.elect_preferred_leaders(asked)
    return None if result.errors else result


def test_an_unknown_partition_is_refused_by_name(backend: Backend) -> None:
    topic = backend.create_topic(partitions=1, replication_factor=1)

    result = backend.leaders.elect_preferred_leaders([(topic, 0), (topic, 5)])

    assert result.value == [(topic, 0)]
    assert list(result.errors) == [f"{topic}:5"]


def test_reordering_replicas_then_electing_moves_the_leader(backend: Backend) -> None:
    topic = backend.create_topic(partitions=1, replication_factor=3)
    replicas = list(_partition(backend, topic, 0).replicas)
    order = [*replicas[1:], replicas[0]]

    reordered = backend.leaders.reorder_replicas({(topic, 0): order})

    assert reordered.value == [(topic, 0)] and not reordered.errors
    backend.wait_for(lambda: list(_partition(backend, topic, 0).replicas) == order, "the new order")
    backend.wait_for(lambda: _elected(backend, [(topic, 0)]), "the election")
    backend.wait_for(lambda: _partition(backend, topic, 0).leader == order[0], "the new leader")


def test_a_reorder_that_changes_the_replica_set_is_refused(backend: Backend) -> None:
    topic = backend.create_topic(partitions=1, replication_factor=2)
    replicas = list(_partition(backend, topic, 0).replicas)
    other = next(b for b in backend.broker_ids if b not in replicas)

    with pytest.raises(KafkaRequestError, match="only a reordering of the same replicas"):
        backend.leaders.reorder_replicas({(topic, 0): [other, replicas[0]]})

    assert list(_partition(backend, topic, 0).replicas) == replicas


# -- the end-to-end probe ---------------------------------------------------------------------------


def _known(backend: Backend, topic: str) -> TopicInfo | None:
    """The topic as a broker describes it; None while that broker has not yet replayed its
    creation (KRaft: each broker answers from the metadata log as far as it has read it)."""
    try:
        return backend.admin.describe_topics([topic])[0]
    except KafkaRequestError:
        return None


def test_the_probe_topic_is_made_with_a_partition_led_by_every_broker(backend: Backend) -> None:
    topic = unique("probe")

    partitions = backend.probe.prepare(topic, backend.broker_ids, replication_factor=2)

    assert [(p.partition, p.broker_id, p.leader) for p in partitions] == [
        (i, broker, broker) for i, broker in enumerate(backend.broker_ids)
    ]
    described = backend.wait_for(lambda: _known(backend, topic), "every broker to know the new topic")
    assert all(len(p.replicas) == 2 for p in described.partitions)
    assert backend.probe.prepare(topic, backend.broker_ids, 2) == partitions, (
        "a fitting topic is left as it is"
    )


def test_a_probe_round_produces_consumes_and_commits_every_partition(backend: Backend) -> None:
    topic = unique("probe")
    partitions = backend.probe.prepare(topic, backend.broker_ids, replication_factor=3)

    results = backend.probe.probe(topic, partitions, budget_seconds=10)
    again = backend.probe.probe(topic, partitions, budget_seconds=10)

    assert [(r.partition, r.broker_id, r.error) for r in results] == [
        (p.partition, p.broker_id, None) for p in partitions
    ]
    for r in [*results, *again]:
        assert (
            r.produce_seconds is not None
            and r.end_to_end_seconds is not None
            and r.commit_seconds is not None
        )
        assert 0 < r.produce_seconds <= r.end_to_end_seconds < 10
    committed = backend.admin.committed_offsets([backend.probe_group]).value[backend.probe_group]
    assert [(c.topic, c.partition, c.offset) for c in committed] == [
        (topic, p.partition, 2) for p in partitions
    ]


def test_a_stopped_broker_loses_the_lead_of_its_probe_partition_and_the_others_still_probe(
    backend: Backend,
) -> None:
    topic = unique("probe")
    backend.probe.prepare(topic, backend.broker_ids, replication_factor=3)
    stopped = backend.broker_ids[-1]
    backend.stop_broker(stopped)
    live = [b for b in backend.broker_ids if b != stopped]

    partitions = backend.wait_for(
        lambda: (
            found
            if not (found := backend.probe.prepare(topic, live, 3))[-1].led_by_its_broker
            and all(p.led_by_its_broker for p in found[:-1])
            else None
        ),
        f"broker {stopped} to lose the lead of its probe partition",
    )
    results = backend.probe.probe(topic, [p for p in partitions if p.led_by_its_broker], budget_seconds=10)

    assert partitions[-1].broker_id == stopped and partitions[-1].leader in live
    assert [(r.broker_id, r.error) for r in results] == [(b, None) for b in live]


def test_the_probe_topic_follows_a_removed_broker_and_its_return(backend: Backend) -> None:
    """A broker that counts as removed (`retired`) loses its probe replicas to the live brokers;
    when it is back it takes a spare partition rather than a new one. The broker stays up here,
    as the topic is all that is asked about."""
    topic = unique("probe")
    # As the job does every round: asked again when a broker just restarted by an earlier test
    # does not answer yet.
    backend.wait_for(lambda: backend.probe.prepare(topic, backend.broker_ids, 2), "the probe topic")
    removed = backend.broker_ids[-1]
    live = [b for b in backend.broker_ids if b != removed]

    # 1. Retired: no replica is left on it, and every live broker leads a partition of its own.
    def fitted() -> list[ProbePartition] | None:
        found = backend.probe.prepare(topic, live, 2, retired=[removed])
        placed = all(removed not in p.replicas for p in found)
        return found if placed and all(p.led_by_its_broker for p in found) else None

    partitions = backend.wait_for(fitted, f"the probe replicas off broker {removed}")
    assert len(partitions) == len(backend.broker_ids), "reassigned, not added"
    assert {p.broker_id for p in partitions} == set(live)
    # The reassignment is done when every broker says so (a KRaft broker answers from the
    # metadata it has replayed, which may be a moment behind the controller's).
    backend.wait_for(
        lambda: all(removed not in p.replicas for p in backend.admin.describe_topics([topic])[0].partitions),
        f"no broker listing broker {removed} among the replicas",
    )

    # 2. Back: it takes the spare partition and leads it once it caught up.
    def back() -> list[ProbePartition] | None:
        found = backend.probe.prepare(topic, backend.broker_ids, 2)
        probed = sorted(p.broker_id for p in found) == sorted(backend.broker_ids)
        return found if probed and all(p.led_by_its_broker for p in found) else None

    partitions = backend.wait_for(back, f"broker {removed} leading a probe partition again", timeout=60)
    assert len(partitions) == len(backend.broker_ids)
    assert sorted(p.broker_id for p in partitions) == sorted(backend.broker_ids)


def test_a_probe_topic_made_before_gets_the_probes_retention(backend: Backend) -> None:
    topic = backend.create_topic(partitions=len(backend.broker_ids), replication_factor=1)

    backend.probe.prepare(topic, backend.broker_ids, replication_factor=1)

    def configs() -> dict[str, str]:
        """The topic's configs as a broker answers, which may be a moment behind the change on
        KRaft (the broker replays the controller's metadata log). Any broker may answer, so a
        second read can come from one that has not replayed it yet: the wait is the check."""
        described = backend.admin.describe_topic_configs(
            [topic], ["retention.ms", "segment.ms", "cleanup.policy"]
        )
        return {entry.name: str(entry.value) for entry in described.value[topic]}

    wanted = {"retention.ms": "3600000", "segment.ms": "600000", "cleanup.policy": "delete"}
    backend.wait_for(lambda: configs() == wanted, "the probe's retention on the topic made before")


@pytest.mark.integration
@pytest.mark.kafka
def test_a_probe_topic_made_before_that_a_lagging_broker_calls_unknown_gets_the_probes_retention(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any broker may answer the probe's describe, and one that has not replayed the topic's
    creation calls it unknown: the probe then asks to create it and is told it exists. That topic
    was made by someone else, with configs of its own, so it is given the probe's retention as a
    topic found would be (before, the answer "exists" was taken as made with the probe's)."""
    backend = RealBackend(kafka)
    try:
        topic = backend.create_topic(partitions=1, replication_factor=1)
        admin = backend.probe._admin  # type: ignore[attr-defined]
        describe = admin.probe_partitions
        asked: list[str] = []

        def probe_partitions(name: str) -> Any:
            asked.append(name)
            if len(asked) == 1:  # the first describe comes from a broker behind the controller
                return None
            return describe(name)

        monkeypatch.setattr(admin, "probe_partitions", probe_partitions)

        backend.probe.prepare(topic, backend.broker_ids[:1], replication_factor=1)
        assert asked[0] == topic

        def configs() -> dict[str, str]:
            described = backend.admin.describe_topic_configs([topic], ["retention.ms", "segment.ms"])
            return {entry.name: str(entry.value) for entry in described.value[topic]}

        wanted = {"retention.ms": "3600000", "segment.ms": "600000"}
        backend.wait_for(
            lambda: configs() == wanted, "the probe's retention on the topic a broker called unknown"
        )
    finally:
        backend.close()
