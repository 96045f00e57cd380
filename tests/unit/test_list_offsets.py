"""ListOffsets asked of the leaders (`monitor.kafka.listoffsets`): the plan of the requests, and
the failure policy against a fake of kafka-python's connection manager on asyncio whose brokers
answer from a table, refuse partitions, do not lead them any more, or say nothing.

Nothing here connects to a broker.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import kafka.errors
import pytest
from confluent_kafka import KafkaError

from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import PartitionOffsets, TopicPartition
from monitor.core.settings import ClusterConfig
from monitor.kafka import KafkaAdmin
from monitor.kafka.listoffsets import EARLIEST, LATEST, MAX_TIMESTAMP, plan_requests
from monitor.kafka.wire import ListOffsetsAnswer
from tests.fixtures.kafka_python import FakeConnectionManager, connected

KINDS = {EARLIEST: "earliest", LATEST: "latest", MAX_TIMESTAMP: "max_timestamp"}
HELD_BACK = KafkaError.OFFSET_NOT_AVAILABLE


def test_requests_are_of_one_leader_and_equal_in_size() -> None:
    keys = [("t", p) for p in range(10)]
    leaders = {("t", p): p % 2 + 1 for p in range(10)}

    planned = plan_requests(keys, leaders, size=4)

    assert planned == [
        (1, [("t", 0), ("t", 2), ("t", 4)]),
        (1, [("t", 6), ("t", 8)]),
        (2, [("t", 1), ("t", 3), ("t", 5)]),
        (2, [("t", 7), ("t", 9)]),
    ]
    assert plan_requests([], leaders) == []


@dataclass
class Brokers(FakeConnectionManager):
    """kafka-python's connection manager on asyncio, with brokers that answer ListOffsets and
    Metadata from tables.

    `leaders`: each partition's current leader (a broker asked for a partition it does not lead
    answers NOT_LEADER_OR_FOLLOWER); a partition answers start 1, end 5 + its number and the max
    timestamp pair (end - 1, 1000 * end), unless `codes` has an error for it and a kind;
    `silent`: brokers that never answer; `down`: brokers that refuse the connection at once.
    """

    leaders: dict[TopicPartition, int]
    codes: dict[tuple[TopicPartition, str], int] = field(default_factory=dict)
    silent: set[int] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    sent: list[tuple[int | None, str, list[TopicPartition]]] = field(default_factory=list)

    def asked(self, kind: str) -> list[int]:
        return sorted(p for _, k, keys in self.sent for _, p in keys if k == kind)

    async def _answer(self, request: Any, node: int | None) -> Any:
        if type(request).__name__ == "MetadataRequest":
            self.sent.append((node, "metadata", []))
            return self._metadata([str(t.name) for t in request.topics])
        kind = KINDS[request.topics[0].partitions[0].timestamp]
        keys = [(str(t.name), int(p.partition_index)) for t in request.topics for p in t.partitions]
        self.sent.append((node, kind, keys))
        if node in self.silent:
            await asyncio.sleep(3600)
        if node in self.down:
            raise kafka.errors.KafkaConnectionError("Node not connected")
        return ListOffsetsAnswer(0, {key: self._partition(*key, kind, node) for key in keys})

    def _partition(self, topic: str, partition: int, kind: str, node: int | None) -> tuple[int, int, int]:
        key = (topic, partition)
        code = self.codes.get((key, kind), 0)
        if self.leaders.get(key) != node:
            code = KafkaError.NOT_LEADER_FOR_PARTITION
        end = 5 + partition
        offset, timestamp = {
            "earliest": (1, -1),
            "latest": (end, -1),
            "max_timestamp": (end - 1, 1000 * end),
        }[kind]
        if code:
            offset, timestamp = -1, -1
        return (code, offset, timestamp)

    def _metadata(self, topics: list[str]) -> SimpleNamespace:
        answer = []
        for name in topics:
            partitions = [
                SimpleNamespace(partition_index=p, error_code=0, leader_id=leader)
                for (t, p), leader in sorted(self.leaders.items())
                if t == name
            ]
            code = 0 if partitions else KafkaError.UNKNOWN_TOPIC_OR_PART
            answer.append(SimpleNamespace(name=name, error_code=code, partitions=partitions))
        return SimpleNamespace(topics=answer)


def admin_with(brokers: Brokers, timeout: float = 0.3) -> KafkaAdmin:
    admin = KafkaAdmin(
        ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"], request_timeout_seconds=timeout)
    )
    admin._offsets._client = connected(brokers)
    admin._offsets.start()
    return admin


@pytest.fixture(autouse=True)
def _no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.kafka.listoffsets.FUTURE_GRACE_SECONDS", 0.0)


def test_every_leader_is_asked_once_per_kind_for_all_its_partitions() -> None:
    leaders = {("t", p): p % 3 + 1 for p in range(12)}
    brokers = Brokers(leaders)

    result = admin_with(brokers).list_offsets(list(leaders), leaders)

    assert result.errors == {}
    assert result.value[("t", 4)] == PartitionOffsets("t", 4, 1, 9, 8, 9_000)
    assert len(result.value) == 12
    requests = sorted((node, kind) for node, kind, _ in brokers.sent)
    assert requests == [(n, k) for n in (1, 2, 3) for k in ("earliest", "latest", "max_timestamp")]


def test_the_end_offsets_alone_are_one_request_per_leader() -> None:
    leaders = {("t", p): p % 3 + 1 for p in range(12)}
    brokers = Brokers(leaders, silent={3})

    result = admin_with(brokers).list_end_offsets(list(leaders), leaders)

    assert result.value[("t", 4)] == 9 and len(result.value) == 8
    assert set(result.errors) == {f"t:{p}" for (_, p), leader in leaders.items() if leader == 3}
    assert sorted((node, kind) for node, kind, _ in brokers.sent) == [(n, "latest") for n in (1, 2, 3)]


def test_a_silent_leader_fails_its_own_partitions_within_one_timeout() -> None:
    leaders = {("t", p): p % 3 + 1 for p in range(12)}
    brokers = Brokers(leaders, silent={2})

    started = time.monotonic()
    result = admin_with(brokers).list_offsets(list(leaders), leaders)
    elapsed = time.monotonic() - started

    assert set(result.value) == {k for k, leader in leaders.items() if leader != 2}
    lost = sorted(p for (_, p), leader in leaders.items() if leader == 2)
    assert set(result.errors) == {f"t:{p}" for p in lost}, "the run is partial, not failed"
    assert all("broker 2 did not answer within 0.3s" in e for e in result.errors.values())
    assert elapsed < 0.3 + 0.5, "one timeout for the silent broker, not one per request"


def test_a_refused_partition_fails_alone_with_the_brokers_reason() -> None:
    leaders = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2}
    brokers = Brokers(
        leaders,
        codes={
            (("t", 1), "earliest"): KafkaError.UNKNOWN_TOPIC_OR_PART,
            (("t", 1), "latest"): KafkaError.UNKNOWN_TOPIC_OR_PART,
            (("t", 2), "max_timestamp"): KafkaError.UNSUPPORTED_VERSION,
        },
    )

    result = admin_with(brokers).list_offsets(list(leaders), leaders)

    assert result.value == {
        ("t", 0): PartitionOffsets("t", 0, 1, 5, 4, 5_000),
        ("t", 2): PartitionOffsets("t", 2, 1, 7),  # its max timestamp alone failed
    }
    assert result.errors == {"t:1": "Broker: Unknown topic or partition (UNKNOWN_TOPIC_OR_PART)"}


def test_a_silent_cluster_raises_within_about_one_timeout() -> None:
    leaders = {("t", p): 1 for p in range(20)}
    admin = admin_with(Brokers(leaders, silent={1}))

    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match="cannot list offsets on cluster 'fake'"):
        admin.list_offsets(list(leaders), leaders)
    assert time.monotonic() - started < 0.3 + 0.5
    assert admin._offsets._client is None, "the next call connects afresh"


def test_a_moved_leader_is_found_and_asked_once_more() -> None:
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}
    stale = {**leaders, ("t", 1): 3}  # the hint: ("t", 1) moved from broker 3 to broker 2
    brokers = Brokers(leaders)

    result = admin_with(brokers).list_offsets(list(leaders), stale)

    assert result.errors == {}
    assert result.value[("t", 1)] == PartitionOffsets("t", 1, 1, 6, 5, 6_000)
    assert [kind for _, kind, _ in brokers.sent].count("metadata") == 1
    assert (2, "latest", [("t", 1)]) in brokers.sent


def test_partitions_of_a_broker_that_refuses_connections_are_asked_of_their_new_leader() -> None:
    leaders = {("t", 0): 1, ("t", 1): 1}
    brokers = Brokers(leaders, down={2})

    result = admin_with(brokers).list_offsets(list(leaders), {("t", 0): 1, ("t", 1): 2})

    assert result.errors == {}
    assert set(result.value) == {("t", 0), ("t", 1)}


def test_partitions_without_a_leader_hint_are_looked_up() -> None:
    leaders = {("t", 0): 1, ("u", 0): 2}
    brokers = Brokers(leaders)

    result = admin_with(brokers).list_offsets([("t", 0), ("u", 0), ("gone", 0)])

    assert set(result.value) == {("t", 0), ("u", 0)}
    assert result.errors == {"gone:0": "Broker: Unknown topic or partition (UNKNOWN_TOPIC_OR_PART)"}


def test_a_held_back_end_offset_is_its_own_outcome_not_a_failure() -> None:
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 2}
    brokers = Brokers(leaders, codes={(("t", 1), "latest"): HELD_BACK})

    result = admin_with(brokers).list_offsets(list(leaders), leaders)

    assert set(result.value) == {("t", 0), ("t", 2)}
    assert result.errors == {}, "the leader answered: nothing failed"
    held = result.held_back[("t", 1)]
    assert (held.topic, held.partition, held.start) == ("t", 1, 1)
    assert "OFFSET_NOT_AVAILABLE" in held.reason
    assert ("t", 2) not in result.held_back, "the leader's other partitions are listed as usual"


def test_a_held_back_partition_without_a_start_offset_says_so() -> None:
    leaders = {("t", 0): 1, ("t", 1): 1}
    codes = {(key, kind): HELD_BACK for key in leaders for kind in ("earliest", "latest")}

    result = admin_with(Brokers(leaders, codes=codes)).list_offsets(list(leaders), leaders)

    assert result.value == {}
    assert result.errors == {}
    assert {k: h.start for k, h in result.held_back.items()} == {("t", 0): None, ("t", 1): None}


def test_a_partition_whose_offsets_did_not_move_is_not_asked_its_max_timestamp() -> None:
    leaders = {("t", p): 1 for p in range(5)}
    brokers = Brokers(leaders)
    known = {
        ("t", 0): PartitionOffsets("t", 0, 1, 5, 4, 1_000),  # unmoved: start 1, end 5 + 0
        ("t", 1): PartitionOffsets("t", 1, 1, 5, 4, 1_000),  # its end moved to 6
        ("t", 2): PartitionOffsets("t", 2, 0, 7, 6, 2_000),  # its start moved to 1
        ("t", 3): PartitionOffsets("t", 3, 1, 8),  # unmoved, but no max timestamp listed
        # ("t", 4): never listed
    }

    result = admin_with(brokers).list_offsets(list(leaders), leaders, known=known)

    assert brokers.asked("max_timestamp") == [1, 2, 3, 4]
    assert brokers.asked("latest") == brokers.asked("earliest") == [0, 1, 2, 3, 4]
    assert result.value[("t", 0)] == known[("t", 0)], "the pair listed before"
    assert result.value[("t", 1)] == PartitionOffsets("t", 1, 1, 6, 5, 6_000)
    assert result.value[("t", 2)] == PartitionOffsets("t", 2, 1, 7, 6, 7_000)
    assert result.value[("t", 3)] == PartitionOffsets("t", 3, 1, 8, 7, 8_000)


def test_a_silent_leader_of_known_partitions_still_costs_one_timeout() -> None:
    leaders = {("t", 0): 1, ("t", 1): 2}
    brokers = Brokers(leaders, silent={2})
    known = {("t", p): PartitionOffsets("t", p, 1, 6 + p, 4, 1_000) for p in (0, 1)}  # both moved

    started = time.monotonic()
    result = admin_with(brokers).list_offsets(list(leaders), leaders, known=known)

    assert time.monotonic() - started < 0.3 + 0.5
    assert set(result.value) == {("t", 0)}
    assert set(result.errors) == {"t:1"}
    assert (2, "max_timestamp") not in [(n, k) for n, k, _ in brokers.sent], "nothing asked after silence"


def test_many_requests_to_one_broker_go_a_few_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.kafka.listoffsets.PARTITIONS_PER_REQUEST", 2)
    leaders = {("t", p): 1 for p in range(20)}
    brokers = Brokers(leaders)
    in_flight = [0, 0]  # now, most
    answer = brokers._answer

    async def counted(request: Any, node: int | None) -> Any:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(0.01)
        try:
            return await answer(request, node)
        finally:
            in_flight[0] -= 1

    brokers._answer = counted  # type: ignore[method-assign]
    result = admin_with(brokers, timeout=5).list_offsets(list(leaders), leaders)

    assert len(result.value) == 20 and result.errors == {}
    assert len(brokers.sent) == 30, "ten requests of two partitions per kind"
    assert in_flight[1] <= 4, "kafka-python refuses a fifth request in flight on one connection"


def test_a_cluster_that_cannot_be_reached_at_all_raises_unavailable() -> None:
    admin = KafkaAdmin(
        ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"], request_timeout_seconds=0.3)
    )
    admin._offsets.start()

    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match=r"cluster 'fake'.*127\.0\.0\.1:9"):
        admin.list_offsets([("t", 0)], {("t", 0): 1})
    assert time.monotonic() - started < 5
