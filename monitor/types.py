"""The typed records the stages share.

Stages never hand each other client-library objects or ORM rows: `monitor.kafka` turns what the
Kafka clients return into these records, and every other stage reads only these. They are frozen
and slotted, so they can be passed between threads and used as dictionary keys.
"""

from __future__ import annotations

from dataclasses import dataclass


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
