"""Describing consumer groups through kafka-python (`monitor.kafka.describe`): the three steps
(FindCoordinator, DescribeGroups, ConsumerGroupDescribe) and their failure policy against a fake
of kafka-python's connection manager on asyncio, the mappings to records, and our
ConsumerGroupDescribe messages on the wire.

Nothing here connects to a broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import kafka.errors
import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import GroupDescription, GroupMember
from monitor.core.settings import ClusterConfig
from monitor.kafka import describe, paced
from monitor.kafka.describe import GroupDescribeClient, classic_assignment, unwatched_of
from monitor.kafka.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from tests.fixtures.kafka_python import FakeConnectionManager, connected

NOT_FOUND = kafka.errors.GroupIdNotFoundError.errno


def assignment_bytes(partitions: dict[str, list[int]]) -> bytes:
    """A classic consumer's assignment as its group leader writes it."""
    topics = [ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=p) for t, p in partitions.items()]
    encoded: bytes = ConsumerProtocolAssignment(
        version=0, assigned_partitions=topics, user_data=None
    ).encode()
    return encoded


def classic(
    group_id: str,
    state: str = "Stable",
    members: Iterable[SimpleNamespace] = (),
    protocol_type: str = "consumer",
    protocol: str = "range",
    error_code: int = 0,
) -> SimpleNamespace:
    return SimpleNamespace(
        error_code=error_code,
        error_message=None,
        group_id=group_id,
        group_state=state,
        protocol_type=protocol_type,
        protocol_data=protocol,
        members=list(members),
    )


def classic_member(member_id: str, partitions: dict[str, list[int]]) -> SimpleNamespace:
    return SimpleNamespace(
        member_id=member_id,
        group_instance_id=None,
        client_id=f"client-{member_id}",
        client_host="/10.0.0.7",
        member_metadata=b"",
        member_assignment=assignment_bytes(partitions),
    )


def unknown(group_id: str, error_code: int = NOT_FOUND) -> SimpleNamespace:
    """What either describe answers for a group it does not know."""
    return SimpleNamespace(
        error_code=error_code,
        error_message=f"Group {group_id} not found.",
        group_id=group_id,
        group_state="Dead",
        protocol_type="",
        protocol_data="",
        members=[],
    )


def consumer(
    group_id: str, members: Iterable[SimpleNamespace] = (), state: str = "Stable"
) -> SimpleNamespace:
    return SimpleNamespace(
        error_code=0,
        error_message=None,
        group_id=group_id,
        group_state=state,
        assignor_name="uniform",
        members=list(members),
    )


def consumer_member(member_id: str, partitions: dict[str, list[int]]) -> SimpleNamespace:
    topics = [SimpleNamespace(topic_name=t, partitions=p) for t, p in partitions.items()]
    return SimpleNamespace(
        member_id=member_id,
        instance_id="static-1",
        client_id=f"client-{member_id}",
        client_host="/10.0.0.8",
        assignment=SimpleNamespace(topic_partitions=topics),
    )


Failure = Callable[[], Awaitable[Any]]


