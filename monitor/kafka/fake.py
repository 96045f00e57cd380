"""A Kafka cluster in memory, behind the same protocols as the real clients
(`monitor.kafka.protocol`): `FakeCluster` holds brokers, topics, partitions with their records,
configs and consumer groups; `FakeKafkaAdmin`, `FakeTimestampReader`, `FakeLogDirs` and
`FakeProbe` answer from it as `KafkaAdmin`, `RecordTimestampReader`, `LogDirClient` and
`ProbeClient` answer from a real cluster
(tests/contract holds the suite both pass), with the same partial-failure policy.

Failures are injected on the cluster, between requests:

- `stop_broker(id)`: the broker leaves the metadata; its partitions lose it from their ISR and
  elect the next in-sync replica (offline when none is left); its groups move to another
  coordinator; requests needing it go unanswered. `start_broker(id)` brings it back in sync.
- `silence_coordinator(id)`: the broker stays up but its group requests go unanswered (a
  coordinator that does not answer); `answer_coordinator(id)` ends that.
- `fail(operation, times)`: the next calls of one request fail as a whole (a timeout by default).
- a partition whose ISR is below its topic's `min.insync.replicas` has its end offset held back
  (OFFSET_NOT_AVAILABLE), as a Kafka 4 leader holds back its high watermark.
- `reader_capacity`: record timestamps resolved per read at most (a budget too short).
- `deny_commit_stream`: reading `__consumer_offsets` is refused (a missing ACL).

Commits, offset deletions and group membership changes are also written, as decoded records, to
the cluster's `offsets_log`: `FakeCommitStream` reads it as `CommitStreamReader` reads
`__consumer_offsets`.

Not thread-safe beyond what the collectors need: one lock guards every request and change.
"""

from __future__ import annotations

import threading
import zlib
from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor.core.clock import Clock, SystemClock, to_millis
from monitor.core.errors import KafkaAuthorizationError, KafkaRequestError, KafkaUnavailableError
from monitor.core.kafka_features import FIRST_RELEASE, KafkaVersion
from monitor.core.records import (
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    BrokerInfo,
    ClusterInfo,
    CommitStreamBatch,
    CommittedOffset,
    EndOffsetHeldBack,
    GroupDescription,
    GroupMember,
    GroupMetadataRecord,
    ListedOffsets,
    LogDirReplica,
    LogDirUsage,
    OffsetCommitRecord,
    Partial,
    PartitionInfo,
    PartitionOffsets,
    ProbePartition,
    ProbeResult,
    RecordTimestamp,
    TopicConfigEntry,
    TopicInfo,
    TopicPartition,
)
from monitor.kafka.probe import RETENTION, assignment, plan_topic
from monitor.kafka.protocol import LogDirs, Target
from monitor.kafka.records import CONFIG_KEYS, partition_key

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


class FakeCluster:
    """The state of one fake cluster and the failures injected into it."""

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

    def admin(self) -> FakeKafkaAdmin:
        return FakeKafkaAdmin(self)

    def reader(self) -> FakeTimestampReader:
        return FakeTimestampReader(self)

    def log_dirs(self) -> FakeLogDirs:
        return FakeLogDirs(self)

    def commit_stream(self) -> FakeCommitStream:
        return FakeCommitStream(self)

    def probe(self, group_id: str = "kafka-health-probe") -> FakeProbe:
        return FakeProbe(self, group_id)


