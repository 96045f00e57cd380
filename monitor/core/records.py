"""The typed records the stages share.

Stages never hand each other client-library objects or ORM rows: `monitor.kafka` turns what the
Kafka clients return into these records, and every other stage reads only these. They are frozen
and slotted, so they can be passed between threads and used as dictionary keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from monitor.core.kafka_features import KafkaVersion

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker as the cluster metadata lists it."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What DescribeCluster returns: the id, the active controller and the live brokers."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]
    registered: tuple[int, ...] | None = None
    """Ids of the brokers registered with the controller, alive or not (a broker that is down
    stays registered; one decommissioned is unregistered); None when the cluster cannot say
    (DescribeCluster before v2, Kafka 4.0)."""
    kafka_version: KafkaVersion | None = None
    """The Kafka release (major, minor) of the oldest live broker, from their ApiVersions; None
    when no broker could be identified."""

    @property
    def broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """Replication state of one partition. `leader` is None when the partition has no leader."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def replicas_lost(self) -> int:
        """Assigned replicas that are not in sync (RF - ISR)."""
        in_sync = set(self.isr)
        return sum(1 for replica in self.replicas if replica not in in_sync)

    @property
    def under_replicated(self) -> bool:
        return self.replicas_lost > 0

    @property
    def offline(self) -> bool:
        return self.leader is None

    @property
    def preferred_leader(self) -> int | None:
        """The first assigned replica: where leadership goes back after a preferred election."""
        return self.replicas[0] if self.replicas else None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic and the replication state of each of its partitions, ordered by partition."""

    name: str
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


# ---------------------------------------------------------------------------------------------
# Offsets, groups, record timestamps, configs and log dirs (what the collectors sample)

TopicPartition = tuple[str, int]
"""(topic, partition): the key of every per-partition record."""


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """ListOffsets for one partition. `end` is the next offset to be written (the high watermark);
    `start` the oldest retained. The max-timestamp pair is None where the broker has no record."""

    topic: str
    partition: int
    start: int
    end: int
    max_timestamp_offset: int | None = None
    max_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class EndOffsetHeldBack:
    """A partition whose leader answered ListOffsets but could not give its end offset:
    OFFSET_NOT_AVAILABLE, "leader high watermark is not caught up". Kafka 4 does not advance the
    high watermark of a partition under min ISR, so this lasts as long as the ISR stays short.
    `start` is its start offset when the leader answered that (None otherwise)."""

    topic: str
    partition: int
    start: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """DescribeConsumerGroups for one group. `state` is Kafka's name: Stable, PreparingRebalance,
    CompletingRebalance, Empty, Dead, or Unknown; a KIP-848 group may also be Assigning or
    Reconciling (its rebalance steps)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str | None
    coordinator: int | None
    members: tuple[GroupMember, ...]
    is_simple: bool = False


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A group's committed offset: the next offset it will read."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int | None = None


TIMESTAMP_CREATE = "CreateTime"
TIMESTAMP_LOG_APPEND = "LogAppendTime"
TIMESTAMP_NOT_AVAILABLE = "NotAvailable"


@dataclass(frozen=True, slots=True)
class RecordTimestamp:
    """The timestamp of "the record at `offset`": the first record whose offset is >= `offset`
    (offsets are not dense: compaction removes some, transaction markers take some).

    `record_offset` is None when there is no such record (the offset is at or past the end, or
    the partition is empty); `timestamp_ms` is then None too.
    """

    topic: str
    partition: int
    offset: int
    record_offset: int | None
    timestamp_ms: int | None
    timestamp_type: str = TIMESTAMP_NOT_AVAILABLE