@dataclass
class FakeManager(FakeConnectionManager):
    """kafka-python's connection manager on asyncio, with brokers that answer from tables.

    `coordinators`: group -> broker; `classic`/`consumer`: what DescribeGroups and
    ConsumerGroupDescribe answer per group (unknown groups get GROUP_ID_NOT_FOUND); `broken`:
    broker -> what a request to it raises (or awaits forever); `find_failures`: exceptions the
    next FindCoordinator requests raise, one each.
    """

    coordinators: dict[str, int]
    classic: dict[str, SimpleNamespace] = field(default_factory=dict)
    consumer: dict[str, SimpleNamespace] = field(default_factory=dict)
    broken: dict[int, BaseException | None] = field(default_factory=dict)
    find_failures: list[BaseException] = field(default_factory=list)
    no_batched_find: bool = False
    no_consumer_describe: bool = False
    sent: list[tuple[str, int | None, list[str]]] = field(default_factory=list)

    def requests(self, name: str) -> list[tuple[int | None, list[str]]]:
        return [(node, groups) for kind, node, groups in self.sent if kind == name]

    async def _answer(self, request: Any, node: int | None) -> Any:
        name = type(request).__name__
        if name == "FindCoordinatorRequest":
            return self._find(request)
        self.sent.append(
            (name, node, list(request.groups if name == "DescribeGroupsRequest" else request.group_ids))
        )
        if node in self.broken:
            failure = self.broken[node]
            if failure is None:
                await asyncio.sleep(3600)
            raise failure  # type: ignore[misc]
        if name == "DescribeGroupsRequest":
            return SimpleNamespace(groups=[self.classic.get(g) or unknown(g) for g in request.groups])
        if self.no_consumer_describe:
            raise kafka.errors.IncompatibleBrokerVersion("no ConsumerGroupDescribe")
        return SimpleNamespace(groups=[self.consumer.get(g) or unknown(g) for g in request.group_ids])

    def _find(self, request: Any) -> Any:
        batched = bool(request.coordinator_keys)
        self.sent.append(
            ("FindCoordinatorRequest", None, list(request.coordinator_keys) if batched else [request.key])
        )
        if batched and self.no_batched_find:
            raise kafka.errors.IncompatibleBrokerVersion("FindCoordinator v4")
        if self.find_failures:
            raise self.find_failures.pop(0)

        def answer(key: str) -> SimpleNamespace:
            node = self.coordinators.get(key)
            code = 0 if node is not None else kafka.errors.CoordinatorNotAvailableError.errno
            return SimpleNamespace(key=key, error_code=code, error_message=None, node_id=node or -1)

        if batched:
            return SimpleNamespace(coordinators=[answer(k) for k in request.coordinator_keys])
        return answer(request.key)


def client_with(manager: FakeManager, timeout: float = 10) -> GroupDescribeClient:
    client = GroupDescribeClient(
        ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"], request_timeout_seconds=timeout)
    )
    client._client = connected(manager)
    client.start()
    return client


# -- the three steps -------------------------------------------------------------------------------


def test_classic_kip848_simple_and_unknown_groups_are_described() -> None:
    manager = FakeManager(
        coordinators={"billing": 1, "orders-848": 2, "committer": 2, "nope": 3, "old-dead": 3},
        classic={
            "billing": classic("billing", members=[classic_member("m-2", {"orders": [3, 1]})]),
            "committer": classic("committer", state="Empty", protocol_type="", protocol=""),
            "old-dead": unknown("old-dead", error_code=0),  # DescribeGroups before v6
        },
        consumer={"orders-848": consumer("orders-848", [consumer_member("x", {"orders": [2, 0]})])},
    )

    result = client_with(manager).describe_groups(["nope", "billing", "orders-848", "committer", "old-dead"])

    assert result.errors == {}
    assert result.value == [
        GroupDescription("nope", "Dead", "", None, 3, ()),
        GroupDescription(
            "billing",
            "Stable",
            "consumer",
            "range",
            1,
            (GroupMember("m-2", "client-m-2", "/10.0.0.7", (("orders", 1), ("orders", 3))),),
        ),
        GroupDescription(
            "orders-848",
            "Stable",
            "consumer",
            "uniform",
            2,
            (GroupMember("x", "client-x", "/10.0.0.8", (("orders", 0), ("orders", 2)), "static-1"),),
        ),
        GroupDescription("committer", "Empty", "", None, 2, (), is_simple=True),
        GroupDescription("old-dead", "Dead", "", None, 3, ()),
    ]
    # Only the groups DescribeGroups did not know are asked as KIP-848 groups, each of its own coordinator.
    assert sorted(manager.requests("ConsumerGroupDescribeRequest")) == [
        (2, ["orders-848"]),
        (3, ["nope", "old-dead"]),
    ]


