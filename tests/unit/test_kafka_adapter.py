"""The pure parts of the Kafka adapter: record mappings, the timestamp reader's per-partition
cursor and its consumer loop (against a simulated log), the partial-failure policy of the admin
requests (against a fake client), the fan-out bound, and the kafka-python security mapping.

Nothing here connects to a broker (one test connects to a closed local port).
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kafka.errors
import kafka.structs
import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from kafka.protocol.api_key import ApiKey

from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.records import (
    CommittedOffset,
    LogDirReplica,
    LogDirUsage,
    PartitionOffsets,
    RecordTimestamp,
    TopicConfigEntry,
)
from monitor.core.settings import ClusterConfig, Security
from monitor.kafka import (
    CONFIG_KEYS,
    KafkaAdmin,
    LogDirClient,
    RecordTimestampReader,
    kafka_python_options,
    records,
)
from monitor.kafka.cursor import SEQUENTIAL_GAP, PartitionCursor, Step, plan
from monitor.kafka.groups import GroupOffsetsClient, committed_of
from monitor.kafka.logdirs import log_dirs_of
from monitor.kafka.timestamps import reader_config
from monitor.kafka.translate import Outcome
from tests.fixtures.kafka_python import FakeConnectionManager, connected

PASSWORD = "Sup3r-s3cret-pa55word"
KEY_PASSWORD = "key-Pa55-7d1c"


def failed(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def done(value: Any = None, error: BaseException | None = None) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


# -- record mappings ---------------------------------------------------------------------------


def test_partition_offsets_of_a_partition_with_records_and_of_an_empty_one() -> None:
    answer = SimpleNamespace

    full = records.partition_offsets(
        "t",
        0,
        answer(offset=3, timestamp=-1),
        answer(offset=10, timestamp=-1),
        answer(offset=7, timestamp=1234),
    )
    empty = records.partition_offsets(
        "t",
        1,
        answer(offset=0, timestamp=-1),
        answer(offset=0, timestamp=-1),
        answer(offset=-1, timestamp=-1),
    )
    unknown_max = records.partition_offsets(
        "t", 2, answer(offset=0, timestamp=-1), answer(offset=5, timestamp=-1), None
    )

    assert full == PartitionOffsets("t", 0, start=3, end=10, max_timestamp_offset=7, max_timestamp_ms=1234)
    assert empty == PartitionOffsets("t", 1, start=0, end=0, max_timestamp_offset=None, max_timestamp_ms=None)
    assert unknown_max == PartitionOffsets("t", 2, start=0, end=5)


def test_topic_configs_keep_the_wanted_names_and_never_return_secrets() -> None:
    def entry(name: str, value: str | None, source: object, sensitive: bool = False) -> SimpleNamespace:
        return SimpleNamespace(name=name, value=value, source=source, is_sensitive=sensitive)

    entries = {
        "retention.ms": entry("retention.ms", "3600000", 1),
        "retention.bytes": entry("retention.bytes", "-1", 5),
        "min.insync.replicas": entry("min.insync.replicas", "2", 3),
        "segment.bytes": entry("segment.bytes", "1073741824", 4),
        "sasl.jaas.config": entry("sasl.jaas.config", "secret", 2, sensitive=True),
        "flush.ms": entry("flush.ms", "1000", 99),
    }

    wanted = records.topic_config_entries("t", entries, CONFIG_KEYS)
    everything = records.topic_config_entries("t", entries, None)

    assert wanted == [
        TopicConfigEntry("t", "min.insync.replicas", "2", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        TopicConfigEntry("t", "retention.bytes", "-1", "DEFAULT_CONFIG"),
        TopicConfigEntry("t", "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"),
        TopicConfigEntry("t", "segment.bytes", "1073741824", "STATIC_BROKER_CONFIG"),
    ]
    secret = next(e for e in everything if e.name == "sasl.jaas.config")
    assert (secret.value, secret.sensitive, secret.source) == (None, True, "DYNAMIC_BROKER_CONFIG")
    assert next(e for e in everything if e.name == "flush.ms").source == "UNKNOWN_CONFIG"


def test_timestamp_types_use_kafkas_names() -> None:
    assert records.timestamp_type(TIMESTAMP_CREATE_TIME) == "CreateTime"
    assert records.timestamp_type(TIMESTAMP_LOG_APPEND_TIME) == "LogAppendTime"
    assert records.timestamp_type(TIMESTAMP_NOT_AVAILABLE) == "NotAvailable"


def test_log_dirs_of_one_broker() -> None:
    answer = [
        {
            "error_code": 0,
            "log_dir": "data/a",
            "total_bytes": 1000,
            "usable_bytes": 400,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 1, "partition_size": 20, "offset_lag": 0, "is_future_key": False},
                        {"partition_index": 0, "partition_size": 10, "offset_lag": 2, "is_future_key": True},
                    ],
                }
            ],
        },
        {"error_code": 56, "log_dir": "data/b", "total_bytes": -1, "usable_bytes": -1, "topics": []},
    ]

    replicas, usages = log_dirs_of(3, answer)

    assert replicas == [
        LogDirReplica(3, "data/a", "t", 0, size_bytes=10, offset_lag=2, is_future=True),
        LogDirReplica(3, "data/a", "t", 1, size_bytes=20, offset_lag=0, is_future=False),
    ]
    assert usages == [
        LogDirUsage(3, "data/a", total_bytes=1000, usable_bytes=400, error=None),
        LogDirUsage(3, "data/b", total_bytes=None, usable_bytes=None, error="KafkaStorageError"),
    ]


# -- the timestamp reader's cursor -------------------------------------------------------------


def test_plan_groups_targets_by_partition_and_answers_negative_offsets_itself() -> None:
    cursors, trivial = plan([("t", 0, 9), ("t", 1, 4), ("t", 0, 3), ("t", 0, 9), ("t", 0, -1)])

    assert trivial == [("t", 0, -1)]
    assert {key: (c.pending, c.position) for key, c in cursors.items()} == {
        ("t", 0): ([3, 9], 3),
        ("t", 1): ([4], 4),
    }


# Each row: targets, then events in order as (kind, offset), then what the cursor says after each
# event: (targets resolved by it, step, offset the step is at).
CURSOR_CASES: list[tuple[str, list[int], list[tuple[str, int, list[int], Step, int]]]] = [
    (
        "1 a record at the target resolves it; the partition is done",
        [5],
        [("record", 5, [5], Step.DONE, 6)],
    ),
    (
        "2 a gap: the first record past the target answers for it",
        [5],
        [("record", 8, [5], Step.DONE, 9)],
    ),
    (
        "3 one record answers every target up to it; close targets are read on",
        [4, 5, 7, 9],
        [
            ("record", 5, [4, 5], Step.READ, 6),
            ("record", 6, [], Step.READ, 7),
            ("record", 9, [7, 9], Step.DONE, 10),
        ],
    ),
    (
        "4 a far target is sought",
        [10, 10 + SEQUENTIAL_GAP + 2],
        [("record", 10, [10], Step.SEEK, 10 + SEQUENTIAL_GAP + 2)],
    ),
    (
        "5 the end of the partition answers every open target with no record",
        [3, 4, 90],
        [("record", 3, [3], Step.READ, 4), ("end", 4, [4, 90], Step.DONE, 4)],
    ),
    (
        "6 events from before a seek are ignored",
        [10, 50],
        [
            ("record", 10, [10], Step.SEEK, 50),
            ("record", 11, [], Step.READ, 50),
            ("end", 12, [], Step.READ, 50),
            ("record", 52, [50], Step.DONE, 53),
        ],
    ),
    (
        "7 out of range before any record (below the start): only that target, then reassign",
        [1, 2, 8],
        [("out_of_range", 1, [1], Step.REASSIGN, 2), ("out_of_range", 2, [2], Step.REASSIGN, 8)],
    ),
    (
        "8 out of range after a record (past the end): every open target",
        [3, 40, 80],
        [("record", 3, [3], Step.SEEK, 40), ("out_of_range", 40, [40, 80], Step.DONE, 40)],
    ),
    (
        "9 an out-of-range error for another offset is stale",
        [3, 40],
        [("record", 3, [3], Step.SEEK, 40), ("out_of_range", 3, [], Step.READ, 40)],
    ),
    ("10 an empty partition ends at once", [0], [("end", 0, [0], Step.DONE, 0)]),
]


@pytest.mark.parametrize(
    ("name", "targets", "events"), CURSOR_CASES, ids=[c[0].split(" ")[0] for c in CURSOR_CASES]
)
def test_partition_cursor(
    name: str, targets: list[int], events: list[tuple[str, int, list[int], Step, int]]
) -> None:
    cursor = PartitionCursor("t", 0, targets)
    handlers: dict[str, Callable[[int], list[int]]] = {
        "record": cursor.on_record,
        "end": cursor.on_end,
        "out_of_range": cursor.on_out_of_range,
    }

    for index, (kind, offset, resolved, step, at) in enumerate(events, start=1):
        assert handlers[kind](offset) == resolved, f"{name}: event {index} resolved"
        assert cursor.advance() == (step, at), f"{name}: event {index} step"


# -- the timestamp reader's loop against a simulated log -----------------------------------------


@dataclass
class FakeLog:
    """One partition: records by offset (gaps allowed), the log start and the end offset."""

    start: int
    end: int
    records: dict[int, int] = field(default_factory=dict)
    timestamp_type: int = TIMESTAMP_CREATE_TIME


class FakeMessage:
    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        error: KafkaError | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, -1),
    ) -> None:
        self._values = (topic, partition, offset, error, timestamp)

    def topic(self) -> str:
        return self._values[0]

    def partition(self) -> int:
        return self._values[1]

    def offset(self) -> int:
        return self._values[2]

    def error(self) -> KafkaError | None:
        return self._values[3]

    def timestamp(self) -> tuple[int, int]:
        return self._values[4]


class FakeConsumer:
    """Behaves like librdkafka for the reader: each consume() delivers, for every assigned
    partition, the next `batch` records from its position (more than asked for), an EOF once at
    the end, or an out-of-range error that stops the partition until it is assigned again.
    With `stale_after_seek`, a seek leaves one event of the old position queued."""

    def __init__(
        self, logs: dict[tuple[str, int], FakeLog], batch: int = 3, stale_after_seek: bool = False
    ) -> None:
        self.logs = logs
        self.batch = batch
        self.stale_after_seek = stale_after_seek
        self.position: dict[tuple[str, int], int] = {}
        self.stopped: set[tuple[str, int]] = set()
        self.eof_sent: dict[tuple[str, int], int] = {}
        self.queued: list[FakeMessage] = []
        self.calls: list[tuple[str, tuple[tuple[str, int, int], ...]]] = []

    def _record(self, call: str, partitions: Iterable[TopicPartition]) -> None:
        self.calls.append((call, tuple((tp.topic, tp.partition, tp.offset) for tp in partitions)))

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._record("assign", partitions)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self.position[key] = tp.offset
            self.stopped.discard(key)
            self.eof_sent.pop(key, None)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._record("unassign", partitions)
        for tp in partitions:
            self.position.pop((tp.topic, tp.partition), None)

    def unassign(self) -> None:
        self.position.clear()

    def seek(self, tp: TopicPartition) -> None:
        key = (tp.topic, tp.partition)
        if key in self.stopped:
            raise failed(KafkaError._STATE)
        self._record("seek", [tp])
        if self.stale_after_seek:
            self.queued.append(FakeMessage(tp.topic, tp.partition, self.position[key] + 1))
        self.position[key] = tp.offset
        self.eof_sent.pop(key, None)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        out, self.queued = self.queued, []
        for key, position in list(self.position.items()):
            log = self.logs.get(key)
            if log is None or key in self.stopped:
                continue
            if not log.start <= position <= log.end:
                out.append(FakeMessage(*key, position, KafkaError(KafkaError._AUTO_OFFSET_RESET)))
                self.stopped.add(key)
                continue
            delivered = 0
            while position < log.end and delivered < self.batch:
                if position in log.records:
                    out.append(
                        FakeMessage(*key, position, timestamp=(log.timestamp_type, log.records[position]))
                    )
                    delivered += 1
                position += 1
            self.position[key] = position
            if position == log.end and self.eof_sent.get(key) != position:
                out.append(FakeMessage(*key, position, KafkaError(KafkaError._PARTITION_EOF)))
                self.eof_sent[key] = position
        if not out:
            time.sleep(min(timeout, 0.005))
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> SimpleNamespace:
        """The metadata of every topic, or of `topic` alone (absent when it does not exist)."""
        topics: dict[str, SimpleNamespace] = {}
        for name, partition in self.logs:
            if topic is not None and name != topic:
                continue
            topics.setdefault(name, SimpleNamespace(error=None, partitions={})).partitions[partition] = (
                object()
            )
        return SimpleNamespace(topics=topics)

    def close(self) -> None:
        pass


def reader_with(consumer: FakeConsumer) -> RecordTimestampReader:
    reader = RecordTimestampReader(ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"]))
    reader._consumer = consumer  # type: ignore[assignment]
    return reader


def found(
    topic: str, partition: int, offset: int, record: int | None, ms: int | None = None
) -> RecordTimestamp:
    if record is None:
        return RecordTimestamp(topic, partition, offset, None, None)
    return RecordTimestamp(topic, partition, offset, record, ms, "CreateTime")


def test_the_reader_resolves_gaps_markers_ends_and_offsets_out_of_range() -> None:
    logs = {
        ("dense", 0): FakeLog(0, 6, {o: 1000 + o for o in range(6)}),
        # compacted: offsets 2-4 and 6-8 are gone; offset 10 is a transaction marker
        ("compacted", 0): FakeLog(0, 11, {0: 100, 1: 101, 5: 105, 9: 109}),
        ("retained", 0): FakeLog(5, 8, {5: 500, 6: 600, 7: 700}),
        ("empty", 0): FakeLog(0, 0),
    }
    consumer = FakeConsumer(logs)
    targets = [
        ("dense", 0, 0),
        ("dense", 0, 4),
        ("dense", 0, 5),
        ("dense", 0, 6),
        ("dense", 0, 60),
        ("dense", 0, -1),
        ("compacted", 0, 2),
        ("compacted", 0, 6),
        ("compacted", 0, 9),
        ("compacted", 0, 10),
        ("retained", 0, 2),
        ("retained", 0, 6),
        ("empty", 0, 0),
    ]

    resolved, unread = reader_with(consumer).read(targets, budget_seconds=5)

    assert unread == []
    assert [resolved[t] for t in targets] == [
        found("dense", 0, 0, 0, 1000),
        found("dense", 0, 4, 4, 1004),
        found("dense", 0, 5, 5, 1005),
        found("dense", 0, 6, None),
        found("dense", 0, 60, None),
        found("dense", 0, -1, None),
        found("compacted", 0, 2, 5, 105),
        found("compacted", 0, 6, 9, 109),
        found("compacted", 0, 9, 9, 109),
        found("compacted", 0, 10, None),
        found("retained", 0, 2, None),
        found("retained", 0, 6, 6, 600),
        found("empty", 0, 0, None),
    ]
    assert consumer.position == {}, "every partition is unassigned after the read"


def test_the_reader_assigns_a_bounded_number_of_partitions_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.kafka.timestamps.ASSIGNED_AT_ONCE", 2)
    consumer = FakeConsumer({("t", p): FakeLog(0, 3, {0: p, 1: p, 2: p}) for p in range(5)})
    most = 0
    assign = consumer.incremental_assign

    def counting(partitions: list[TopicPartition]) -> None:
        nonlocal most
        assign(partitions)
        most = max(most, len(consumer.position))

    consumer.incremental_assign = counting  # type: ignore[method-assign]
    targets = [("t", p, o) for p in range(5) for o in (0, 2)]

    resolved, unread = reader_with(consumer).read(targets, budget_seconds=5)

    assert unread == []
    assert [resolved[t].record_offset for t in targets] == [0, 2] * 5
    assert most == 2
    assert consumer.position == {}


def test_the_reader_reads_on_to_close_targets_and_seeks_far_ones() -> None:
    far = 5 + SEQUENTIAL_GAP + 10
    consumer = FakeConsumer({("t", 0): FakeLog(0, 200, {o: o for o in range(200)})}, batch=2)

    resolved, unread = reader_with(consumer).read([("t", 0, 5), ("t", 0, 6), ("t", 0, far)], budget_seconds=5)

    assert unread == []
    assert [resolved[("t", 0, o)].record_offset for o in (5, 6, far)] == [5, 6, far]
    assert [call for call, _ in consumer.calls] == ["assign", "seek", "unassign"]
    assert consumer.calls[1] == ("seek", (("t", 0, far),))


def test_the_reader_ignores_events_from_before_a_seek() -> None:
    far = 10 + SEQUENTIAL_GAP + 10
    consumer = FakeConsumer(
        {("t", 0): FakeLog(0, 200, {o: o for o in range(200)})}, batch=1, stale_after_seek=True
    )

    resolved, _ = reader_with(consumer).read([("t", 0, 10), ("t", 0, far)], budget_seconds=5)

    assert resolved[("t", 0, far)].record_offset == far


def test_a_partition_that_does_not_exist_is_given_up_after_the_silence_check() -> None:
    consumer = FakeConsumer({("t", 0): FakeLog(0, 1, {0: 7})})
    started = time.monotonic()

    resolved, unread = reader_with(consumer).read(
        [("t", 0, 0), ("gone", 0, 0), ("t", 9, 0)], budget_seconds=10
    )

    assert time.monotonic() - started < 3
    assert resolved == {("t", 0, 0): found("t", 0, 0, 0, 7)}
    assert unread == [("gone", 0, 0), ("t", 9, 0)]


def test_a_spent_budget_leaves_every_target_unread() -> None:
    consumer = FakeConsumer({("t", 0): FakeLog(0, 1, {0: 7})})

    resolved, unread = reader_with(consumer).read([("t", 0, 0), ("t", 0, 1)], budget_seconds=0)

    assert (resolved, unread) == ({}, [("t", 0, 0), ("t", 0, 1)])


def test_the_reader_must_be_started() -> None:
    reader = RecordTimestampReader(ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"]))

    with pytest.raises(RuntimeError, match="start"):
        reader.read([("t", 0, 0)], budget_seconds=1)


def test_the_reader_never_commits_and_keeps_fetches_small() -> None:
    cluster = ClusterConfig(
        name="prod",
        bootstrap_servers=["127.0.0.1:9092"],
        client_config={
            "enable.auto.commit": "true",
            "fetch.wait.max.ms": "5",
            "message.max.bytes": "20000000",
        },
    )

    config = reader_config(cluster)

    assert config["enable.auto.commit"] is False
    assert config["enable.auto.offset.store"] is False
    assert config["enable.partition.eof"] is True
    assert config["auto.offset.reset"] == "error"
    assert config["group.id"] == "kafka-health-prod-timestamps"
    assert config["fetch.wait.max.ms"] == "5", "the operator's tuning wins"
    assert int(config["fetch.max.bytes"]) >= int(config["message.max.bytes"]) == 20_000_000
    assert int(config["max.partition.fetch.bytes"]) <= 1024 * 1024
    assert config["queued.min.messages"] == 1


# -- the partial-failure policy of the admin requests ----------------------------------------------


class FakeAdminClient:
    """An admin client that only counts as replaced or destroyed."""

    def __init__(
        self, answers: dict[tuple[str, int], dict[str, Any]], on_destroy: list[str] | None = None
    ) -> None:
        self.answers = answers
        self.destroyed = False
        self._on_destroy = on_destroy

    def poll(self, timeout: float) -> int:
        return 0

    def __exit__(self, *exc_info: object) -> None:
        self.destroyed = True
        if self._on_destroy is not None:
            self._on_destroy.append("fake")


def admin_with(client: object) -> KafkaAdmin:
    admin = KafkaAdmin(
        ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"], request_timeout_seconds=2)
    )
    admin._client = client  # type: ignore[assignment]
    return admin


def test_the_client_is_replaced_once_when_several_threads_fail_together() -> None:
    admin = admin_with(FakeAdminClient({}))
    generation = admin._generation
    threads = [threading.Thread(target=admin._renew, args=(generation,)) for _ in range(4)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert admin._generation == generation + 1
    admin.close()


def test_replaced_clients_are_destroyed_by_the_admin_once_nothing_uses_them() -> None:
    # A client left to the garbage collector can be destroyed on its own librdkafka thread,
    # which aborts the process; the admin destroys each one itself, on the caller's thread.
    destroyed: list[str] = []
    admin = admin_with(FakeAdminClient({}, on_destroy=destroyed))
    admin.retire_delay = 0.2
    in_use = admin._client
    admin._renew(admin._generation)
    current = admin._client
    assert current is not None and current is not in_use

    admin._call("list topics")
    assert destroyed == [], "a replaced client that a request still holds is kept"
    del in_use
    admin._call("list topics")
    assert destroyed == [], "its requests may still be pending for retire_delay"
    time.sleep(0.25)
    admin._call("list topics")
    assert destroyed == ["fake"], "and destroyed once nothing holds it and the delay passed"
    assert admin._retired == []

    admin.close()
    with pytest.raises(RuntimeError, match="closed"):
        current.poll(0)


class LaggingBrokers(FakeAdminClient):
    """Describes topics as brokers that learn of `fresh` topics only at the `known_from`-th request."""

    def __init__(self, fresh: set[str], known_from: int) -> None:
        super().__init__({})
        self.fresh, self.known_from = fresh, known_from
        self.asked: list[list[str]] = []

    def describe_topics(self, topics: Any, request_timeout: float) -> dict[str, Any]:
        names = list(topics.topic_names)
        self.asked.append(names)
        unknown = len(self.asked) < self.known_from
        return {
            name: done(error=failed(KafkaError.UNKNOWN_TOPIC_OR_PART))
            if unknown and name in self.fresh
            else done(SimpleNamespace(name=name, is_internal=False, partitions=[]))
            for name in names
        }


def test_a_topic_a_broker_does_not_know_yet_is_asked_for_again_and_then_refused() -> None:
    # Each describe goes to a broker the client picks, and a broker learns of a topic a moment
    # after the controller created it: a topic listed by one can be unknown to the next.
    client = LaggingBrokers(fresh={"new"}, known_from=3)
    admin = admin_with(client)

    described = admin.describe_topics(["old", "new", "old"])

    assert [t.name for t in described] == ["old", "new", "old"]
    assert client.asked == [["old", "new"], ["new"], ["new"]], "only the unknown one is asked for again"

    never = LaggingBrokers(fresh={"gone"}, known_from=99)
    started = time.monotonic()
    with pytest.raises(KafkaRequestError, match=r"'gone'.*UNKNOWN_TOPIC_OR_PART"):
        admin_with(never).describe_topics(["gone"])
    assert len(never.asked) == 4 and time.monotonic() - started < 2.0

    # Deleted since it was listed: left out where the caller asks for what still exists.
    gone = LaggingBrokers(fresh={"gone"}, known_from=99)
    described = admin_with(gone).describe_topics(["old", "gone"], skip_unknown=True)
    assert [t.name for t in described] == ["old"] and gone.asked[1:] == [["gone"]] * 3


def test_close_destroys_replaced_clients_still_referenced() -> None:
    replaced = FakeAdminClient({})
    admin = admin_with(replaced)
    admin._renew(admin._generation)

    admin.close()

    assert replaced.destroyed
    assert admin._retired == []


@pytest.mark.parametrize(
    ("errors", "answered", "raised"),
    [
        ([], 1, None),
        ([failed(KafkaError._TRANSPORT)], 1, None),
        ([failed(KafkaError._TRANSPORT), TimeoutError()], 0, KafkaException),
        ([failed(KafkaError._TRANSPORT), failed(KafkaError.UNKNOWN_TOPIC_OR_PART)], 0, None),
    ],
)
def test_a_request_fails_only_when_nothing_answered_and_the_cluster_did_not(
    errors: list[BaseException], answered: int, raised: type[BaseException] | None
) -> None:
    outcome = Outcome(secrets=[], timeout=1)
    for _ in range(answered):
        outcome.success()
    for index, error in enumerate(errors):
        outcome.failure(f"e{index}", error)

    unreachable = outcome.unreachable()

    assert (type(unreachable) if unreachable is not None else None) is raised


# -- the OffsetFetch fan-out ---------------------------------------------------------------------


class FakeOffsetFetch:
    """kafka-python's `list_group_offsets` against a broker before Kafka 3.0 (no OffsetFetch v8:
    the monitor's own v8 requests are tested in test_offset_fetch.py): groups whose coordinator
    is "down" fail every call that includes them (as kafka-python does: one coordinator failing
    fails the call)."""

    def __init__(self, down: set[str] | None = None, refused: set[str] | None = None) -> None:
        self.down = down or set()
        self.refused = refused or set()
        self.calls: list[list[str]] = []

    def api_versions(self) -> dict[ApiKey, tuple[int, int]]:
        return {ApiKey.OffsetFetch: (0, 7)}

    def list_group_offsets(self, groups: list[str]) -> dict[str, dict[Any, Any]]:
        self.calls.append(list(groups))
        if self.down & set(groups):
            raise kafka.errors.NodeNotReadyError(2)
        if self.refused & set(groups):
            raise kafka.errors.GroupAuthorizationFailedError("not allowed")
        meta = kafka.structs.OffsetAndMetadata
        tp = kafka.structs.TopicPartition
        return {g: {tp("t", 0): meta(int(g[1:]), "", 3), tp("t", 1): meta(-1, "", -1)} for g in groups}

    def close(self) -> None:
        return None


def offsets_client(fake: FakeOffsetFetch) -> GroupOffsetsClient:
    client = GroupOffsetsClient(ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"]))
    client._client = connected(FakeConnectionManager(), fake)
    client.start()
    return client


def test_committed_offsets_ask_many_groups_per_call_and_leave_out_missing_offsets() -> None:
    fake = FakeOffsetFetch()
    groups = [f"g{i}" for i in range(250)]

    result = offsets_client(fake).committed_offsets(groups, groups_per_request=100)

    assert [len(c) for c in fake.calls] == [100, 100, 50]
    assert result.errors == {}
    assert result.value == {g: [CommittedOffset(g, "t", 0, int(g[1:]), leader_epoch=3)] for g in groups}


def test_a_group_answer_becomes_records_sorted_without_unknown_epochs_or_missing_offsets() -> None:
    meta = kafka.structs.OffsetAndMetadata
    tp = kafka.structs.TopicPartition
    answer = {
        tp("b", 1): meta(7, "", -1),
        tp("a", 2): meta(5, "", 4),
        tp("a", 0): meta(-1, "", 1),
        tp("a", 1): None,
    }

    assert committed_of("g", answer) == [
        CommittedOffset("g", "a", 2, 5, leader_epoch=4),
        CommittedOffset("g", "b", 1, 7, leader_epoch=None),
    ]


def test_a_dead_coordinator_fails_only_its_own_groups() -> None:
    fake = FakeOffsetFetch(down={"g3", "g7"})

    result = offsets_client(fake).committed_offsets([f"g{i}" for i in range(10)])

    assert set(result.value) == {f"g{i}" for i in range(10)} - {"g3", "g7"}
    assert set(result.errors) == {"g3", "g7"}
    assert "NodeNotReadyError" in result.errors["g3"]


def test_a_coordinator_that_did_not_answer_makes_the_next_call_use_a_new_client() -> None:
    # kafka-python keeps each group's coordinator for its client's lifetime.
    after_failure = offsets_client(FakeOffsetFetch(down={"g3"}))
    after_refusal = offsets_client(FakeOffsetFetch(refused={"g3"}))

    after_failure.committed_offsets(["g1", "g3"])
    after_refusal.committed_offsets(["g1", "g3"])

    assert after_failure._client is None
    assert after_refusal._client is not None


def test_committed_offsets_stop_asking_once_the_cluster_stopped_answering() -> None:
    groups = [f"g{i}" for i in range(200)]
    fake = FakeOffsetFetch(down=set(groups[1:]))

    result = offsets_client(fake).committed_offsets(groups, groups_per_request=50)

    assert set(result.value) == {"g0"}
    assert len(fake.calls) < 60, "a dead cluster costs a few failures, not one per group"
    assert set(result.errors) == set(groups[1:])
    assert "not asked" in result.errors["g199"]


def test_committed_offsets_with_nothing_answered_raise_unavailable() -> None:
    groups = [f"g{i}" for i in range(10)]
    with pytest.raises(KafkaUnavailableError, match="committed offsets"):
        offsets_client(FakeOffsetFetch(down=set(groups))).committed_offsets(groups)


def test_an_unknown_group_refused_by_the_cluster_is_reported_not_raised() -> None:
    result = offsets_client(FakeOffsetFetch(refused={"g1"})).committed_offsets(["g1", "g2"])

    assert set(result.value) == {"g2"}
    assert "GroupAuthorizationFailedError" in result.errors["g1"]


# -- kafka-python options and secrets ---------------------------------------------------------------


def sasl_ssl_cluster() -> ClusterConfig:
    return ClusterConfig(
        name="prod",
        bootstrap_servers=["b1.example.com:9093", "b2.example.com:9093"],
        request_timeout_seconds=7.5,
        security=Security(
            protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username="monitor",
            sasl_password=PASSWORD,
            ssl_ca_location=Path("certs/ca.pem"),
            ssl_certificate_location=Path("certs/client.pem"),
            ssl_key_location=Path("certs/client.key"),
            ssl_key_password=KEY_PASSWORD,
            ssl_endpoint_identification=False,
        ),
    )


def test_kafka_python_options_carry_the_same_security() -> None:
    options = kafka_python_options(sasl_ssl_cluster())

    assert dict(options) == {
        "bootstrap_servers": ["b1.example.com:9093", "b2.example.com:9093"],
        "client_id": "kafka-health-prod",
        "request_timeout_ms": 7500,
        "bootstrap_timeout_ms": 7500,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "monitor",
        "sasl_plain_password": PASSWORD,
        "ssl_cafile": "certs/ca.pem",
        "ssl_certfile": "certs/client.pem",
        "ssl_keyfile": "certs/client.key",
        "ssl_password": KEY_PASSWORD,
        "ssl_check_hostname": False,
    }


def test_kafka_python_options_for_plaintext_have_no_security_options() -> None:
    options = kafka_python_options(ClusterConfig(name="local", bootstrap_servers=["127.0.0.1:9092"]))

    assert {k for k in options if k.startswith(("sasl", "ssl"))} == set()
    assert options["security_protocol"] == "PLAINTEXT"


def test_kafka_python_passwords_are_usable_but_never_printed() -> None:
    options = kafka_python_options(sasl_ssl_cluster())
    password = options["sasl_plain_password"]
    assert isinstance(password, str)

    printed = [
        repr(options),
        str(options),
        f"{options}",
        repr(dict(options)),
        "%s" % dict(options),  # noqa: UP031 - how kafka-python logs its configuration
        str(password),
        f"{password}",
        "%s" % password,  # noqa: UP031
        repr(LogDirClient(sasl_ssl_cluster())),
    ]

    for text in printed:
        assert PASSWORD not in text
        assert KEY_PASSWORD not in text
    # What the SASL mechanisms do with it: the real characters.
    assert "\0".join(["monitor", "monitor", password]).encode() == f"monitor\0monitor\0{PASSWORD}".encode()
    assert password.encode("utf-8") == PASSWORD.encode("utf-8")
    assert options.secret_values() == [PASSWORD, KEY_PASSWORD]


def test_log_dirs_of_an_unreachable_cluster_raise_unavailable_without_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cluster = ClusterConfig(
        name="nowhere",
        bootstrap_servers=[f"127.0.0.1:{port}"],
        request_timeout_seconds=1,
        security=Security(
            protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="monitor", sasl_password=PASSWORD
        ),
    )
    caplog.set_level(logging.DEBUG)

    started = time.monotonic()
    with (
        LogDirClient(cluster) as client,
        pytest.raises(KafkaUnavailableError, match=f"127.0.0.1:{port}") as caught,
    ):
        client.describe([1])

    assert time.monotonic() - started < 1 + 3
    assert PASSWORD not in str(caught.value)
    assert "Starting KafkaAdminClient with configuration" in caplog.text
    assert PASSWORD not in caplog.text


def test_log_dirs_need_start_and_the_constructor_does_not_connect() -> None:
    client = LogDirClient(sasl_ssl_cluster())

    assert client._client is None
    with pytest.raises(RuntimeError, match="start"):
        client.describe([1])


def test_a_refused_request_is_a_request_error_with_secrets_scrubbed() -> None:
    client = LogDirClient(sasl_ssl_cluster())

    error = client._failed(
        "describe log dirs", kafka.errors.SaslAuthenticationFailedError(f"bad password {PASSWORD}")
    )

    assert isinstance(error, KafkaRequestError)
    assert PASSWORD not in str(error)
    assert "cannot describe log dirs on cluster 'prod': the cluster refused the request" in str(error)