@dataclass(frozen=True, slots=True)
class TopicConfigEntry:
    """One config of a topic as DescribeConfigs returns it. `source` is the broker's name for where
    the value comes from (DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG ...)."""

    topic: str
    name: str
    value: str | None
    source: str
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class LogDirReplica:
    """Size of one replica of a partition in one log dir of one broker (DescribeLogDirs)."""

    broker_id: int
    log_dir: str
    topic: str
    partition: int
    size_bytes: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """A log dir's volume: total and usable bytes (DescribeLogDirs v4+; None from older brokers)."""

    broker_id: int
    log_dir: str
    total_bytes: int | None
    usable_bytes: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ProbePartition:
    """One partition of the end-to-end probe topic and the broker it probes: its preferred leader
    (first replica). `leader` is the broker leading it now (None when offline)."""

    partition: int
    broker_id: int
    leader: int | None
    replicas: tuple[int, ...] = ()
    """All replicas, the probed broker first."""

    @property
    def led_by_its_broker(self) -> bool:
        return self.leader == self.broker_id


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe message on one partition: produced with acks=all, consumed back, committed.
    Each latency is None when that step did not happen; `error` says which step failed and why."""

    partition: int
    broker_id: int
    produce_seconds: float | None
    end_to_end_seconds: float | None
    commit_seconds: float | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Partial(Generic[T]):
    """A result for the entities that answered plus an error message for each that did not.

    Admin calls over many entities (partitions, groups, brokers) return this instead of raising
    when only some entities fail, so the caller can write what it has and mark the run partial.
    """

    value: T
    errors: dict[str, str]


@dataclass(frozen=True, slots=True)
class ListedOffsets(Partial[dict[TopicPartition, PartitionOffsets]]):
    """ListOffsets over many partitions: the offsets of those that answered, an error for each that
    failed, and apart from both the partitions whose end offset is held back (`EndOffsetHeldBack`):
    their leader answered, so they are neither failed nor in `value`."""

    held_back: dict[TopicPartition, EndOffsetHeldBack] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Samples: what the collect stage hands the store in one cycle

METHOD_EXACT = "exact"
"""The timestamp was read from the record itself."""
METHOD_INTERPOLATED = "interpolated"
"""Estimated from the (end offset, observed time) history of the partition; see `error_ms`."""
METHOD_NONE = "none"
"""Neither was possible (no lag, no history, or the record is gone)."""

END_OFFSET_LISTED = "listed"
"""The end offset was listed by the partition's leader in this sample."""
END_OFFSET_LAST_KNOWN = "last_known"
"""The leader could not answer it (`EndOffsetHeldBack`): the last end offset listed before stands
in. Consumers cannot read past a held-back high watermark, so lag against it stays meaningful."""


@dataclass(frozen=True, slots=True)
class PartitionSample:
    """Offsets of one partition plus the append times of its oldest (`start`) and newest
    (`end - 1`) records, None for an empty partition or when they could not be read."""

    offsets: PartitionOffsets
    start_timestamp_ms: int | None = None
    latest_timestamp_ms: int | None = None
    timestamp_type: str | None = None
    end_offset_method: str = END_OFFSET_LISTED
    """END_OFFSET_LISTED or END_OFFSET_LAST_KNOWN."""
    end_offset_listed_at_ms: int | None = None
    """When a last-known end offset was listed (None for one listed in this sample)."""


@dataclass(frozen=True, slots=True)
class GroupOffsetSample:
    """A group's position on one partition, with its lag and the append times it needs.

    - `lag` = max(end - committed, 0); `lag_clamped` when committed > end (stale end offset).
    - `committed_timestamp_ms`: append time of the record at `committed`, the oldest unconsumed
      message (None when caught up).
    - `consumed_timestamp_ms`: append time of the record at `committed - 1`, the last consumed.
    - `timestamp_method`: METHOD_EXACT, METHOD_INTERPOLATED or METHOD_NONE for those two values;
      `timestamp_error_ms` bounds the interpolation error.
    """

    committed: CommittedOffset
    end_offset: int | None
    start_offset: int | None
    lag: int | None
    lag_clamped: bool = False
    committed_timestamp_ms: int | None = None
    consumed_timestamp_ms: int | None = None
    timestamp_method: str = METHOD_NONE
    timestamp_error_ms: int | None = None


@dataclass(frozen=True, slots=True)
class EndOffsetRefresh:
    """What one listing of a cluster's end offsets between two offsets cycles changed (the end
    offsets job): the store keeps each partition's newest end offset and the time of the
    cluster's newest listing, which every partition answered in it holds as of."""

    listed_at_ms: int
    partitions: int
    """The partitions asked."""
    changed: Mapping[TopicPartition, int]
    """The partitions answered with an end offset the store does not hold (new, moved, or
    answered again after a miss) -> that end offset."""
    missed: Mapping[TopicPartition, int]
    """The partitions not answered now that were in the listing before -> when they were
    last answered (epoch ms): their end offset holds as of then."""
    gone: Sequence[TopicPartition] = ()
    """Partitions no longer asked (deleted, or no longer allowed)."""
    replace: bool = False
    """The first listing of this job's run: the store's rows of the cluster are replaced."""


@dataclass(frozen=True, slots=True)
class CommitObservation:
    """The first sample in which a group's committed offset on a partition was seen to change."""

    group_id: str
    topic: str
    partition: int
    committed_offset: int
    previous_offset: int | None
    observed_at_ms: int


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """One offset commit record of `__consumer_offsets`, decoded: a group committed `offset` on
    (topic, partition) at `commit_timestamp_ms`; `offset` None is a tombstone (the committed offset
    was deleted or expired). Classic and consumer-protocol (KIP-848) groups write the same record."""

    group_id: str
    topic: str
    partition: int
    offset: int | None
    commit_timestamp_ms: int | None = None
    leader_epoch: int | None = None
    metadata: str = ""
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """One group metadata record of a classic group in `__consumer_offsets`, decoded; `deleted`
    is a tombstone (the group was removed)."""

    group_id: str
    deleted: bool = False
    protocol_type: str = ""
    generation: int = -1
    protocol: str | None = None
    leader: str | None = None
    state_timestamp_ms: int | None = None
    member_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitStreamBatch:
    """What one poll of a cluster's commit stream brought, in log order per partition."""

    commits: list[OffsetCommitRecord] = field(default_factory=list)
    groups: list[GroupMetadataRecord] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    """Records not decoded, by reason (an unknown value version, a truncated record ...)."""
    caught_up: bool = False
    """Every partition of the topic was read to its end during this poll."""
    read_to_ms: int | None = None
    """When not `caught_up`, every record appended before this time (epoch ms, the brokers' clock)
    was read so far (commit_stream.read_to_ms); None when caught up or not known."""