def test_one_find_coordinator_and_one_describe_per_coordinator_and_chunk() -> None:
    groups = [f"g{i}" for i in range(250)]
    manager = FakeManager(
        coordinators={g: 1 + i % 2 for i, g in enumerate(groups)},
        classic={g: classic(g, state="Empty") for g in groups},
    )

    result = client_with(manager).describe_groups(groups, groups_per_request=100)

    assert result.errors == {}
    assert [d.group_id for d in result.value] == groups
    assert len(manager.requests("FindCoordinatorRequest")) == 1
    assert sorted((node, len(chunk)) for node, chunk in manager.requests("DescribeGroupsRequest")) == [
        (1, 25),
        (1, 100),
        (2, 25),
        (2, 100),
    ]
    assert manager.requests("ConsumerGroupDescribeRequest") == []


@pytest.mark.parametrize(
    ("connection_takes", "client_limit", "groups", "per_request"),
    [
        (5, 5, 2_000, 10),  # 200 describes on 3 coordinators, kafka-python's default limit
        (2, 5, 600, 10),  # the connection pauses before our share is used up: sent again
        (1, 1, 300, 5),  # one request at a time, the client configured so
    ],
)
def test_many_describes_to_a_coordinator_are_paced_and_every_group_is_described(
    connection_takes: int, client_limit: int, groups: int, per_request: int
) -> None:
    # Sent all at once, a connection past its in-flight limit failed the rest at once ("Node
    # paused: max_in_flight"): 3,500 of 5,000 groups undescribed at 1M group-partitions.
    ids = [f"g{i}" for i in range(groups)]
    manager = FakeManager(
        coordinators={g: 1 + i % 3 for i, g in enumerate(ids)},
        classic={g: classic(g, state="Empty") for g in ids[::2]},
    )
    manager.max_in_flight = connection_takes
    client = client_with(manager)
    client._client = connected(manager, max_in_flight=client_limit)

    result = client.describe_groups(ids, groups_per_request=per_request)

    assert result.errors == {}
    assert [(d.group_id, d.state) for d in result.value] == [
        (g, "Empty" if i % 2 == 0 else "Dead") for i, g in enumerate(ids)
    ]
    assert (manager.paused_sends > 0) == (connection_takes < client_limit - 1)


def test_a_dead_coordinator_fails_only_its_own_groups() -> None:
    groups = {f"g{i}": 1 + i % 3 for i in range(9)}
    manager = FakeManager(
        coordinators=groups,
        classic={g: classic(g) for g in groups},
        broken={2: kafka.errors.KafkaConnectionError("111 ECONNREFUSED")},
    )

    result = client_with(manager).describe_groups(list(groups))

    assert {d.group_id for d in result.value} == {g for g, node in groups.items() if node != 2}
    assert set(result.errors) == {g for g, node in groups.items() if node == 2}
    assert "ECONNREFUSED" in result.errors["g1"]


def test_a_coordinator_that_never_answers_costs_one_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(describe, "_GRACE_SECONDS", 0.1)
    manager = FakeManager(coordinators={"a": 1, "b": 2}, classic={"a": classic("a")}, broken={2: None})

    started = time.monotonic()
    result = client_with(manager, timeout=0.2).describe_groups(["a", "b"])

    assert time.monotonic() - started < 2
    assert [d.group_id for d in result.value] == ["a"]
    assert set(result.errors) == {"b"}


def test_a_coordinator_that_never_answers_costs_one_timeout_however_many_requests_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(describe, "_GRACE_SECONDS", 0.1)
    monkeypatch.setattr(paced, "FUTURE_GRACE_SECONDS", 0.1)
    groups = {f"g{i}": 1 + i % 2 for i in range(100)}
    manager = FakeManager(coordinators=groups, classic={g: classic(g) for g in groups}, broken={2: None})

    started = time.monotonic()
    result = client_with(manager, timeout=0.3).describe_groups(list(groups), groups_per_request=5)

    assert time.monotonic() - started < 2
    assert {d.group_id for d in result.value} == {g for g, node in groups.items() if node == 1}
    assert set(result.errors) == {g for g, node in groups.items() if node == 2}


