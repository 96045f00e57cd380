"""What the collectors need from a Kafka cluster, as protocols: the real clients of this package
(`KafkaAdmin`, `RecordTimestampReader`, `LogDirClient`, `CommitStreamReader`) implement them, and
so does the fake cluster of `monitor.kafka.fake`, so the collectors run unchanged on either.

Every method blocks the calling thread for at most about the cluster's request timeout (or the
budget it is given) and raises only the named errors of `monitor.core.errors`:
`KafkaUnavailableError` when the cluster (or the broker a request needs) did not answer,
`KafkaRequestError` when a broker answered and refused. Requests over many entities return a
`Partial` and raise only when nothing answered because the cluster did not.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from monitor.core.records import (
    ClusterInfo,
    CommitStreamBatch,
    CommittedOffset,
    GroupDescription,
    ListedOffsets,
    LogDirReplica,
    LogDirUsage,
    Partial,
    PartitionOffsets,
    ProbePartition,
    ProbeResult,
    RecordTimestamp,
    TopicConfigEntry,
    TopicInfo,
    TopicPartition,
)
from monitor.core.share_groups import ShareGroups
from monitor.kafka.cursor import Target

__all__ = [
    "AdminApi",
    "Client",
    "CommitStream",
    "LeaderApi",
    "LogDirReader",
    "LogDirs",
    "ProbeApi",
    "ShareGroupApi",
    "Target",
    "TimestampReader",
]

LogDirs = tuple[list[LogDirReplica], list[LogDirUsage]]
"""Replica sizes (per replica per broker, never summed) and log-dir volumes."""


class Client(Protocol):
    """The lifecycle every client shares: the constructor connects nothing, `start()` builds the
    client (raises `ConfigError` for a configuration the client library rejects), `close()`
    releases it."""

    def start(self) -> None: ...

    def close(self) -> None: ...


class AdminApi(Client, Protocol):
    """Admin requests to one cluster, answered with the records of `monitor.core.records`."""

    def describe_cluster(self) -> ClusterInfo:
        """The cluster id, the active controller and the live brokers. Raises when no broker
        answers."""
        ...

    def list_topic_names(self, include_internal: bool) -> list[str]:
        """Names of all topics, sorted; Kafka's own `__` topics only when `include_internal`."""
        ...

    def describe_topics(self, names: Sequence[str], skip_unknown: bool = False) -> list[TopicInfo]:
        """Partitions (leader, replicas, ISR) of each named topic, in the order given; an unknown
        topic raises `KafkaRequestError` naming it, or with `skip_unknown` is left out (a topic
        deleted since it was listed)."""
        ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic; an existing name or a replication factor above the brokers raises
        `KafkaRequestError`."""
        ...

    def describe_topic_configs(
        self, topics: Sequence[str], names: Collection[str] | None = ...
    ) -> Partial[dict[str, list[TopicConfigEntry]]]:
        """The configs called `names` (all when None; by default the ones the monitor reads) of
        each topic, sorted by name, with their source; an unknown topic is in `errors`."""
        ...

    def list_offsets(
        self,
        partitions: Sequence[TopicPartition],
        leaders: Mapping[TopicPartition, int] | None = None,
        known: Mapping[TopicPartition, PartitionOffsets] | None = None,
    ) -> ListedOffsets:
        """Start, end and max-timestamp offsets of every partition; a partition whose start and
        end offsets are still those of `known` (the previous listing) may keep its max-timestamp
        pair rather than have it asked again. A partition that failed is in
        `errors` as "topic:partition"; one whose leader holds its end offset back (under min
        ISR) is in `held_back`, neither failed nor in `value`."""
        ...

    def list_end_offsets(
        self, partitions: Sequence[TopicPartition], leaders: Mapping[TopicPartition, int] | None = None
    ) -> Partial[dict[TopicPartition, int]]:
        """The end offset of every partition alone (the refresh between two `list_offsets`); a
        partition that failed is in `errors`, one whose end offset is held back in neither."""
        ...

    def list_group_ids(self) -> list[str]:
        """Ids of all consumer groups, sorted. Raises when any broker failed to answer: a listing
        with some coordinators missing would make their groups look deleted."""
        ...

    def list_unwatched_groups(self) -> dict[str, str]:
        """The groups the brokers list that are not consumer groups (share, streams ...: Kafka
        3.8+ names each group's type), id -> type as Kafka names it. Never raises: a listing
        that failed is {} (these groups are shown, not watched)."""
        ...

    def describe_groups(self, group_ids: Sequence[str]) -> Partial[list[GroupDescription]]:
        """State, members and coordinator of each group, in the order given; a group that does
        not exist is "Dead"; a group whose coordinator did not answer is in `errors`."""
        ...

    def committed_offsets(self, group_ids: Sequence[str]) -> Partial[dict[str, list[CommittedOffset]]]:
        """Each group's committed offsets, sorted by (topic, partition), partitions without one
        left out; a group whose coordinator did not answer is in `errors`."""
        ...


class LeaderApi(AdminApi, Protocol):
    """The leadership requests of the repair actions (`monitor.kafka.leaders.LeaderAdmin`)."""

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition]) -> Partial[list[TopicPartition]]:
        """ElectLeaders PREFERRED for `partitions`. `value`: the partitions now led by their first
        replica (elected now, or already were); a partition whose first replica is down or out of
        sync, or that does not exist, is in `errors` as "topic:partition"."""
        ...

    def reorder_replicas(
        self, orders: Mapping[TopicPartition, Sequence[int]]
    ) -> Partial[list[TopicPartition]]:
        """Give each partition the replica order in `orders`, which must hold the same brokers
        (else `KafkaRequestError`, and nothing is sent). The leader does not change until a
        preferred election."""
        ...


class TimestampReader(Client, Protocol):
    """Timestamps of "the record at offset o": the first record whose offset is >= o."""

    def read(
        self, targets: Sequence[Target], budget_seconds: float
    ) -> tuple[dict[Target, RecordTimestamp], list[Target]]:
        """(the resolved targets, the targets left unread in the order given). A target with no
        such record (negative, below the log start, at or past the end) resolves to a record
        whose `record_offset` is None; the partitions that cannot be read (leader down, unknown)
        or are not reached within `budget_seconds` are unread."""
        ...


class LogDirReader(Client, Protocol):
    """DescribeLogDirs of the brokers of one cluster."""

    def describe(self, broker_ids: Sequence[int]) -> Partial[LogDirs]:
        """Replica sizes and log-dir volumes of each broker; a broker that failed is in `errors`
        as "broker:<id>"."""
        ...


class CommitStream(Client, Protocol):
    """The offset commit and group metadata records of `__consumer_offsets`, decoded, as the
    group coordinators write them. Both methods raise `KafkaAuthorizationError` when the
    principal may not read that topic (the caller falls back to OffsetFetch)."""

    def seek_to_end(self) -> None:
        """Position the stream at the current end of every partition of the topic: the next
        polls bring what is written from now on. Blocks for about one request per partition."""
        ...

    def poll(self, max_seconds: float) -> CommitStreamBatch:
        """The records written since the last poll, in log order per partition; waits up to
        `max_seconds` for the first. Records that cannot be decoded are counted in `skipped`."""
        ...


class ProbeApi(Client, Protocol):
    """The end-to-end probe of one cluster: a topic with a partition led by every broker, written
    with acks=all, read back and committed by the probe's own consumer group."""

    def prepare(
        self,
        topic: str,
        broker_ids: Sequence[int],
        replication_factor: int,
        retired: Collection[int] = (),
    ) -> list[ProbePartition]:
        """Make `topic` fit the live brokers `broker_ids`: create it when missing with one
        partition per broker (each broker the preferred leader of one, replicas on the next
        brokers, at most `replication_factor` and the live brokers); otherwise change it as
        `monitor.kafka.probe.plan_topic` says (a broker with no partition takes a spare one or
        gets one added; the replicas on `retired` brokers, gone for good, are reassigned to live
        ones); then elect the preferred leader of a partition whose preferred leader is up but
        does not lead it. Returns every partition of the topic, sorted, as it is after that."""
        ...

    def probe(
        self, topic: str, partitions: Sequence[ProbePartition], budget_seconds: float
    ) -> list[ProbeResult]:
        """Produce one message to each partition (acks=all), consume each back with the probe's
        group and commit it. One result per partition in the order given; a step that fails or
        does not finish within `budget_seconds` is that partition's `error`. Raises only when the
        client itself is refused (configuration)."""
        ...


class ShareGroupApi(Client, Protocol):
    """The share groups (KIP-932) of one cluster (`monitor.kafka.share_groups.ShareGroupClient`)."""

    def share_groups(self, accepts: Callable[[str], bool] = ...) -> ShareGroups:
        """Every share group `accepts` lets through, described, with the start offset (and, from
        Kafka 4.2, the lag) of each partition it has state for. A cluster without share groups
        answers `available=False` with the reason; a group that failed is in `errors`."""
        ...