@dataclass(frozen=True, slots=True)
class DataLossEvent:
    """committed < start: the messages between were deleted before the group read them."""

    group_id: str
    topic: str
    partition: int
    committed_offset: int
    start_offset: int
    detected_at_ms: int

    @property
    def messages_lost(self) -> int:
        return self.start_offset - self.committed_offset


@dataclass(frozen=True, slots=True)
class CarriedGroupOffsets:
    """How an offsets batch sends its group offsets when most did not move since the previous
    batch of the same cluster, which was written: only `moved` go over the wire; every other row
    of the previous batch (sampled at `since`) is copied by the store itself, with the new sample
    time, except the keys in `gone` (no longer committed). The batch's `group_offsets` still
    holds every sample, so a replay (which cannot trust the previous rows) writes them all."""

    since: datetime
    moved: list[GroupOffsetSample]
    gone: list[tuple[str, str, int]]
    """(group, topic, partition) of the previous batch absent from this one."""


@dataclass(frozen=True, slots=True)
class GoneOffsets:
    """Committed offsets an offsets cycle found the cluster no longer has: the store marks their
    latest rows gone (`latest_group_offsets.gone_at`), so that what was found on them resolves as
    gone (vocabulary.RESOLVED_GONE) instead of waiting as unsampled."""

    keys: list[tuple[str, str, int]] = field(default_factory=list)
    """(group, topic, partition) sampled by the previous cycle and not by this one, whose group a
    complete listing no longer has or whose committed offsets came back without them."""
    listed_groups: list[str] | None = None
    """Every group of a complete listing, sent by the first such cycle after a start: the latest
    rows of every other group are gone (deleted while nothing collected). None otherwise."""


@dataclass(frozen=True, slots=True)
class OffsetsBatch:
    """Everything one offsets cycle of one cluster hands the store, sampled at `sampled_at`."""

    cluster: str
    sampled_at: datetime
    run_id: int | None = None
    partitions: list[PartitionSample] = field(default_factory=list)
    groups: list[GroupDescription] = field(default_factory=list)
    group_offsets: list[GroupOffsetSample] = field(default_factory=list)
    commit_observations: list[CommitObservation] = field(default_factory=list)
    record_timestamps: list[RecordTimestamp] = field(default_factory=list)
    """New entries for the record timestamp cache, read from Kafka in this cycle."""
    data_loss: list[DataLossEvent] = field(default_factory=list)
    carried: CarriedGroupOffsets | None = None
    """Set when the group offsets that did not move are copied from the previous batch's rows
    rather than sent (None: every group offset is sent)."""
    gone: GoneOffsets | None = None
    """Committed offsets the cluster no longer has (None: nothing seen gone)."""
    history_after: bool = False
    """The group offsets go into the latest rows only; their history rows are written right
    after, in a transaction of their own, from those latest rows (`OffsetsHistory`): the cold
    cycle's lag is answered without waiting for its history."""

    def __post_init__(self) -> None:
        if self.sampled_at.tzinfo is None:
            raise ValueError("OffsetsBatch.sampled_at must be timezone-aware")
        if self.carried is not None and self.carried.since >= self.sampled_at:
            raise ValueError("OffsetsBatch.carried.since must be before the batch's sampled_at")
        if self.carried is not None and self.history_after:
            raise ValueError("OffsetsBatch.history_after cannot carry rows: they are all sent")

    @property
    def row_count(self) -> int:
        """The number of records in the batch (what the buffered writer bounds)."""
        return (
            len(self.partitions)
            + len(self.groups)
            + len(self.group_offsets)
            + len(self.commit_observations)
            + len(self.record_timestamps)
            + len(self.data_loss)
        )


@dataclass(frozen=True, slots=True)
class OffsetsHistory:
    """The history rows (group_offsets) of an offsets batch written with `history_after`: copied
    in the store from the latest group offset rows still sampled at `sampled_at`."""

    cluster: str
    sampled_at: datetime
    run_id: int | None
    rows: int
    """How many rows the batch had (what the buffered writer bounds)."""