def test_find_coordinator_is_asked_once_more_when_its_broker_did_not_answer() -> None:
    manager = FakeManager(
        coordinators={"a": 1},
        classic={"a": classic("a")},
        find_failures=[kafka.errors.NodeNotReadyError(3)],
    )

    result = client_with(manager).describe_groups(["a"])

    assert result.errors == {}
    assert len(manager.requests("FindCoordinatorRequest")) == 2


def test_a_group_without_a_coordinator_fails_alone() -> None:
    manager = FakeManager(coordinators={"a": 1}, classic={"a": classic("a")})

    result = client_with(manager).describe_groups(["a", "moving"])

    assert [d.group_id for d in result.value] == ["a"]
    assert "CoordinatorNotAvailableError" in result.errors["moving"]


def test_a_refused_group_is_reported_not_raised() -> None:
    denied = kafka.errors.GroupAuthorizationFailedError.errno
    manager = FakeManager(
        coordinators={"a": 1, "secret": 1},
        classic={"a": classic("a"), "secret": classic("secret", error_code=denied)},
    )

    result = client_with(manager).describe_groups(["a", "secret"])

    assert [d.group_id for d in result.value] == ["a"]
    assert "GroupAuthorizationFailedError" in result.errors["secret"]


def test_nothing_answered_because_the_cluster_did_not_raises_unavailable() -> None:
    down = kafka.errors.KafkaConnectionError("111 ECONNREFUSED")
    manager = FakeManager(coordinators={"a": 1}, find_failures=[down, down])

    with pytest.raises(KafkaUnavailableError, match="describe consumer groups"):
        client_with(manager).describe_groups(["a", "b"])


def test_a_broker_without_consumer_group_describe_has_no_kip848_groups() -> None:
    manager = FakeManager(
        coordinators={"a": 1, "gone": 1}, classic={"a": classic("a")}, no_consumer_describe=True
    )

    result = client_with(manager).describe_groups(["a", "gone"])

    assert result.errors == {}
    assert [(d.group_id, d.state) for d in result.value] == [("a", "Stable"), ("gone", "Dead")]


@pytest.mark.parametrize(
    ("listed", "unwatched"),
    [
        ([{"group_id": "a", "group_type": "classic"}, {"group_id": "b", "group_type": "consumer"}], {}),
        ([{"group_id": "old", "protocol_type": "consumer"}], {}),  # before 3.8: no type, a consumer group
        (
            [{"group_id": "q", "group_type": "share"}, {"group_id": "s", "group_type": "Streams"}],
            {"q": "share", "s": "streams"},
        ),
        ([{"group_id": "x", "group_type": None}, {"group_id": "y", "group_type": ""}], {}),
        ([{"group_id": "z", "group_type": "some-future-type"}], {"z": "some-future-type"}),
    ],
)
def test_groups_of_types_not_watched_are_told_apart(
    listed: list[dict[str, object]], unwatched: dict[str, str]
) -> None:
    assert unwatched_of(listed) == unwatched


