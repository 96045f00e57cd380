"""ListOffsets in chunks per leader: the plan, and the failure policy of one chunk against a fake
admin client whose brokers answer, fail or say nothing."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import PartitionOffsets
from monitor.core.settings import ClusterConfig
from monitor.kafka import KafkaAdmin
from monitor.kafka.listoffsets import plan_chunks

KINDS = {-2: "earliest", -1: "latest", -3: "max_timestamp"}


def test_chunks_are_of_one_leader_equal_in_size_and_interleaved() -> None:
    keys = [("t", p) for p in range(10)]
    leaders = {("t", p): p % 2 + 1 for p in range(9)}  # ("t", 9) has no known leader

    chunks = plan_chunks(keys, leaders, size=3)

    assert [(c.leader, c.keys) for c in chunks] == [
        (1, [("t", 0), ("t", 2), ("t", 4)]),
        (2, [("t", 1), ("t", 3)]),
        (None, [("t", 9)]),
        (1, [("t", 6), ("t", 8)]),
        (2, [("t", 5), ("t", 7)]),
    ]
    assert sorted(k for c in chunks for k in c.keys) == sorted(keys)


def test_without_leaders_the_partitions_are_split_in_order() -> None:
    keys = [("t", p) for p in range(2500)]

    chunks = plan_chunks(keys, None)

    assert [len(c.keys) for c in chunks] == [834, 834, 832]
    assert {c.leader for c in chunks} == {None}
    assert plan_chunks([], None) == []


class Brokers:
    """A fake AdminClient: each partition's leader answers, refuses or never answers."""

    def __init__(self, leaders: dict[tuple[str, int], int], silent: set[int] | None = None) -> None:
        self.leaders = leaders
        self.silent = silent or set()
        self.requests: list[tuple[int, str]] = []  # (leader, kind)
        self._lock = threading.Lock()

    def poll(self, timeout: float) -> int:
        return 0

    def __exit__(self, *exc_info: object) -> None:
        pass

    def list_offsets(self, request: dict[TopicPartition, Any], request_timeout: float) -> dict[Any, Any]:
        kind = KINDS[next(iter(request.values()))._value]
        futures: dict[Any, concurrent.futures.Future[Any]] = {}
        for tp in request:
            leader = self.leaders[(tp.topic, tp.partition)]
            with self._lock:
                self.requests.append((leader, kind))
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            if leader not in self.silent:
                answer = {"earliest": 1, "latest": 5 + tp.partition, "max_timestamp": -1}[kind]
                future.set_result(SimpleNamespace(offset=answer, timestamp=-1))
            futures[tp] = future
        return futures


def admin_with(client: object, timeout: float = 0.3) -> KafkaAdmin:
    admin = KafkaAdmin(
        ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"], request_timeout_seconds=timeout)
    )
    admin._client = client  # type: ignore[assignment]
    return admin


