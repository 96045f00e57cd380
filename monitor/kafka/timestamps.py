"""`RecordTimestampReader`: the timestamp of "the record at offset o" for many (topic, partition, o).

"The record at offset o" is the first record whose offset is >= o: compaction leaves gaps and
transaction markers take offsets without ever reaching a consumer. One pooled consumer reads
them all: up to `ASSIGNED_AT_ONCE` partitions are assigned at once at their first target (more as
others finish), the broker answers about one batch per partition (small fetch sizes, no
prefetching), and each partition then moves on to its next target (read on when it is close, seek
when it is far) or is unassigned when it has none left.

How a target resolves:
- a record at m >= o arrives: (m, its timestamp); every other open target of that partition in
  [o, m] resolves to the same record;
- the read reaches the end of the partition (EOF): no record (`record_offset` None) for every
  open target of that partition, which covers empty partitions and o == end;
- o is out of range (below the log start, e.g. deleted by retention, or past the end): no record;
- a negative o (e.g. committed - 1 for a group that committed 0): no record, without asking.
Targets of partitions that cannot be read (unknown, not authorised), or not reached within the
budget, are returned as unread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from monitor.core.errors import KafkaRequestError
from monitor.core.records import RecordTimestamp
from monitor.core.settings import ClusterConfig
from monitor.kafka.consumer import ConsumerClient
from monitor.kafka.cursor import PartitionCursor, Step, Target, plan
from monitor.kafka.properties import ClientValue, client_config, scrub
from monitor.kafka.records import timestamp_type

_LOG: Final = logging.getLogger(__name__)

SILENCE_CHECK_SECONDS: Final = 0.5
"""librdkafka says nothing at all about an assigned partition that does not exist: partitions
still silent after this long, once a poll brought nothing at all, are looked up once in the
metadata and given up if missing. Not while answers keep coming: on a cold read of 10,000
partitions most are still silent after 0.5 s only because their answers are queued behind
others, and the metadata of every topic (what a consumer can ask for many topics) took seconds."""
_FEW_TOPICS: Final = 5
"""Up to this many silent topics are looked up one by one, more with one request for all topics."""

ASSIGNED_AT_ONCE: Final = 2000
"""Partitions assigned at any time; the others wait and are assigned as partitions finish.
librdkafka's incremental (un)assign scans the whole assignment for every partition it adds or
removes, so its cost grows with the square of the assignment: with 10,000 partitions assigned,
one unassign of the finished ones took 6 s on a loaded machine, and a cold read of 30,000
partitions spent its budget on them. 2,000 is about 700 partitions per broker of a three-broker
cluster in each fetch, enough to keep every broker busy."""
_CONSUME_BATCH: Final = 5000
_POLL_SECONDS: Final = 0.1

# Always set: the reader must never commit, never store offsets, must see the end of a partition
# and must be told (not silently reset) when an offset is out of range.
_REQUIRED: Final[dict[str, ClientValue]] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
}
# Defaults an operator may override through `client_config`. Small fetches so a broker answers
# with about one batch per partition, but not smaller than a typical batch: when the batch
# holding the target is larger than `max.partition.fetch.bytes` the broker sends it truncated and
# librdkafka retries with a doubled size, which cost 5x the time on 130 KB batches (16 KB limit:
# 0.7 s for 200 partitions, 256 KB: 0.1 s). No prefetching beyond the first answer; short waits
# at the end of a partition. `read_uncommitted` so an open transaction never holds the read back
# (the records of aborted transactions were appended at their time too).
_TUNING: Final[dict[str, ClientValue]] = {
    "isolation.level": "read_uncommitted",
    "max.partition.fetch.bytes": 256 * 1024,
    "fetch.max.bytes": 8 * 1024 * 1024,
    "message.max.bytes": 1_000_000,
    "fetch.wait.max.ms": 50,
    "fetch.queue.backoff.ms": 10,
    "fetch.error.backoff.ms": 100,
    "queued.min.messages": 1,
    "queued.max.messages.kbytes": 4096,
}
_OUT_OF_RANGE: Final = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
# The partition (or its whole topic) cannot be read: its targets go back unread at once.
_UNREADABLE: Final = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)
# The client cannot talk to the cluster at all: raise instead of burning the budget.
_REFUSED: Final = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


def reader_config(cluster: ClusterConfig) -> dict[str, ClientValue]:
    """Consumer properties: the cluster's, the reader's tuning unless the operator set it, then
    the properties the reader depends on. `fetch.max.bytes` is raised to `message.max.bytes`
    when needed (librdkafka refuses a smaller one)."""
    base = dict(client_config(cluster))
    values: dict[str, ClientValue] = {k: v for k, v in _TUNING.items() if k not in cluster.client_config}
    values.update(base)
    values.update(_REQUIRED)
    values["group.id"] = f"kafka-health-{cluster.name}-timestamps"
    if int(str(values["fetch.max.bytes"])) < int(str(values["message.max.bytes"])):
        values["fetch.max.bytes"] = int(str(values["message.max.bytes"]))
    return values


def no_record(topic: str, partition: int, offset: int) -> RecordTimestamp:
    return RecordTimestamp(
        topic=topic, partition=partition, offset=offset, record_offset=None, timestamp_ms=None
    )


def record_timestamp(target: Target, record_offset: int, kind: int, timestamp_ms: int) -> RecordTimestamp:
    name = timestamp_type(kind)
    return RecordTimestamp(
        topic=target[0],
        partition=target[1],
        offset=target[2],
        record_offset=record_offset,
        timestamp_ms=timestamp_ms if timestamp_ms >= 0 and name != "NotAvailable" else None,
        timestamp_type=name,
    )


# ---------------------------------------------------------------------------------------------
# The reader


class RecordTimestampReader(ConsumerClient):
    """Reads record timestamps through one pooled consumer that never commits.

    The constructor only builds the configuration; `start()` creates the consumer (it connects on
    the first read) and `close()` releases it. `read` calls are serialised: one at a time per
    reader.
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster, reader_config(cluster))

    def read(
        self, targets: Sequence[Target], budget_seconds: float
    ) -> tuple[dict[Target, RecordTimestamp], list[Target]]:
        """(the resolved targets, the targets left unread), for (topic, partition, offset) targets.

        Blocks for at most about `budget_seconds` (plus the few milliseconds it takes to unassign):
        what is not resolved by then, or cannot be read, is returned unread, in the order given.
        A broker that is down only leaves its partitions unread; when all brokers are down the
        read stops early. Raises KafkaRequestError when the cluster refuses the client itself
        (authentication, authorisation of the cluster).
        """
        deadline = time.monotonic() + max(0.0, budget_seconds)
        with self._lock:
            consumer = self._started()
            cursors, trivial = plan(targets)
            resolved = {t: no_record(*t) for t in trivial}
            if cursors:
                _drain(consumer)
                try:
                    _Read(consumer, cursors, resolved, self._describe).run(deadline)
                finally:
                    consumer.unassign()
        unread = [t for t in dict.fromkeys(targets) if t not in resolved]
        return resolved, unread

    def _describe(self, error: KafkaError) -> str:
        return scrub(f"{error.str()} ({error.name()})", self._secrets)


