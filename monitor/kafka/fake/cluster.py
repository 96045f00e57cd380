"""The fake cluster's state: brokers, topics, partitions with their records, configs, consumer
groups and the failures injected on them (`monitor.kafka.fake`)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor.core.clock import Clock, SystemClock, to_millis
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.kafka_features import FIRST_RELEASE, KafkaVersion
from monitor.core.records import (
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    BrokerInfo,
    GroupMember,
    GroupMetadataRecord,
    OffsetCommitRecord,
    PartitionInfo,
    TopicPartition,
)

UNKNOWN_TOPIC = "Broker: Unknown topic or partition (UNKNOWN_TOPIC_OR_PART)"
OFFSET_NOT_AVAILABLE = "Broker: Offset not available (OFFSET_NOT_AVAILABLE)"
PREFERRED_NOT_AVAILABLE = "Broker: Preferred leader not available (PREFERRED_LEADER_NOT_AVAILABLE)"

DEFAULT_CONFIGS: dict[str, str] = {
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "min.insync.replicas": "1",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "message.timestamp.type": "CreateTime",
    "remote.storage.enable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "unclean.leader.election.enable": "false",
}
"""A topic's configs and Kafka's defaults for them: the ones the monitor reads and a few more."""

LOG_DIR_TOTAL_BYTES = 100 * 2**30
"""Each fake broker has one log dir on a volume this big."""


@dataclass
class FakeRecord:
    offset: int
    timestamp_ms: int
    timestamp_type: str
    size_bytes: int


@dataclass
class FakePartition:
    replicas: list[int]
    isr: list[int]
    leader: int | None
    records: list[FakeRecord] = field(default_factory=list)
    start: int = 0
    end: int = 0

    def info(self, number: int) -> PartitionInfo:
        return PartitionInfo(number, self.leader, tuple(self.replicas), tuple(self.isr))


@dataclass
class FakeTopic:
    name: str
    partitions: list[FakePartition]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")

    def config(self, name: str) -> str:
        return self.configs.get(name, DEFAULT_CONFIGS.get(name, ""))


@dataclass
class FakeGroup:
    group_id: str
    home: int
    """The broker that coordinates the group while it is up (else the next live one)."""
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    members: list[GroupMember] = field(default_factory=list)
    generation: int = 0


class ClusterState:
    """The state of one fake cluster and the failures injected into it (`FakeCluster` adds the
    clients that answer from it)."""

    def __init__(
        self,
        name: str = "fake",
        brokers: int = 3,
        clock: Clock | None = None,
        request_timeout_seconds: float = 10.0,
    ) -> None:
        if brokers < 1:
            raise ValueError("a fake cluster needs at least one broker")
        self.name = name
        self.cluster_id = f"fake-{name}"
        self.clock = clock or SystemClock()
        self.timeout = request_timeout_seconds
        self.brokers = {
            i: BrokerInfo(i, "127.0.0.1", 9091 + i, f"rack-{i % 3}") for i in range(1, brokers + 1)
        }
        self.down: set[int] = set()
        self.unregistered: set[int] = set()
        """Brokers unregistered from the controller (`unregister_broker`): gone for good."""
        self.silent_coordinators: set[int] = set()
        self.failing: dict[str, int] = {}
        self.reader_capacity: int | None = None
        self.topics: dict[str, FakeTopic] = {}
        self.groups: dict[str, FakeGroup] = {}
        self.lock = threading.RLock()
        self.offsets_log: list[OffsetCommitRecord | GroupMetadataRecord] = []
        self._offsets_written = threading.Condition(self.lock)
        self.deny_commit_stream = False
        self.unwatched_groups: dict[str, str] = {}
        """Groups of other types (share, streams ...) the brokers list: id -> type."""
        self.kafka_version: KafkaVersion | None = max(FIRST_RELEASE.values())
        """The release the brokers run (None: not identified); the fake gives every feature
        whatever it says."""
        self.create_topic("__consumer_offsets", 1, min(3, brokers))

    # -- the cluster's state -------------------------------------------------------------------

    @property
    def live(self) -> list[int]:
        return sorted(set(self.brokers) - self.down)

    def topic(self, name: str) -> FakeTopic:
        found = self.topics.get(name)
        if found is None:
            raise KafkaRequestError(f"no topic {name!r} in fake cluster {self.name!r}: create it first")
        return found

    def partition(self, topic: str, partition: int) -> FakePartition:
        partitions = self.topic(topic).partitions
        if not 0 <= partition < len(partitions):
            raise KafkaRequestError(f"topic {topic!r} has no partition {partition}")
        return partitions[partition]

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> None:
        with self.lock:
            if name in self.topics:
                raise KafkaRequestError(
                    f"cannot create topic {name!r} on cluster {self.name!r}: the cluster refused the "
                    "request: Broker: Topic already exists (TOPIC_ALREADY_EXISTS)"
                )
            ids = self.live
            if partitions < 1 or not 1 <= replication_factor <= len(ids):
                raise KafkaRequestError(
                    f"cannot create topic {name!r} on cluster {self.name!r}: the cluster refused the "
                    f"request: {partitions} partition(s) of {replication_factor} replica(s) on "
                    f"{len(ids)} live broker(s) (INVALID_REPLICATION_FACTOR)"
                )
            made = []
            for p in range(partitions):
                replicas = [ids[(p + r) % len(ids)] for r in range(replication_factor)]
                made.append(FakePartition(replicas, list(replicas), replicas[0]))
            self.topics[name] = FakeTopic(name, made, dict(configs or {}))

    def produce(
        self,
        topic: str,
        partition: int = 0,
        count: int = 1,
        timestamps_ms: Sequence[int] | None = None,
        size_bytes: int = 100,
    ) -> list[int]:
        """Append records (at `timestamps_ms`, else now; now always for LogAppendTime topics);
        returns their offsets."""
        with self.lock:
            found = self.topic(topic)
            part = self.partition(topic, partition)
            stamps = list(timestamps_ms) if timestamps_ms is not None else [self.now_ms()] * count
            append_time = found.config("message.timestamp.type") == TIMESTAMP_LOG_APPEND
            offsets = []
            for stamp in stamps:
                ts, kind = (self.now_ms(), TIMESTAMP_LOG_APPEND) if append_time else (stamp, TIMESTAMP_CREATE)
                part.records.append(FakeRecord(part.end, ts, kind, size_bytes))
                offsets.append(part.end)
                part.end += 1
            return offsets

    def skip_offsets(self, topic: str, partition: int, count: int) -> None:
        """Offsets taken without a record a consumer sees (transaction markers, compaction)."""
        with self.lock:
            self.partition(topic, partition).end += count

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Move the log start to `before` (retention deleted what came earlier)."""
        with self.lock:
            part = self.partition(topic, partition)
            part.start = max(part.start, min(before, part.end))
            part.records = [r for r in part.records if r.offset >= part.start]

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit offsets for a group (a simple group when it has no members)."""
        with self.lock:
            self._group(group_id).committed.update(offsets)
            now = self.now_ms()
            self._write_offsets_log(
                OffsetCommitRecord(group_id, topic, partition, offset, commit_timestamp_ms=now)
                for (topic, partition), offset in offsets.items()
            )

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete a group's committed offsets (as OffsetDelete or their expiry does)."""
        with self.lock:
            group = self._group(group_id)
            gone = [key for key in partitions if group.committed.pop(key, None) is not None]
            self._write_offsets_log(OffsetCommitRecord(group_id, t, p, None) for t, p in gone)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group: tombstones for its offsets and for the group itself."""
        with self.lock:
            group = self.groups.pop(group_id, None)
            if group is None:
                return
            self._write_offsets_log(
                [
                    *(OffsetCommitRecord(group_id, t, p, None) for t, p in sorted(group.committed)),
                    GroupMetadataRecord(group_id, deleted=True),
                ]
            )

    def _write_offsets_log(self, records: Iterable[OffsetCommitRecord | GroupMetadataRecord]) -> None:
        self.offsets_log.extend(records)
        self._offsets_written.notify_all()

    def wait_for_offsets_log(self, position: int, seconds: float) -> None:
        """Block until the offsets log holds more than `position` records, or `seconds` pass."""
        with self._offsets_written:
            self._offsets_written.wait_for(lambda: len(self.offsets_log) > position, timeout=seconds)

    def _membership_changed(self, group: FakeGroup) -> None:
        group.generation += 1
        self._write_offsets_log(
            [
                GroupMetadataRecord(
                    group.group_id,
                    protocol_type="consumer",
                    generation=group.generation,
                    protocol="range" if group.members else None,
                    leader=group.members[0].member_id if group.members else None,
                    state_timestamp_ms=self.now_ms(),
                    member_ids=tuple(m.member_id for m in group.members),
                )
            ]
        )

    def join(self, group_id: str, member_id: str, assignment: Iterable[TopicPartition] = ()) -> None:
        """A consumer joins the group (classic protocol) with `assignment`."""
        with self.lock:
            group = self._group(group_id)
            member = GroupMember(member_id, f"client-{member_id}", "/127.0.0.1", tuple(sorted(assignment)))
            group.members = sorted(
                [*(m for m in group.members if m.member_id != member_id), member], key=lambda m: m.member_id
            )
            self._membership_changed(group)

    def leave(self, group_id: str, member_id: str) -> None:
        with self.lock:
            group = self._group(group_id)
            group.members = [m for m in group.members if m.member_id != member_id]
            self._membership_changed(group)

    def _group(self, group_id: str) -> FakeGroup:
        group = self.groups.get(group_id)
        if group is None:
            ids = sorted(self.brokers)
            group = FakeGroup(group_id, ids[zlib.crc32(group_id.encode()) % len(ids)])
            self.groups[group_id] = group
        return group

    def coordinator(self, group_id: str) -> int | None:
        """The group's home broker while it is up, else the next live one (as the leadership of
        its `__consumer_offsets` partition moves)."""
        ids = sorted(self.brokers)
        home = (
            self.groups[group_id].home
            if group_id in self.groups
            else ids[zlib.crc32(group_id.encode()) % len(ids)]
        )
        start = ids.index(home)
        for broker in ids[start:] + ids[:start]:
            if broker not in self.down:
                return broker
        return None

    def now_ms(self) -> int:
        return to_millis(self.clock.now())

    # -- failures -------------------------------------------------------------------------------

    def stop_broker(self, broker_id: int) -> None:
        with self.lock:
            self.down.add(broker_id)
            for part in self._partitions():
                if broker_id in part.isr and len(part.isr) > 1:
                    part.isr.remove(broker_id)
                if part.leader == broker_id:
                    live_isr = [b for b in part.isr if b not in self.down]
                    part.leader = live_isr[0] if live_isr else None

    def unregister_broker(self, broker_id: int) -> None:
        """Decommission a broker that is down, as `kafka-cluster.sh unregister` does."""
        with self.lock:
            if broker_id not in self.down:
                raise ValueError(f"broker {broker_id} is alive: stop it before unregistering it")
            self.unregistered.add(broker_id)

    def start_broker(self, broker_id: int) -> None:
        with self.lock:
            self.down.discard(broker_id)
            self.unregistered.discard(broker_id)
            for part in self._partitions():
                if broker_id in part.replicas and broker_id not in part.isr:
                    part.isr = [b for b in part.replicas if b in part.isr or b == broker_id]
                if part.leader is None and broker_id in part.isr:
                    part.leader = broker_id

    def shrink_isr(self, topic: str, partition: int, isr: Sequence[int]) -> None:
        """Followers fell behind: the partition's ISR is `isr` (the leader stays if in it)."""
        with self.lock:
            part = self.partition(topic, partition)
            part.isr = [b for b in part.replicas if b in isr]
            if part.leader not in part.isr:
                part.leader = part.isr[0] if part.isr else None

    def silence_coordinator(self, broker_id: int) -> None:
        with self.lock:
            self.silent_coordinators.add(broker_id)

    def answer_coordinator(self, broker_id: int) -> None:
        with self.lock:
            self.silent_coordinators.discard(broker_id)

    def fail(self, operation: str, times: int = 1) -> None:
        """The next `times` calls of `operation` (a method name of the fake clients) get no
        answer within the request timeout."""
        with self.lock:
            self.failing[operation] = self.failing.get(operation, 0) + times

    def _partitions(self) -> Iterable[FakePartition]:
        return (p for t in self.topics.values() for p in t.partitions)

    def check(self, operation: str, action: str) -> None:
        """Raise as the real clients do when `operation` is failing or no broker is up."""
        left = self.failing.get(operation, 0)
        if left:
            self.failing[operation] = left - 1
            raise KafkaUnavailableError(self.unanswered(action))
        if not self.live:
            raise KafkaUnavailableError(self.unanswered(action))

    def unanswered(self, action: str) -> str:
        servers = ", ".join(f"{b.host}:{b.port}" for b in self.brokers.values())
        return (
            f"cannot {action} on cluster {self.name!r}: no answer within {self.timeout:g}s; "
            f"check that {servers} are up and reachable"
        )

    def no_answer(self) -> str:
        return f"no answer within {self.timeout:g}s"