def test_a_silent_leader_fails_its_own_partitions_and_its_other_chunks_are_not_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("monitor.kafka.listoffsets.FUTURE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr("monitor.kafka.listoffsets.PARTITIONS_PER_CHUNK", 2)
    monkeypatch.setattr("monitor.kafka.listoffsets.CHUNKS_IN_FLIGHT", 1)  # broker 2's first chunk ends first
    monkeypatch.setattr("monitor.kafka.listoffsets.SEND_WINDOW", 10.0)
    leaders = {("t", p): p % 3 + 1 for p in range(12)}  # four partitions per broker
    brokers = Brokers(leaders, silent={2})
    admin = admin_with(brokers)

    started = time.monotonic()
    result = admin.list_offsets(list(leaders), leaders)
    elapsed = time.monotonic() - started

    assert set(result.value) == {k for k, leader in leaders.items() if leader != 2}
    assert result.value[("t", 0)] == PartitionOffsets("t", 0, 1, 5)
    lost = sorted(p for (_, p), leader in leaders.items() if leader == 2)
    assert set(result.errors) == {f"t:{p}" for p in lost}, "the run is partial, not failed"
    not_asked = [e for e in result.errors.values() if e.startswith("not asked")]
    assert len(not_asked) == 2, "broker 2's second chunk waits for nothing"
    assert sum(1 for leader, kind in brokers.requests if leader == 2 and kind == "latest") == 2
    assert elapsed < 0.3 + 0.5, "one timeout for the silent broker, not one per chunk"


def test_chunks_not_sent_within_the_send_window_are_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.kafka.listoffsets.FUTURE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr("monitor.kafka.listoffsets.PARTITIONS_PER_CHUNK", 1)
    monkeypatch.setattr("monitor.kafka.listoffsets.CHUNKS_IN_FLIGHT", 1)
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 1}  # sent in this order, one at a time
    brokers = Brokers(leaders, silent={2})

    started = time.monotonic()
    result = admin_with(brokers).list_offsets(list(leaders), leaders)

    assert time.monotonic() - started < 0.3 + 0.5
    assert set(result.value) == {("t", 0)}
    assert result.errors["t:1"] == "no answer within 0.3s"
    assert result.errors["t:2"] == "not asked: the other partitions took the whole 0.3s"


def test_chunks_of_a_refused_partition_and_answered_ones_are_partial() -> None:
    leaders = {("t", 0): 1, ("t", 1): 2}
    brokers = Brokers(leaders)
    refused = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))

    def list_offsets(request: dict[TopicPartition, Any], request_timeout: float) -> dict[Any, Any]:
        futures = Brokers.list_offsets(brokers, request, request_timeout)
        for tp, future in list(futures.items()):
            if tp.partition == 1:
                futures[tp] = concurrent.futures.Future()
                futures[tp].set_exception(refused)
            else:
                futures[tp] = future
        return futures

    brokers.list_offsets = list_offsets  # type: ignore[method-assign]
    result = admin_with(brokers).list_offsets([("t", 0), ("t", 1)], leaders)

    assert set(result.value) == {("t", 0)}
    assert result.errors == {"t:1": "Broker: Unknown topic or partition (UNKNOWN_TOPIC_OR_PART)"}


def test_a_silent_cluster_raises_within_about_one_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.kafka.listoffsets.FUTURE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr("monitor.kafka.listoffsets.PARTITIONS_PER_CHUNK", 1)
    leaders = {("t", p): 1 for p in range(20)}
    brokers = Brokers(leaders, silent={1})
    admin = admin_with(brokers)

    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match="cannot list offsets on cluster 'fake'"):
        admin.list_offsets(list(leaders))
    assert time.monotonic() - started < 0.3 * 2 + 0.5
    assert len({r for r in brokers.requests if r[1] == "latest"}) <= 1
    assert sum(1 for r in brokers.requests if r[1] == "latest") < 20, "not every chunk was sent"


def _held_back_latest(brokers: Brokers, held: set[int], earliest_too: bool = False) -> None:
    """Make `brokers` answer OFFSET_NOT_AVAILABLE for the latest offset of the partitions `held`
    (and for their earliest one too when `earliest_too`), as a Kafka 4 leader under min ISR does."""
    not_caught_up = KafkaException(
        KafkaError(KafkaError.OFFSET_NOT_AVAILABLE, "leader high watermark is not caught up")
    )

    def list_offsets(request: dict[TopicPartition, Any], request_timeout: float) -> dict[Any, Any]:
        kind = KINDS[next(iter(request.values()))._value]
        futures = Brokers.list_offsets(brokers, request, request_timeout)
        if kind == "latest" or (earliest_too and kind == "earliest"):
            for tp in list(futures):
                if tp.partition in held:
                    futures[tp] = concurrent.futures.Future()
                    futures[tp].set_exception(not_caught_up)
        return futures

    brokers.list_offsets = list_offsets  # type: ignore[method-assign]


