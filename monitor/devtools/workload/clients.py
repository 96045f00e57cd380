"""The workload's producers and consumers: one thread each, on confluent-kafka.

The demo tooling talks to Kafka directly (like the test fixtures): it plays a client application,
which is what the monitor watches, so it must not go through the monitor's own adapter.

Each loop runs until its stop event is set and never raises out of `run`: a failure is told
through `report` and the loop ends, so one broken client does not take the others down.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from monitor.devtools.workload.plan import Behaviour, GroupPlan, Pacer, TopicPlan, rewind_at

log = logging.getLogger(__name__)
Report = Callable[[str], None]

_POLL_SECONDS = 0.5
_COMMIT_EVERY_SECONDS = 1.0
_STALLED_COMMIT_EVERY_SECONDS = 5.0


def payload(seq: int, size: int) -> bytes:
    body = json.dumps({"seq": seq}).encode()
    return body + b" " * max(0, size - len(body))


@dataclass
class TopicStats:
    """What a producer did, read by the runner and the tests (under `lock`)."""

    sent: int = 0
    failed: int = 0
    last_error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def seed_history(producer: Producer, topic: TopicPlan, now_ms: int) -> int:
    """Write `topic.history_seconds` of messages at `topic.rate`, with CreateTime timestamps
    spread evenly over that past up to `now_ms`. Returns how many; waits until all are written."""
    count = int(topic.history_seconds * topic.rate)
    start = now_ms - int(topic.history_seconds * 1000)
    step = (now_ms - start) / max(count, 1)
    for seq in range(count):
        while True:
            try:
                producer.produce(
                    topic.name,
                    value=payload(seq, topic.payload_bytes),
                    partition=seq % topic.partitions,
                    timestamp=int(start + seq * step),
                )
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(60)
    if remaining:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{remaining} history messages not written"))
    return count


class ProducerLoop(threading.Thread):
    """Produces `topic.rate` messages/s, round robin over the partitions, until `stop` is set."""

    def __init__(
        self, topic: TopicPlan, producer: Producer, stop: threading.Event, report: Report, first_seq: int = 0
    ) -> None:
        super().__init__(name=f"produce-{topic.name}", daemon=True)
        self.topic = topic
        self.producer = producer
        self.stop_event = stop
        self.report = report
        self.stats = TopicStats()
        self.seq = first_seq
        self._failing = False

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        with self.stats.lock:
            was_failing, self._failing = self._failing, error is not None
            if error is None:
                self.stats.sent += 1
            else:
                self.stats.failed += 1
                self.stats.last_error = error.str()
        if error is not None and not was_failing:
            self.report(f"producer of {self.topic.name} (acks={self.topic.acks}) fails: {error.str()}")
        elif error is None and was_failing:
            self.report(f"producer of {self.topic.name} writes again")

    def run(self) -> None:
        pacer = Pacer(self.topic.rate, time.monotonic())
        batch = max(1, int(self.topic.rate * self.topic.burst_seconds))
        try:
            while not self.stop_event.is_set():
                wait = pacer.wait_for(time.monotonic(), batch)
                if wait > 0:
                    self.producer.poll(min(wait, _POLL_SECONDS))
                    continue
                for _ in range(batch):
                    self._produce_one()
                pacer.record(batch)
                self.producer.poll(0)
        except Exception as exc:  # a client application that crashes: tell, and stop this loop
            log.exception("producer of %s failed", self.topic.name)
            self.report(f"producer of {self.topic.name} stopped on an error: {exc}")

    def _produce_one(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.producer.produce(
                    self.topic.name,
                    value=payload(self.seq, self.topic.payload_bytes),
                    partition=self.seq % self.topic.partitions,
                    on_delivery=self._delivered,
                )
                self.seq += 1
                return
            except BufferError:  # the local queue is full (brokers down): wait for room
                self.producer.poll(_POLL_SECONDS)


@dataclass
class GroupStats:
    """What the members of one group did, read by the runner and the tests (under `lock`)."""

    consumed: int = 0
    rewinds: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, from, to)
    stalled: dict[int, int] = field(default_factory=dict)  # partition -> the offset it stays at
    closed: int = 0  # members closed
    lost: int = 0  # messages retention deleted before a member read them
    said: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def first(self, event: str) -> bool:
        """True the first time a member of the group reports `event`, so it is told once."""
        with self.lock:
            new = event not in self.said
            self.said.add(event)
            return new


class ConsumerLoop(threading.Thread):
    """Member `member` of `members` of `group.group_id` on `group.topic`, behaving as
    `group.behaviour` says, at `group.rate / members` messages/s at most.

    A paced group has one member per partition: librdkafka serves a member's partitions one
    prefetched batch after the other, so a single slow member would read one partition for
    minutes while the others stand still, which no real slow consumer does."""

    def __init__(
        self,
        group: GroupPlan,
        partitions: int,
        config: dict[str, Any],
        stop: threading.Event,
        report: Report,
        started: float,
        stats: GroupStats,
        member: int = 0,
        members: int = 1,
    ) -> None:
        super().__init__(name=f"consume-{group.group_id}-{member}", daemon=True)
        self.group = group
        self.partitions = partitions
        self.rate = None if group.rate is None else group.rate / members
        self.config = {
            **config,
            "group.id": group.group_id,
            "client.id": f"workload-{group.group_id}-{member}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest" if group.from_beginning else "latest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1_000,
            # A small prefetch (librdkafka keeps up to 100,000 messages a partition by default):
            # a slow member has seconds of messages in memory, not hours.
            "queued.min.messages": 20,
            "queued.max.messages.kbytes": 256,
        }
        self.stop_event = stop
        self.report = report
        self.started = started
        self.stats = stats
        self.position: dict[int, int] = {}  # partition -> next offset to read
        self.floor: dict[int, int] = {}  # partition -> first offset read (a rewind goes no lower)
        self.rewinds_done: dict[int, int] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def run(self) -> None:
        consumer = Consumer(self.config)
        try:
            consumer.subscribe([self.group.topic], on_revoke=self._revoked)
            self._loop(consumer)
        except Exception as exc:
            log.exception("consumer group %s failed", self.group.group_id)
            self.report(f"a consumer of group {self.group.group_id} stopped on an error: {exc}")
        finally:
            consumer.close()
            with self.stats.lock:
                self.stats.closed += 1

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """A rebalance takes partitions away: commit where this member got to, and forget them
        (a later commit must not move the new owner's offsets)."""
        mine = [tp.partition for tp in partitions if tp.partition in self.position]
        self._commit(consumer, asynchronous=True)
        for partition in mine:
            self.position.pop(partition, None)

    def _loop(self, consumer: Consumer) -> None:
        pacer = Pacer(self.rate, time.monotonic())
        batch = 500 if self.rate is None else max(1, min(500, int(self.rate / 4)))
        last_commit = time.monotonic()
        behaviour = self.group.behaviour
        while not self.stop_event.is_set():
            acting = self.elapsed() >= self.group.act_after_seconds
            if behaviour is Behaviour.STOPPED and acting and self.position:
                self._commit(consumer, asynchronous=False)
                if self.stats.first("closed"):
                    self.report(
                        f"group {self.group.group_id} closed its consumers after reading "
                        f"{self.stats.consumed:,} messages; the producers of {self.group.topic} go on"
                    )
                return
            if behaviour is Behaviour.STALLED and acting and self.position:
                self._stall(consumer)
                return
            if behaviour is Behaviour.REWINDING:
                self._rewind_due(consumer)
            wait = pacer.wait_for(time.monotonic(), batch)
            if wait > 0:
                self.stop_event.wait(min(wait, _POLL_SECONDS))
                continue
            messages = consumer.consume(num_messages=batch, timeout=_POLL_SECONDS)
            read = sum(self._take(m) for m in messages)
            pacer.record(max(read, 1) if messages else 0)
            if time.monotonic() - last_commit >= _COMMIT_EVERY_SECONDS:
                self._commit(consumer, asynchronous=True)
                last_commit = time.monotonic()
        # Asynchronous: with the coordinator's broker stopped a synchronous commit would hold the
        # demo's exit for its whole timeout; `close` sends what is queued.
        self._commit(consumer, asynchronous=True)

    def _take(self, message: Message) -> int:
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                log.debug("group %s: %s", self.group.group_id, error.str())
            return 0
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None:
            return 0
        expected = self.position.get(partition)
        if expected is not None and offset > expected:
            # Offsets are dense on these topics (no compaction, no transactions): a jump means the
            # messages in between were deleted before this group read them, and the consumer
            # restarted from the log start (auto.offset.reset).
            self._skipped(partition, expected, offset)
        self.position[partition] = offset + 1
        self.floor.setdefault(partition, offset)
        with self.stats.lock:
            self.stats.consumed += 1
        return 1

    def _skipped(self, partition: int, expected: int, offset: int) -> None:
        with self.stats.lock:
            self.stats.lost += offset - expected
        if self.stats.first("data loss"):
            self.report(
                f"group {self.group.group_id}: retention deleted {offset - expected:,} messages of "
                f"{self.group.topic} partition {partition} before the group read them; expect "
                "DataLossOccurred (critical) on the alerts page"
            )

    def _offsets(self) -> list[TopicPartition]:
        return [TopicPartition(self.group.topic, p, o) for p, o in sorted(self.position.items())]

    def _commit(self, consumer: Consumer, *, asynchronous: bool) -> None:
        offsets = self._offsets()
        if not offsets:
            return
        try:
            if asynchronous:
                consumer.commit(offsets=offsets, asynchronous=True)
            else:
                consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # coordinator moving (a broker stopped): the next one will do
            log.debug("group %s: commit failed: %s", self.group.group_id, exc)

    def _stall(self, consumer: Consumer) -> None:
        """Stay in the group, read nothing more, and commit the same offsets until stopped."""
        consumer.pause(consumer.assignment())
        self._commit(consumer, asynchronous=False)
        with self.stats.lock:
            self.stats.stalled.update(self.position)
        if self.stats.first("stalled"):
            self.report(
                f"group {self.group.group_id} stalled: its consumers stay in the group and commit "
                f"the same offsets while {self.group.topic} grows"
            )
        last_commit = time.monotonic()
        while not self.stop_event.is_set():
            consumer.poll(_POLL_SECONDS)  # keeps the membership; nothing comes while paused
            if time.monotonic() - last_commit >= _STALLED_COMMIT_EVERY_SECONDS:
                self._commit(consumer, asynchronous=False)
                last_commit = time.monotonic()

    def _rewind_due(self, consumer: Consumer) -> None:
        back = int((self.group.rate or 0) / max(self.partitions, 1) * self.group.rewind_seconds)
        # (per partition: what the group reads of one partition in `rewind_seconds`)
        for partition, position in sorted(self.position.items()):
            done = self.rewinds_done.get(partition, 0)
            if self.elapsed() < rewind_at(self.group, partition, self.partitions, done):
                continue
            target = max(self.floor.get(partition, 0), position - max(back, 1))
            self.rewinds_done[partition] = done + 1
            if target >= position:
                continue
            try:
                rewound = TopicPartition(self.group.topic, partition, target)
                consumer.seek(rewound)
                consumer.commit(offsets=[rewound], asynchronous=False)
            except KafkaException as exc:
                log.debug("group %s: rewind of partition %d failed: %s", self.group.group_id, partition, exc)
                continue
            self.position[partition] = target
            with self.stats.lock:
                self.stats.rewinds.append((partition, position, target))
            if self.stats.first("rewound"):
                self.report(
                    f"group {self.group.group_id} rewound partition {partition} from offset {position:,} to "
                    f"{target:,} and committed it (its partitions take turns to rewind, every "
                    f"{self.group.rewind_every_seconds:g}s each)"
                )
