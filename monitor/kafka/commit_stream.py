"""`CommitStreamReader`: the records of `__consumer_offsets` as the group coordinators write
them, decoded by `monitor.kafka.offsets_topic`.

One consumer that never joins a group and never commits reads every partition of the topic from
the positions `seek_to_end` took (the ends at that moment: what was committed before is the
snapshot's business, OffsetFetch). `read_committed`, so the offsets of a transaction that aborts
are never seen as commits. A record that cannot be decoded is skipped and counted by reason, so a
broker that writes a newer schema costs those records, never the stream.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Message, TopicPartition

from monitor.core.errors import KafkaAuthorizationError, KafkaRequestError, KafkaUnavailableError
from monitor.core.records import CommitStreamBatch, GroupMetadataRecord, OffsetCommitRecord
from monitor.core.settings import ClusterConfig
from monitor.kafka.consumer import ConsumerClient
from monitor.kafka.offsets_topic import DecodeError, decode
from monitor.kafka.properties import ClientValue, client_config, scrub
from monitor.kafka.translate import is_end_offset_held_back, is_unavailable, kafka_error

_LOG: Final = logging.getLogger(__name__)

OFFSETS_TOPIC: Final = "__consumer_offsets"
_CONSUME_BATCH: Final = 5000

_DENIED: Final = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)

_MISSING: Final = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
"""The topic does not exist yet: Kafka creates it when a group first looks up its coordinator."""

# Always set: never commit, see the end of every partition, and be told when a position is gone.
_REQUIRED: Final[dict[str, ClientValue]] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
}
_TUNING: Final[dict[str, ClientValue]] = {
    "fetch.wait.max.ms": 100,
    "fetch.error.backoff.ms": 100,
}


def stream_config(cluster: ClusterConfig) -> dict[str, ClientValue]:
    """Consumer properties: the reader's tuning unless the operator set it, the cluster's, then
    what the reader depends on."""
    values: dict[str, ClientValue] = {k: v for k, v in _TUNING.items() if k not in cluster.client_config}
    values.update(client_config(cluster))
    values.update(_REQUIRED)
    values["group.id"] = f"kafka-health-{cluster.name}-commits"
    return values


class CommitStreamReader(ConsumerClient):
    """Reads `__consumer_offsets` of one cluster. The constructor builds the configuration,
    `start()` the consumer (it connects on the first request), `close()` releases it. Calls are
    serialised; the stream is meant to be polled by one thread."""

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster, stream_config(cluster))
        self._timeout = cluster.request_timeout_seconds
        self._partitions: set[int] = set()
        self._at_end: set[int] = set()
        self._newest_ms: dict[int, int] = {}
        """Each partition's newest record time read since the stream was positioned."""

    def _closed(self) -> None:
        self._partitions, self._at_end, self._newest_ms = set(), set(), {}

    def seek_to_end(self) -> None:
        """Position every partition of the topic at its current end. Raises
        KafkaAuthorizationError when the principal may not read the topic, KafkaUnavailableError
        when the cluster did not answer or the topic does not exist yet (a new cluster where no
        group has committed)."""
        with self._lock:
            consumer = self._started()
            try:
                metadata = consumer.list_topics(topic=OFFSETS_TOPIC, timeout=self._timeout)
                topic = metadata.topics.get(OFFSETS_TOPIC)
                if topic is None or topic.error is not None:
                    error = topic.error if topic is not None else None
                    raise (
                        KafkaException(error)
                        if error is not None
                        else KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
                    )
                partitions = sorted(topic.partitions)
                positions = []
                for partition in partitions:
                    _, high = consumer.get_watermark_offsets(
                        TopicPartition(OFFSETS_TOPIC, partition), timeout=self._timeout, cached=False
                    )
                    positions.append(TopicPartition(OFFSETS_TOPIC, partition, high))
                consumer.assign(positions)
            except KafkaException as exc:
                raise self._translate(exc, "position the commit stream") from exc
            self._partitions, self._at_end, self._newest_ms = set(partitions), set(), {}

    def poll(self, max_seconds: float) -> CommitStreamBatch:
        """The records written since the last poll: waits up to `max_seconds` for the first,
        then takes what is already fetched. Raises KafkaAuthorizationError when reading the topic
        is refused (an ACL taken away while running)."""
        with self._lock:
            consumer = self._started()
            batch = CommitStreamBatch()
            deadline = time.monotonic() + max(0.0, max_seconds)
            try:
                # `consume(n, timeout)` waits until it has n messages or the timeout passed: a
                # lone commit would wait out the whole poll. `poll` returns the first at once.
                first = consumer.poll(max(0.0, max_seconds))
                if first is not None:
                    self._take(first, batch)
                while first is not None:
                    messages = consumer.consume(_CONSUME_BATCH, timeout=0)
                    for message in messages:
                        self._take(message, batch)
                    if len(messages) < _CONSUME_BATCH or time.monotonic() >= deadline:
                        break
            except KafkaException as exc:
                raise self._translate(exc, "read the commit stream") from exc
            caught_up = bool(self._partitions) and self._at_end >= self._partitions
            read_to = read_to_ms(self._partitions, self._at_end, self._newest_ms)
            return CommitStreamBatch(batch.commits, batch.groups, batch.skipped, caught_up, read_to)

    def _take(self, message: Message, batch: CommitStreamBatch) -> None:
        error = message.error()
        partition = message.partition()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                if partition is not None:
                    self._at_end.add(partition)
                return
            if error.code() in _DENIED:
                raise KafkaAuthorizationError(self._denied(error.str()))
            if error.fatal():
                raise KafkaRequestError(f"{self._cluster.name}: the commit stream failed: {error.str()}")
            _LOG.debug("%s: commit stream: %s", self._cluster.name, error.str())
            return
        if partition is not None:
            self._at_end.discard(partition)
            kind, at_ms = message.timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE:
                self._newest_ms[partition] = at_ms
        try:
            record = decode(message.key(), message.value())
        except DecodeError as exc:
            batch.skipped[exc.reason] = batch.skipped.get(exc.reason, 0) + 1
            return
        if isinstance(record, OffsetCommitRecord):
            batch.commits.append(record)
        elif isinstance(record, GroupMetadataRecord):
            batch.groups.append(record)
        else:
            batch.skipped[record.reason] = batch.skipped.get(record.reason, 0) + 1

    def _denied(self, text: str) -> str:
        return (
            f"{self._cluster.name}: reading {OFFSETS_TOPIC} is not allowed ({scrub(text, self._secrets)}); "
            f"grant the monitor's principal Describe and Read on the topic {OFFSETS_TOPIC}, "
            "or set commit_stream: false for this cluster"
        )

    def _translate(self, exc: KafkaException, action: str) -> Exception:
        error = kafka_error(exc)
        if error is not None and error.code() in _DENIED:
            return KafkaAuthorizationError(self._denied(error.str()))
        if error is not None and error.code() in _MISSING:
            return KafkaUnavailableError(
                f"{self._cluster.name}: cannot {action}: {OFFSETS_TOPIC} does not exist yet (Kafka "
                "creates it when a consumer group first looks up its coordinator); asking again"
            )
        text = scrub(error.str() if error is not None else str(exc), self._secrets)
        if is_end_offset_held_back(exc):  # a leader just elected: its high watermark catches up
            return KafkaUnavailableError(
                f"{self._cluster.name}: cannot {action}: the end of a partition of {OFFSETS_TOPIC} is held "
                f"back ({text}); asking again"
            )
        if (
            error is None
            or is_unavailable(exc)
            or error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
        ):
            return KafkaUnavailableError(f"{self._cluster.name}: cannot {action}: {text}")
        return KafkaRequestError(f"{self._cluster.name}: cannot {action}: {text}")


def read_to_ms(partitions: set[int], at_end: set[int], newest_ms: dict[int, int]) -> int | None:
    """Before what time every record of the topic was read (CommitStreamBatch.read_to_ms): the
    oldest newest record time of the partitions not at their end; None when one of those was never
    read since the stream was positioned, or when every partition is at its end (then the poll's
    start is the answer, which the caller knows)."""
    behind = partitions - at_end
    if not behind or not behind <= newest_ms.keys():
        return None
    return min(newest_ms[partition] for partition in behind)