def _drain(consumer: Consumer) -> None:
    """Drop the events queued since the last read (errors of brokers that have since come back)."""
    while consumer.consume(num_messages=_CONSUME_BATCH, timeout=0):
        pass


class _Read:
    """One `read`: the consumer loop over the cursors until all resolved or the deadline."""

    def __init__(
        self,
        consumer: Consumer,
        cursors: dict[tuple[str, int], PartitionCursor],
        resolved: dict[Target, RecordTimestamp],
        describe: Callable[[KafkaError], str],
    ) -> None:
        self._consumer = consumer
        self._active: dict[tuple[str, int], PartitionCursor] = {}
        self._waiting = list(cursors.values())
        self._waiting.reverse()  # taken from the end, in the order given
        self._resolved = resolved
        self._describe = describe
        self._heard: set[tuple[str, int]] = set()

    def _top_up(self) -> bool:
        """Assign waiting partitions up to `ASSIGNED_AT_ONCE`; True when any were assigned."""
        room = ASSIGNED_AT_ONCE - len(self._active)
        if room <= 0 or not self._waiting:
            return False
        taken = [self._waiting.pop() for _ in range(min(room, len(self._waiting)))]
        self._active.update((c.key, c) for c in taken)
        self._consumer.incremental_assign([TopicPartition(c.topic, c.partition, c.position) for c in taken])
        return True

    def run(self, deadline: float) -> None:
        consumer = self._consumer
        self._top_up()
        check_at: float | None = time.monotonic() + SILENCE_CHECK_SECONDS
        while self._active:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            touched: set[tuple[str, int]] = set()
            messages = consumer.consume(num_messages=_CONSUME_BATCH, timeout=min(remaining, _POLL_SECONDS))
            for message in messages:
                if not self._handle(message, touched):
                    return
            self._apply(touched)
            if self._top_up() and check_at is None:
                check_at = time.monotonic() + SILENCE_CHECK_SECONDS
            if check_at is not None and not messages and time.monotonic() >= check_at:
                check_at = None
                self._drop_missing(deadline)

    def _drop_missing(self, deadline: float) -> None:
        """Give up on the silent partitions that the cluster's metadata does not have."""
        silent = [key for key in self._active if key not in self._heard]
        if not silent:
            return
        names = sorted({topic for topic, _ in silent})
        topics: dict[str, Any] = {}
        try:
            for name in names if len(names) <= _FEW_TOPICS else [None]:
                timeout = max(0.1, min(deadline - time.monotonic(), 5.0))
                topics.update(self._consumer.list_topics(topic=name, timeout=timeout).topics)
        except KafkaException:
            return  # the brokers are not answering: the partitions may well exist
        for topic, partition in silent:
            found = topics.get(topic)
            if found is None or (found.error is None and partition not in found.partitions):
                self._give_up(topic, partition, KafkaError(KafkaError._UNKNOWN_PARTITION))
            elif found.error is not None and found.error.code() in _UNREADABLE:
                self._give_up(topic, partition, found.error)

    def _handle(self, message: Message, touched: set[tuple[str, int]]) -> bool:
        """Update the cursor the event is about; False when the read must stop."""
        error = message.error()
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        key = (str(topic), int(partition)) if topic is not None and partition is not None else None
        cursor = self._active.get(key) if key is not None else None
        if key is not None:
            self._heard.add(key)
        if error is None:
            if cursor is not None and offset is not None:
                kind, timestamp_ms = message.timestamp()
                for target in cursor.on_record(offset):
                    found = (cursor.topic, cursor.partition, target)
                    self._resolved[found] = record_timestamp(found, offset, kind, timestamp_ms)
                touched.add(cursor.key)
            return True
        code = error.code()
        if cursor is not None and offset is not None and code == KafkaError._PARTITION_EOF:
            self._no_records(cursor, cursor.on_end(offset))
            touched.add(cursor.key)
        elif cursor is not None and offset is not None and code in _OUT_OF_RANGE:
            self._no_records(cursor, cursor.on_out_of_range(offset))
            touched.add(cursor.key)
        elif topic is not None and code in _UNREADABLE:
            self._give_up(str(topic), partition, error)
        elif code == KafkaError._ALL_BROKERS_DOWN:
            _LOG.info("record timestamps: all brokers are down, stopping the read: %s", self._describe(error))
            return False
        elif error.fatal() or code in _REFUSED:
            raise KafkaRequestError(
                f"cannot read record timestamps: the cluster refused the client: {self._describe(error)}"
            )
        else:
            # Transient (a broker restarting, a leader moving): librdkafka retries by itself.
            _LOG.debug("record timestamps: %s", self._describe(error))
        return True

    def _no_records(self, cursor: PartitionCursor, offsets: list[int]) -> None:
        for target in offsets:
            self._resolved[(cursor.topic, cursor.partition, target)] = no_record(
                cursor.topic, cursor.partition, target
            )

    def _give_up(self, topic: str, partition: int | None, error: KafkaError) -> None:
        """Stop reading the partition (or every partition of the topic); its targets stay unread."""
        gone = [
            key
            for key in self._active
            if key[0] == topic and (partition is None or partition < 0 or key[1] == partition)
        ]
        _LOG.info("record timestamps: cannot read %s: %s", gone or topic, self._describe(error))
        if gone:
            self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in gone])
        for key in gone:
            del self._active[key]

    def _apply(self, touched: set[tuple[str, int]]) -> None:
        """Move every touched partition on: seek, reassign or unassign, batched per kind."""
        finished: list[TopicPartition] = []
        reassigned: list[TopicPartition] = []
        for key in touched:
            cursor = self._active.get(key)
            if cursor is None:
                continue
            step, offset = cursor.advance()
            if step is Step.DONE:
                del self._active[key]
                finished.append(TopicPartition(key[0], key[1]))
            elif step is Step.REASSIGN:
                reassigned.append(TopicPartition(key[0], key[1], offset))
            elif step is Step.SEEK:
                try:
                    self._consumer.seek(TopicPartition(key[0], key[1], offset))
                except KafkaException:
                    # librdkafka refuses to seek a partition whose fetcher stopped on an error.
                    reassigned.append(TopicPartition(key[0], key[1], offset))
        if finished or reassigned:
            self._consumer.incremental_unassign(
                finished + [TopicPartition(tp.topic, tp.partition) for tp in reassigned]
            )
        if reassigned:
            self._consumer.incremental_assign(reassigned)