def test_a_held_back_end_offset_is_its_own_outcome_not_a_failure() -> None:
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 2}
    brokers = Brokers(leaders)
    _held_back_latest(brokers, {1})

    result = admin_with(brokers).list_offsets(list(leaders), leaders)

    assert set(result.value) == {("t", 0), ("t", 2)}
    assert result.errors == {}, "the leader answered: nothing failed"
    held = result.held_back[("t", 1)]
    assert (held.topic, held.partition, held.start) == ("t", 1, 1)
    assert "OFFSET_NOT_AVAILABLE" in held.reason
    assert ("t", 2) not in result.held_back, "the leader's other partitions are listed as usual"


def test_a_held_back_partition_without_a_start_offset_says_so() -> None:
    leaders = {("t", 0): 1, ("t", 1): 1}
    brokers = Brokers(leaders)
    _held_back_latest(brokers, {0, 1}, earliest_too=True)

    result = admin_with(brokers).list_offsets(list(leaders), leaders)

    assert result.value == {}
    assert result.errors == {}
    assert {k: h.start for k, h in result.held_back.items()} == {("t", 0): None, ("t", 1): None}


def test_a_partition_whose_offsets_did_not_move_is_not_asked_its_max_timestamp() -> None:
    leaders = {("t", p): 1 for p in range(4)}
    brokers = Brokers(leaders)
    asked: dict[str, list[int]] = {}

    def list_offsets(request: dict[TopicPartition, Any], request_timeout: float) -> dict[Any, Any]:
        kind = KINDS[next(iter(request.values()))._value]
        asked.setdefault(kind, []).extend(tp.partition for tp in request)
        return Brokers.list_offsets(brokers, request, request_timeout)

    brokers.list_offsets = list_offsets  # type: ignore[method-assign]
    known = {
        ("t", 0): PartitionOffsets("t", 0, 1, 5, 4, 1_000),  # unmoved: start 1, end 5 + 0
        ("t", 1): PartitionOffsets("t", 1, 1, 5, 4, 1_000),  # its end moved to 6
        ("t", 2): PartitionOffsets("t", 2, 0, 7, 6, 2_000),  # its start moved to 1
        # ("t", 3): never listed
    }

    result = admin_with(brokers).list_offsets(list(leaders), leaders, known=known)

    assert sorted(asked["max_timestamp"]) == [1, 2, 3]
    assert sorted(asked["latest"]) == sorted(asked["earliest"]) == [0, 1, 2, 3]
    assert result.value[("t", 0)] == PartitionOffsets("t", 0, 1, 5, 4, 1_000), "the pair listed before"
    # The broker answers -1 (no record) for the ones asked: the known pair is not kept for them.
    assert result.value[("t", 1)] == PartitionOffsets("t", 1, 1, 6)
    assert result.value[("t", 2)] == PartitionOffsets("t", 2, 1, 7)
    assert result.value[("t", 3)] == PartitionOffsets("t", 3, 1, 8)


def test_a_known_partition_without_a_max_timestamp_is_asked_again() -> None:
    leaders = {("t", 0): 1}
    brokers = Brokers(leaders)

    admin_with(brokers).list_offsets(list(leaders), leaders, known={("t", 0): PartitionOffsets("t", 0, 1, 5)})

    assert [kind for _, kind in brokers.requests] == ["earliest", "latest", "max_timestamp"]


def test_a_silent_leader_of_known_partitions_still_costs_one_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.kafka.listoffsets.FUTURE_GRACE_SECONDS", 0.0)
    leaders = {("t", 0): 1, ("t", 1): 2}
    brokers = Brokers(leaders, silent={2})
    known = {key: PartitionOffsets("t", p, 1, 5 + p, 4, 1_000) for key in leaders for p in [key[1]]}

    started = time.monotonic()
    result = admin_with(brokers).list_offsets(list(leaders), leaders, known=known)

    assert time.monotonic() - started < 0.3 + 0.5
    assert set(result.value) == {("t", 0)}
    assert set(result.errors) == {"t:1"}
    assert (2, "max_timestamp") not in brokers.requests, "nothing asked after a silent first request"
