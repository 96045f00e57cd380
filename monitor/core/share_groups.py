"""Share groups (KIP-932, Kafka 4.1+): the records the collector hands the store, and the one
definition of a share partition's lag (DOMAIN.md section 7).

Records of a share partition are handed to many consumers and acknowledged one by one. The
share-partition start offset (SPSO) is the first record not yet finished (acknowledged, rejected
or out of delivery attempts); the records from there to the log end are waiting, in flight or
finished out of order. The lag is the records from the SPSO to the log end not yet finished:
Kafka 4.2+ keeps and reports it (KIP-1226, DescribeShareGroupOffsets v1); before that the end
offset minus the SPSO is all that can be known, an upper bound (records finished out of order
beyond the SPSO still count). Every lag says which it is (`LAG_METHODS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from monitor.core.records import TopicPartition

LAG_BROKER: Final = "broker"
"""The lag the broker reports (Kafka 4.2+, KIP-1226): exact."""
LAG_END_MINUS_START: Final = "end_minus_start"
"""max(end offset - SPSO, 0): an upper bound, for brokers that do not report the lag."""
LAG_NONE: Final = "none"
"""No lag known: the partition has no start offset yet, or its end offset could not be read."""
LAG_METHODS: Final = (LAG_BROKER, LAG_END_MINUS_START, LAG_NONE)

NOT_AVAILABLE: Final = "not available"
"""How a cluster without share groups (before Kafka 4.1, or the feature off) is described."""


@dataclass(frozen=True, slots=True)
class ShareMember:
    """A member of a share group and the partitions it is assigned now."""

    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """ShareGroupDescribe of one group. `state` is Kafka's: Empty, Stable, Dead or Unknown."""

    group_id: str
    state: str
    coordinator: int | None
    members: tuple[ShareMember, ...]
    assignor: str | None = None
    group_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """DescribeShareGroupOffsets of one share partition: its start offset (None when the group
    has none there yet) and the lag the broker reports (None when it reports none)."""

    group_id: str
    topic: str
    partition: int
    start_offset: int | None
    broker_lag: int | None = None


@dataclass(frozen=True, slots=True)
class ShareGroups:
    """What one collection learned about a cluster's share groups. `available` is False on a
    cluster that has none to give (`reason` says why, once); `errors` holds the groups that
    failed, by id."""

    available: bool
    descriptions: tuple[ShareGroupDescription, ...] = ()
    offsets: tuple[SharePartitionOffset, ...] = ()
    errors: dict[str, str] | None = None
    reason: str | None = None
    listed: tuple[str, ...] | None = None
    """Every share group the (whole) listing named that the group filter accepts, described or
    not: a group not among them is gone from the cluster. None when not known."""


@dataclass(frozen=True, slots=True)
class ShareLag:
    lag: int | None
    method: str


def share_lag(start_offset: int | None, end_offset: int | None, broker_lag: int | None) -> ShareLag:
    """A share partition's lag and how it is known: the broker's when it reports one, else
    end - SPSO (clamped at 0: a stale end can trail a start offset), else none."""
    if broker_lag is not None and broker_lag >= 0:
        return ShareLag(broker_lag, LAG_BROKER)
    if start_offset is None or start_offset < 0 or end_offset is None or end_offset < 0:
        return ShareLag(None, LAG_NONE)
    return ShareLag(max(end_offset - start_offset, 0), LAG_END_MINUS_START)