def test_listing_groups_of_every_type_never_raises() -> None:
    client = GroupDescribeClient(ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"]))

    def refuse() -> None:
        raise kafka.errors.KafkaConnectionError("no broker")

    client._client = SimpleNamespace(list_groups=refuse, close=lambda: None)  # type: ignore[assignment]
    client.start()

    assert client.unwatched_groups() == {}


def test_a_broker_with_the_kip848_protocol_switched_off_has_no_kip848_groups() -> None:
    # Kafka 3.7 to 3.9 list ConsumerGroupDescribe but refuse it per group, UNSUPPORTED_VERSION.
    refused = kafka.errors.UnsupportedVersionError.errno
    manager = FakeManager(
        coordinators={"a": 1, "gone": 2},
        classic={"a": classic("a")},
        consumer={"gone": unknown("gone", refused)},
    )

    result = client_with(manager).describe_groups(["a", "gone"])

    assert result.errors == {}
    assert [(d.group_id, d.state, d.coordinator) for d in result.value] == [
        ("a", "Stable", 1),
        ("gone", "Dead", 2),
    ]


def test_brokers_before_kafka_3_are_asked_for_one_coordinator_at_a_time() -> None:
    manager = FakeManager(
        coordinators={"a": 1, "b": 2}, classic={"a": classic("a"), "b": classic("b")}, no_batched_find=True
    )

    result = client_with(manager).describe_groups(["a", "b"])

    assert [(d.group_id, d.coordinator) for d in result.value] == [("a", 1), ("b", 2)]
    assert manager.requests("FindCoordinatorRequest") == [(None, ["a", "b"]), (None, ["a"]), (None, ["b"])]


def test_describing_needs_start_and_nothing_asks_nothing() -> None:
    client = GroupDescribeClient(ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9"]))
    with pytest.raises(RuntimeError, match="start"):
        client.describe_groups(["a"])
    client.start()
    assert client.describe_groups([]).value == []


# -- mappings and messages ---------------------------------------------------------------------------


def test_an_unreadable_or_missing_classic_assignment_is_empty() -> None:
    assert classic_assignment(assignment_bytes({"t": [1, 0]})) == (("t", 0), ("t", 1))
    assert classic_assignment(b"") == ()
    assert classic_assignment(None) == ()
    assert classic_assignment(b"junk") == ()


def test_a_connect_groups_assignment_is_not_read_as_a_consumers() -> None:
    manager = FakeManager(
        coordinators={"connect-cluster": 1},
        classic={
            "connect-cluster": classic(
                "connect-cluster", members=[classic_member("w", {"t": [0]})], protocol_type="connect"
            )
        },
    )

    (described,) = client_with(manager).describe_groups(["connect-cluster"]).value

    assert (described.protocol_type, described.is_simple) == ("connect", False)
    assert [m.assignment for m in described.members] == [()]


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe_messages_round_trip(version: int) -> None:
    response_type = ConsumerGroupDescribeResponse
    member_type = response_type.DescribedGroup.Member
    assignment_type = member_type.Assignment
    topic_id = uuid.uuid4()
    member = member_type(
        member_id="m",
        instance_id=None,
        rack_id="r1",
        member_epoch=4,
        client_id="c",
        client_host="/10.0.0.8",
        subscribed_topic_names=["t"],
        subscribed_topic_regex=None,
        assignment=assignment_type(
            topic_partitions=[
                assignment_type.TopicPartitions(topic_id=topic_id, topic_name="t", partitions=[2, 0])
            ]
        ),
        target_assignment=assignment_type(topic_partitions=[]),
        member_type=1,
    )
    group = response_type.DescribedGroup(
        error_code=0,
        error_message=None,
        group_id="g",
        group_state="Reconciling",
        group_epoch=4,
        assignment_epoch=3,
        assignor_name="uniform",
        members=[member],
        authorized_operations=-2147483648,
    )

    decoded = response_type.decode(
        response_type(throttle_time_ms=0, groups=[group]).encode(version=version), version=version
    )
    request = ConsumerGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False)

    (answer,) = decoded.groups
    assert (answer.group_state, answer.assignor_name, answer.members[0].rack_id) == (
        "Reconciling",
        "uniform",
        "r1",
    )
    assert answer.members[0].assignment.topic_partitions[0].topic_id == topic_id
    assert answer.members[0].member_type == (1 if version == 1 else -1)
    assert describe.consumer_description(answer, 2).members[0].assignment == (("t", 0), ("t", 2))
    assert ConsumerGroupDescribeRequest.API_KEY == 69
    assert request.encode(version=version) == b"\x02\x02g\x00\x00"
