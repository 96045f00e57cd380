"""Committed offsets over OffsetFetch v8 (`monitor.kafka.groups`): one request per coordinator, all
sent at once, answered with kafka-python's encoding of the answer and decoded by
`monitor.kafka.wire`, and the failure policy of `GroupOffsetsClient` over them.

Nothing here connects to a broker (kafka-python's connection manager is faked on asyncio).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import kafka.errors
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

from monitor.core.records import CommittedOffset
from monitor.core.settings import ClusterConfig
from monitor.kafka.groups import GroupOffsetsClient, fetch_committed
from monitor.kafka.pyclient import Connection, newest_version
from monitor.kafka.wire import decode_offset_fetch
from tests.fixtures.kafka_python import FakeConnectionManager, connected

_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_Topic = _Group.OffsetFetchResponseTopics
_Partition = _Topic.OffsetFetchResponsePartitions


@dataclass
class Coordinators(FakeConnectionManager):
    """Brokers coordinating groups `g<n>` (broker n % 3): each group committed offset n on
    partition 0 of topic "t" and none on partition 1. Groups in `refused` answer
    GROUP_AUTHORIZATION_FAILED; brokers in `down` refuse the connection."""

    refused: set[str] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    moved: dict[str, int] = field(default_factory=dict)
    """Groups whose coordinator moved to another broker (answered NOT_COORDINATOR elsewhere)."""
    sent: list[tuple[int | None, int, list[str]]] = field(default_factory=list)
    found: list[list[str]] = field(default_factory=list)
    """The groups of each FindCoordinator request."""
    in_flight: int = 0
    most_in_flight: int = 0

    async def _answer(self, request: Any, node: int | None) -> Any:
        if type(request).__name__ == "FindCoordinatorRequest":
            return self._coordinators(request.coordinator_keys)
        groups = [str(g.group_id) for g in request.groups]
        self.sent.append((node, int(request.API_VERSION or request._max_version), groups))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.02)
        self.in_flight -= 1
        if node in self.down:
            raise kafka.errors.KafkaConnectionError("Node not connected")
        answer = OffsetFetchResponse(throttle_time_ms=0, groups=[self._group(g, node) for g in groups])
        return decode_offset_fetch(answer.encode(version=8), 8)

    def _coordinators(self, group_ids: list[str]) -> Any:
        self.found.append(list(group_ids))
        found = [
            SimpleNamespace(key=g, error_code=0, error_message=None, node_id=self._home(g)) for g in group_ids
        ]
        return SimpleNamespace(coordinators=found)

    def _home(self, group_id: str) -> int:
        return self.moved.get(group_id, int(group_id[1:]) % 3)

    def _group(self, group_id: str, node: int | None) -> Any:
        if node != self._home(group_id):
            return _Group(group_id=group_id, error_code=kafka.errors.NotCoordinatorError.errno, topics=[])
        if group_id in self.refused:
            return _Group(
                group_id=group_id, error_code=kafka.errors.GroupAuthorizationFailedError.errno, topics=[]
            )
        n = int(group_id[1:])
        partitions = [
            _Partition(
                partition_index=p, committed_offset=o, committed_leader_epoch=-1, metadata="", error_code=0
            )
            for p, o in ((0, n), (1, -1))
        ]
        return _Group(group_id=group_id, error_code=0, topics=[_Topic(name="t", partitions=partitions)])


def client_of(brokers: Coordinators) -> Connection:
    return connected(
        brokers, SimpleNamespace(api_versions=lambda: {ApiKey.OffsetFetch: (0, 10)}, close=lambda: None)
    )


def fetch(brokers: Coordinators, groups: list[str], known: dict[str, int] | None = None) -> Any:
    return fetch_committed(client_of(brokers), groups, {} if known is None else known, 10)


def offsets_client(brokers: Coordinators) -> GroupOffsetsClient:
    client = GroupOffsetsClient(ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"]))
    client._client = client_of(brokers)
    client.start()
    return client


def test_one_request_per_coordinator_all_in_flight_at_once() -> None:
    brokers = Coordinators()
    groups = [f"g{i}" for i in range(9)]

    found = fetch(brokers, groups)

    assert sorted((node, asked) for node, _, asked in brokers.sent) == [
        (0, ["g0", "g3", "g6"]),
        (1, ["g1", "g4", "g7"]),
        (2, ["g2", "g5", "g8"]),
    ]
    assert brokers.most_in_flight == 3
    assert found == {g: [CommittedOffset(g, "t", 0, int(g[1:]), leader_epoch=None)] for g in groups}


def test_the_requests_are_offset_fetch_v8() -> None:
    brokers = Coordinators()

    fetch(brokers, ["g1"])

    assert [version for _, version, _ in brokers.sent] == [8]


def test_a_refused_group_fails_alone_and_keeps_the_client() -> None:
    client = offsets_client(Coordinators(refused={"g4"}))

    result = client.committed_offsets([f"g{i}" for i in range(6)])

    assert set(result.value) == {"g0", "g1", "g2", "g3", "g5"}
    assert result.value["g5"] == [CommittedOffset("g5", "t", 0, 5)]
    assert set(result.errors) == {"g4"}
    assert "GroupAuthorizationFailedError" in result.errors["g4"]
    assert client._client is not None


def test_a_dead_coordinator_fails_its_own_groups_and_the_next_call_connects_afresh() -> None:
    client = offsets_client(Coordinators(down={2}))

    result = client.committed_offsets([f"g{i}" for i in range(6)])

    assert set(result.value) == {"g0", "g1", "g3", "g4"}
    assert set(result.errors) == {"g2", "g5"}
    assert "KafkaConnectionError" in result.errors["g2"]
    assert client._client is None, "a group's coordinator is kept for its client's lifetime"


def test_a_group_is_looked_up_once_per_client_and_afresh_after_its_coordinator_failed() -> None:
    brokers = Coordinators()
    client = offsets_client(brokers)
    groups = [f"g{i}" for i in range(4)]

    client.committed_offsets(groups)
    client.committed_offsets([*groups, "g9"])
    assert brokers.found == [groups, ["g9"]]

    brokers.down = {0}
    assert set(client.committed_offsets(["g0", "g1"]).errors) == {"g0"}
    assert client._client is None
    client._client = client_of(brokers)  # the next connection
    client.committed_offsets(["g0", "g1"])
    assert brokers.found[2:] == [["g0", "g1"]], "the failed call's client forgot where its groups were"


def test_a_group_whose_coordinator_moved_is_found_again_and_answered_in_the_same_call() -> None:
    brokers = Coordinators()
    client = offsets_client(brokers)
    groups = [f"g{i}" for i in range(6)]
    client.committed_offsets(groups)

    brokers.moved = {"g1": 2, "g4": 0}  # broker 1 restarted: its groups went elsewhere
    result = client.committed_offsets(groups)

    assert result.errors == {}
    assert result.value["g4"] == [CommittedOffset("g4", "t", 0, 4)]
    assert brokers.found[1:] == [["g1", "g4"]], "only the moved groups are looked up again"
    assert client._client is not None


def test_a_group_whose_coordinator_keeps_moving_fails_alone() -> None:
    class Restless(Coordinators):
        def _group(self, group_id: str, node: int | None) -> Any:
            return super()._group(group_id, None if group_id == "g1" else node)

    brokers = Restless()
    result = offsets_client(brokers).committed_offsets([f"g{i}" for i in range(3)])

    assert set(result.value) == {"g0", "g2"}
    assert "NotCoordinatorError" in result.errors["g1"]


def _listing_unknown_api() -> dict[ApiKey, tuple[int, int]]:
    raise ValueError("93 is not a valid ApiKey")  # kafka-python on a Kafka 4.4 broker


@pytest.mark.parametrize(("negotiated", "expected"), [(10, 10), (7, 7), (None, -1)])
def test_the_offset_fetch_version_is_known_when_the_broker_lists_an_api_unknown_to_the_client(
    negotiated: int | None, expected: int
) -> None:
    def api_version(request: Any) -> int:
        if negotiated is None:
            raise kafka.errors.IncompatibleBrokerVersion("no OffsetFetch")
        return negotiated

    client = connected(
        SimpleNamespace(api_version=api_version), SimpleNamespace(api_versions=_listing_unknown_api)
    )

    assert newest_version(client, OffsetFetchRequest) == expected