class _Tally:
    """`monitor.kafka.translate.Outcome` for the fake: raise when nothing answered and every
    failure was "no answer"."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.answered = 0
        self.refused = False

    def unanswered(self, key: str, text: str) -> None:
        self.errors[key] = text

    def refusal(self, key: str, text: str) -> None:
        self.errors[key] = text
        self.refused = True

    def raise_if_unreachable(self, cluster: FakeCluster, action: str) -> None:
        if self.errors and not self.answered and not self.refused:
            raise KafkaUnavailableError(cluster.unanswered(action))


class _FakeClient:
    def __init__(self, cluster: FakeCluster) -> None:
        self.fake = cluster
        self._started = False

    def start(self) -> None:
        self._started = True

    def close(self) -> None:
        self._started = False

    def _begin(self, operation: str, action: str) -> None:
        if not self._started:
            raise RuntimeError(f"{type(self).__name__}.start() must be called before making requests")
        self.fake.check(operation, action)


class FakeKafkaAdmin(_FakeClient):
    """`monitor.kafka.protocol.AdminApi` and `LeaderApi` over a `FakeCluster`."""

    def describe_cluster(self) -> ClusterInfo:
        with self.fake.lock:
            self._begin("describe_cluster", "describe the cluster")
            live = self.fake.live
            registered = tuple(sorted(set(self.fake.brokers) - self.fake.unregistered))
            brokers = tuple(self.fake.brokers[b] for b in live)
            return ClusterInfo(self.fake.cluster_id, live[0], brokers, registered, self.fake.kafka_version)

    def list_topic_names(self, include_internal: bool) -> list[str]:
        with self.fake.lock:
            self._begin("list_topic_names", "list topics")
            return sorted(t.name for t in self.fake.topics.values() if include_internal or not t.internal)

    def describe_topics(self, names: Sequence[str]) -> list[TopicInfo]:
        if not names:
            return []
        with self.fake.lock:
            self._begin("describe_topics", "describe topics")
            described = []
            for name in names:
                topic = self.fake.topics.get(name)
                if topic is None:
                    raise KafkaRequestError(
                        f"cannot describe topic {name!r} on cluster {self.fake.name!r}: the cluster "
                        f"refused the request: {UNKNOWN_TOPIC}"
                    )
                parts = tuple(p.info(i) for i, p in enumerate(topic.partitions))
                described.append(TopicInfo(topic.name, topic.internal, parts))
            return described

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition]) -> Partial[list[TopicPartition]]:
        with self.fake.lock:
            self._begin("elect_preferred_leaders", "elect preferred leaders")
            done: list[TopicPartition] = []
            errors: dict[str, str] = {}
            for topic, number in partitions:
                try:
                    part = self.fake.partition(topic, number)
                except KafkaRequestError:
                    errors[partition_key(topic, number)] = UNKNOWN_TOPIC
                    continue
                preferred = part.replicas[0]
                if preferred in self.fake.down or preferred not in part.isr:
                    errors[partition_key(topic, number)] = PREFERRED_NOT_AVAILABLE
                    continue
                part.leader = preferred
                done.append((topic, number))
            return Partial(sorted(done), errors)

    def reorder_replicas(
        self, orders: Mapping[TopicPartition, Sequence[int]]
    ) -> Partial[list[TopicPartition]]:
        with self.fake.lock:
            self._begin("reorder_replicas", "reorder partition replicas")
            for (topic, number), order in orders.items():
                now = self.fake.partition(topic, number).replicas
                if sorted(order) != sorted(now) or len(set(order)) != len(order):
                    raise KafkaRequestError(
                        f"refused to reassign {topic}:{number} on cluster {self.fake.name!r} from "
                        f"{now} to {list(order)}: only a reordering of the same replicas is allowed"
                    )
            for (topic, number), order in orders.items():
                self.fake.partition(topic, number).replicas = list(order)
            return Partial(sorted(orders), {})

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> None:
        with self.fake.lock:
            self._begin("create_topic", f"create topic {name!r}")
            self.fake.create_topic(name, partitions, replication_factor, configs)

    def describe_topic_configs(
        self, topics: Sequence[str], names: Collection[str] | None = CONFIG_KEYS
    ) -> Partial[dict[str, list[TopicConfigEntry]]]:
        value: dict[str, list[TopicConfigEntry]] = {}
        tally = _Tally()
        wanted = list(dict.fromkeys(topics))
        if not wanted:
            return Partial(value, tally.errors)
        with self.fake.lock:
            self._begin("describe_topic_configs", "describe topic configs")
            for name in wanted:
                topic = self.fake.topics.get(name)
                if topic is None:
                    tally.refusal(name, UNKNOWN_TOPIC)
                    continue
                keys = sorted(set(DEFAULT_CONFIGS) | set(topic.configs))
                value[name] = [
                    TopicConfigEntry(
                        name,
                        key,
                        topic.config(key),
                        "DYNAMIC_TOPIC_CONFIG" if key in topic.configs else "DEFAULT_CONFIG",
                    )
                    for key in keys
                    if names is None or key in names
                ]
                tally.answered += 1
        return Partial(value, tally.errors)

    def list_offsets(
        self,
        partitions: Sequence[TopicPartition],
        leaders: Mapping[TopicPartition, int] | None = None,
        known: Mapping[TopicPartition, PartitionOffsets] | None = None,
    ) -> ListedOffsets:
        value: dict[TopicPartition, PartitionOffsets] = {}
        held_back: dict[TopicPartition, EndOffsetHeldBack] = {}
        tally = _Tally()
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return ListedOffsets(value, tally.errors)
        with self.fake.lock:
            self._begin("list_offsets", "list offsets")
            for topic_name, number in wanted:
                key = partition_key(topic_name, number)
                topic = self.fake.topics.get(topic_name)
                if topic is None or not 0 <= number < len(topic.partitions):
                    tally.refusal(key, UNKNOWN_TOPIC)
                    continue
                part = topic.partitions[number]
                if part.leader is None or part.leader in self.fake.down:
                    tally.unanswered(key, f"the leader did not answer within {self.fake.timeout:g}s")
                    continue
                tally.answered += 1
                if len(part.isr) < int(topic.config("min.insync.replicas")):
                    held_back[(topic_name, number)] = EndOffsetHeldBack(
                        topic_name, number, part.start, OFFSET_NOT_AVAILABLE
                    )
                    continue
                newest = max(part.records, key=lambda r: r.timestamp_ms, default=None)
                value[(topic_name, number)] = PartitionOffsets(
                    topic_name,
                    number,
                    part.start,
                    part.end,
                    newest.offset if newest is not None else None,
                    newest.timestamp_ms if newest is not None else None,
                )
            tally.raise_if_unreachable(self.fake, "list offsets")
        return ListedOffsets(value, tally.errors, held_back)

    def list_group_ids(self) -> list[str]:
        with self.fake.lock:
            self._begin("list_group_ids", "list consumer groups")
            return sorted(g.group_id for g in self.fake.groups.values() if g.committed or g.members)

    def list_unwatched_groups(self) -> dict[str, str]:
        with self.fake.lock:
            return dict(self.fake.unwatched_groups)

    def _coordinator(self, group_id: str, tally: _Tally) -> tuple[bool, int | None]:
        """(whether the group's coordinator answers, which broker it is)."""
        node = self.fake.coordinator(group_id)
        if node is None or node in self.fake.silent_coordinators:
            tally.unanswered(group_id, self.fake.no_answer())
            return False, node
        tally.answered += 1
        return True, node

    def describe_groups(self, group_ids: Sequence[str]) -> Partial[list[GroupDescription]]:
        described: list[GroupDescription] = []
        tally = _Tally()
        wanted = list(dict.fromkeys(group_ids))
        if not wanted:
            return Partial(described, tally.errors)
        with self.fake.lock:
            self._begin("describe_groups", "describe consumer groups")
            for group_id in wanted:
                answers, node = self._coordinator(group_id, tally)
                if not answers:
                    continue
                group = self.fake.groups.get(group_id)
                if group is None or not (group.committed or group.members):
                    described.append(GroupDescription(group_id, "Dead", "", None, node, ()))
                elif group.members:
                    members = tuple(group.members)
                    described.append(GroupDescription(group_id, "Stable", "consumer", "range", node, members))
                else:
                    described.append(GroupDescription(group_id, "Empty", "", None, node, (), is_simple=True))
            tally.raise_if_unreachable(self.fake, "describe consumer groups")
        return Partial(described, tally.errors)

    def committed_offsets(self, group_ids: Sequence[str]) -> Partial[dict[str, list[CommittedOffset]]]:
        value: dict[str, list[CommittedOffset]] = {}
        tally = _Tally()
        wanted = list(dict.fromkeys(group_ids))
        if not wanted:
            return Partial(value, tally.errors)
        with self.fake.lock:
            self._begin("committed_offsets", "fetch committed offsets")
            for group_id in wanted:
                answers, _ = self._coordinator(group_id, tally)
                if not answers:
                    continue
                group = self.fake.groups.get(group_id)
                committed = group.committed if group is not None else {}
                value[group_id] = [
                    CommittedOffset(group_id, topic, partition, offset)
                    for (topic, partition), offset in sorted(committed.items())
                    if offset >= 0
                ]
            tally.raise_if_unreachable(self.fake, "fetch committed offsets")
        return Partial(value, tally.errors)


def _no_record(target: Target) -> RecordTimestamp:
    return RecordTimestamp(target[0], target[1], target[2], None, None)


class FakeTimestampReader(_FakeClient):
    """`monitor.kafka.protocol.TimestampReader` over a `FakeCluster`; at most
    `FakeCluster.reader_capacity` targets resolve in one read."""

    def read(
        self, targets: Sequence[Target], budget_seconds: float
    ) -> tuple[dict[Target, RecordTimestamp], list[Target]]:
        resolved: dict[Target, RecordTimestamp] = {}
        with self.fake.lock:
            self._begin("read", "read record timestamps")
            capacity = self.fake.reader_capacity
            for target in dict.fromkeys(targets):
                if capacity is not None and len(resolved) >= capacity:
                    break
                found = self._resolve(target)
                if found is not None:
                    resolved[target] = found
        return resolved, [t for t in dict.fromkeys(targets) if t not in resolved]

    def _resolve(self, target: Target) -> RecordTimestamp | None:
        topic_name, number, offset = target
        if offset < 0:
            return _no_record(target)
        topic = self.fake.topics.get(topic_name)
        if topic is None or not 0 <= number < len(topic.partitions):
            return None
        part = topic.partitions[number]
        if part.leader is None or part.leader in self.fake.down:
            return None
        if not part.start <= offset < part.end:
            return _no_record(target)
        index = bisect_left([r.offset for r in part.records], offset)
        if index == len(part.records):
            return _no_record(target)
        record = part.records[index]
        return RecordTimestamp(
            topic_name, number, offset, record.offset, record.timestamp_ms, record.timestamp_type
        )


class FakeLogDirs(_FakeClient):
    """`monitor.kafka.protocol.LogDirReader` over a `FakeCluster`: one log dir per broker."""

    def describe(self, broker_ids: Sequence[int]) -> Partial[LogDirs]:
        replicas: list[LogDirReplica] = []
        usages: list[LogDirUsage] = []
        tally = _Tally()
        with self.fake.lock:
            self._begin("describe", "list topics for log dirs")
            for broker in dict.fromkeys(broker_ids):
                if broker not in self.fake.brokers or broker in self.fake.down:
                    tally.unanswered(f"broker:{broker}", self.fake.no_answer())
                    continue
                tally.answered += 1
                log_dir = f"/var/lib/kafka/data-{broker}"
                mine = [
                    LogDirReplica(
                        broker, log_dir, topic.name, number, sum(r.size_bytes for r in part.records), 0, False
                    )
                    for topic in self.fake.topics.values()
                    for number, part in enumerate(topic.partitions)
                    if broker in part.replicas
                ]
                used = sum(r.size_bytes for r in mine)
                usages.append(LogDirUsage(broker, log_dir, LOG_DIR_TOTAL_BYTES, LOG_DIR_TOTAL_BYTES - used))
                replicas.extend(mine)
            tally.raise_if_unreachable(self.fake, "describe log dirs")
        replicas.sort(key=lambda r: (r.topic, r.partition, r.log_dir))
        return Partial((replicas, usages), tally.errors)


class FakeCommitStream(_FakeClient):
    """`monitor.kafka.protocol.CommitStream` over a `FakeCluster`'s offsets log."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(cluster)
        self._position: int | None = None

    def _check_allowed(self) -> None:
        if self.fake.deny_commit_stream:
            raise KafkaAuthorizationError(
                f"{self.fake.name}: reading __consumer_offsets is not allowed (Broker: Topic authorization "
                "failed); grant the monitor's principal Describe and Read on the topic __consumer_offsets, "
                "or set commit_stream: false for this cluster"
            )

    def seek_to_end(self) -> None:
        with self.fake.lock:
            self._begin("seek_to_end", "position the commit stream")
            self._check_allowed()
            self._position = len(self.fake.offsets_log)

    def poll(self, max_seconds: float) -> CommitStreamBatch:
        if self._position is None:
            raise RuntimeError("FakeCommitStream.seek_to_end() must be called before poll()")
        self.fake.wait_for_offsets_log(self._position, max_seconds)
        with self.fake.lock:
            self._begin("poll", "read the commit stream")
            self._check_allowed()
            records = self.fake.offsets_log[self._position :]
            self._position = len(self.fake.offsets_log)
        return CommitStreamBatch(
            commits=[r for r in records if isinstance(r, OffsetCommitRecord)],
            groups=[r for r in records if isinstance(r, GroupMetadataRecord)],
            caught_up=True,
        )


class FakeProbe(_FakeClient):
    """`monitor.kafka.protocol.ProbeApi` over a `FakeCluster`: each step takes
    `latency_seconds`; a partition whose leader is down or gone fails to produce, a group whose
    coordinator is down fails to commit."""

    latency_seconds = 0.002

    def __init__(self, cluster: FakeCluster, group_id: str = "kafka-health-probe") -> None:
        super().__init__(cluster)
        self.group_id = group_id

    def _partitions_of(self, topic: str) -> list[ProbePartition]:
        return [
            ProbePartition(number, part.replicas[0], part.leader, tuple(part.replicas))
            for number, part in enumerate(self.fake.topic(topic).partitions)
        ]

    def prepare(
        self,
        topic: str,
        broker_ids: Sequence[int],
        replication_factor: int,
        retired: Collection[int] = (),
    ) -> list[ProbePartition]:
        with self.fake.lock:
            self._begin("prepare", f"prepare probe topic {topic!r}")
            if not broker_ids:
                raise KafkaRequestError(
                    f"cannot prepare probe topic {topic!r} on cluster {self.fake.name!r}: no broker is up"
                )
            if topic not in self.fake.topics:
                rows = assignment(broker_ids, replication_factor)
                self.fake.topics[topic] = FakeTopic(
                    topic, [FakePartition(r, list(r), r[0]) for r in rows], dict(RETENTION)
                )
            self.fake.topic(topic).configs.update(RETENTION)
            plan = plan_topic(self._partitions_of(topic), broker_ids, retired, replication_factor)
            parts = self.fake.topic(topic).partitions
            for number, replicas in plan.moves.items():
                # A reassignment: the new replicas catch up at once here; a leader removed from
                # the replicas hands over to the first live one.
                part = parts[number]
                part.replicas = list(replicas)
                part.isr = [b for b in replicas if b not in self.fake.down]
                if part.leader not in part.isr:
                    part.leader = part.isr[0] if part.isr else None
            parts.extend(FakePartition(r, list(r), r[0]) for r in plan.additions)
            for part in parts:
                preferred = part.replicas[0]
                if part.leader != preferred and preferred not in self.fake.down and preferred in part.isr:
                    part.leader = preferred
            return self._partitions_of(topic)

    def probe(
        self, topic: str, partitions: Sequence[ProbePartition], budget_seconds: float
    ) -> list[ProbeResult]:
        step = self.latency_seconds
        results = []
        with self.fake.lock:
            self._begin("probe", f"probe topic {topic!r}")
            coordinator = self.fake.coordinator(self.group_id)
            for target in partitions:
                part = self.fake.partition(topic, target.partition)
                if part.leader is None or part.leader in self.fake.down:
                    error = f"produce failed: {self.fake.no_answer()}"
                    results.append(ProbeResult(target.partition, target.broker_id, None, None, None, error))
                    continue
                (offset,) = self.fake.produce(topic, target.partition)
                if coordinator is None:
                    error = f"commit failed: {self.fake.no_answer()}"
                    results.append(
                        ProbeResult(target.partition, target.broker_id, step, 2 * step, None, error)
                    )
                    continue
                self.fake.commit(self.group_id, {(topic, target.partition): offset + 1})
                results.append(ProbeResult(target.partition, target.broker_id, step, 2 * step, step))
        return results
