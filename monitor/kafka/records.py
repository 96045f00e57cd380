"""Pure mappings from what confluent-kafka returns to the records of `monitor.core.records`.

No function here talks to a cluster; they take the client's result objects (typed loosely, as
the client library types them) and are unit-tested with stand-ins.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka.admin import ConfigSource  # type: ignore[attr-defined]  # public, not in `__all__`

from monitor.core.records import (
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    TIMESTAMP_NOT_AVAILABLE,
    BrokerInfo,
    ClusterInfo,
    PartitionInfo,
    PartitionOffsets,
    TopicConfigEntry,
    TopicInfo,
)

CONFIG_KEYS: Final[frozenset[str]] = frozenset(
    {
        "retention.ms",
        "retention.bytes",
        "cleanup.policy",
        "min.insync.replicas",
        "segment.bytes",
        "segment.ms",
        "message.timestamp.type",
        "remote.storage.enable",
        "local.retention.ms",
        "local.retention.bytes",
    }
)
"""The topic configs the monitor reads: retention, replication and tiered storage."""

_TIMESTAMP_TYPES: Final = {
    TIMESTAMP_CREATE_TIME: TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND_TIME: TIMESTAMP_LOG_APPEND,
}


def partition_key(topic: str, partition: int) -> str:
    """How a partition is named in `Partial.errors`."""
    return f"{topic}:{partition}"


def node_id(node: Any) -> int | None:
    """A broker id from a client `Node`, None for "no node" (id -1)."""
    if node is None or node.id is None or int(node.id) < 0:
        return None
    return int(node.id)


# -- cluster and topics ----------------------------------------------------------------------


def cluster_info(result: Any) -> ClusterInfo:
    brokers = sorted(
        (BrokerInfo(int(n.id), str(n.host), int(n.port), n.rack) for n in result.nodes),
        key=lambda b: b.broker_id,
    )
    return ClusterInfo(
        cluster_id=result.cluster_id, controller_id=node_id(result.controller), brokers=tuple(brokers)
    )


def cluster_info_from_metadata(metadata: Any) -> ClusterInfo:
    """ClusterInfo from a Metadata response: the brokers serving it, without racks."""
    brokers = sorted(
        (BrokerInfo(int(b.id), str(b.host), int(b.port), None) for b in metadata.brokers.values()),
        key=lambda b: b.broker_id,
    )
    controller = int(metadata.controller_id)
    return ClusterInfo(
        cluster_id=metadata.cluster_id,
        controller_id=controller if controller >= 0 else None,
        brokers=tuple(brokers),
    )


def partition_info(partition: Any) -> PartitionInfo:
    return PartitionInfo(
        partition=int(partition.id),
        leader=node_id(partition.leader),
        replicas=tuple(int(n.id) for n in partition.replicas),
        isr=tuple(int(n.id) for n in partition.isr),
    )


def topic_info(description: Any) -> TopicInfo:
    partitions = sorted((partition_info(p) for p in description.partitions), key=lambda p: p.partition)
    return TopicInfo(
        name=str(description.name), is_internal=bool(description.is_internal), partitions=tuple(partitions)
    )


# -- offsets -----------------------------------------------------------------------------------


def partition_offsets(
    topic: str, partition: int, earliest: Any, latest: Any, max_timestamp: Any | None
) -> PartitionOffsets:
    """Offsets from three `ListOffsetsResultInfo`s; the max-timestamp pair is None for an empty
    partition (the broker answers offset -1) or when that answer is missing."""
    max_offset = max_ms = None
    if max_timestamp is not None and int(max_timestamp.offset) >= 0:
        max_offset = int(max_timestamp.offset)
        max_ms = int(max_timestamp.timestamp) if int(max_timestamp.timestamp) >= 0 else None
    return PartitionOffsets(
        topic=topic,
        partition=partition,
        start=int(earliest.offset),
        end=int(latest.offset),
        max_timestamp_offset=max_offset,
        max_timestamp_ms=max_ms,
    )


# -- configs -----------------------------------------------------------------------------------


def config_source(source: Any) -> str:
    """The broker's name for where a config value comes from (librdkafka gives an int or enum)."""
    if isinstance(source, ConfigSource):
        return source.name
    try:
        return ConfigSource(int(source)).name
    except (TypeError, ValueError):
        return ConfigSource.UNKNOWN_CONFIG.name


def topic_config_entries(
    topic: str, entries: Mapping[str, Any], names: Collection[str] | None
) -> list[TopicConfigEntry]:
    """The wanted entries of one topic, by name; sensitive values are never returned."""
    selected = [entry for name, entry in entries.items() if names is None or name in names]
    return sorted(
        (
            TopicConfigEntry(
                topic=topic,
                name=str(entry.name),
                value=None if entry.is_sensitive or entry.value is None else str(entry.value),
                source=config_source(entry.source),
                sensitive=bool(entry.is_sensitive),
            )
            for entry in selected
        ),
        key=lambda e: e.name,
    )


# -- records -----------------------------------------------------------------------------------


def timestamp_type(kind: int) -> str:
    """`Message.timestamp()[0]` as the name Kafka uses."""
    return _TIMESTAMP_TYPES.get(kind, TIMESTAMP_NOT_AVAILABLE)
