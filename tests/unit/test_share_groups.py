"""Share groups: the answers of ShareGroupDescribe and DescribeShareGroupOffsets decoded from the
bytes the broker sends (through our schemas), the lag and how it is known, and the requests a
broker must have for share groups to be available."""

from __future__ import annotations

import uuid
from typing import Any

import kafka.errors
import pytest
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.broker_version_data import BrokerVersionData

from monitor.core.share_groups import LAG_BROKER, LAG_END_MINUS_START, LAG_NONE, ShareLag, share_lag
from monitor.devtools.kafka_modes import kafka_mode
from monitor.kafka.messages import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from monitor.kafka.share_groups import feature_off, missing_request, share_description, share_offsets


def round_trip(message: Any, version: int) -> Any:
    """`message` encoded as the broker would send it at `version`, and decoded again."""
    return type(message).decode(message.encode(version=version), version=version)


def offsets_answer(lag: int, start: int = 30, error_code: int = 0) -> Any:
    group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
    topic = group.DescribeShareGroupOffsetsResponseTopic
    partition = topic.DescribeShareGroupOffsetsResponsePartition
    parts = [
        partition(
            partition_index=1, start_offset=-1, leader_epoch=0, lag=-1, error_code=0, error_message=None
        ),
        partition(
            partition_index=0, start_offset=start, leader_epoch=3, lag=lag, error_code=0, error_message=None
        ),
        partition(
            partition_index=2, start_offset=0, leader_epoch=0, lag=0, error_code=error_code, error_message="x"
        ),
    ]
    topics = [
        topic(topic_name="orders", topic_id=uuid.uuid4(), partitions=parts if error_code else parts[:2])
    ]
    answer = group(group_id="q", topics=topics, error_code=0, error_message=None)
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=[answer])


@pytest.mark.parametrize(
    ("version", "lag", "expected_lag"),
    [(1, 7, 7), (1, -1, None), (0, 7, None)],  # v0 (Kafka 4.1) has no lag on the wire
)
def test_offsets_decoded_per_version(version: int, lag: int, expected_lag: int | None) -> None:
    (group,) = round_trip(offsets_answer(lag), version).groups
    found, failed = share_offsets(group)
    assert [(o.partition, o.start_offset, o.broker_lag) for o in found] == [
        (0, 30, expected_lag),
        (1, None, None),
    ]
    assert failed == []


def test_a_failed_partition_is_named_and_left_out() -> None:
    code = kafka.errors.UnknownTopicOrPartitionError.errno
    (group,) = round_trip(offsets_answer(0, error_code=code), 1).groups
    found, failed = share_offsets(group)
    assert [o.partition for o in found] == [0, 1]
    assert [(where, type(exc)) for where, exc in failed] == [
        ("orders:2", kafka.errors.UnknownTopicOrPartitionError)
    ]


def test_description_decoded() -> None:
    group_type = ShareGroupDescribeResponse.DescribedGroup
    member_type = group_type.Member
    assignment = member_type.Assignment
    tid = uuid.uuid4()
    members = [
        member_type(
            member_id=name, rack_id=rack, member_epoch=3, client_id=f"c-{name}", client_host="/10.0.0.1",
            subscribed_topic_names=["orders"],
            assignment=assignment(topic_partitions=[assignment.TopicPartitions(topic_id=tid, topic_name="orders", partitions=parts)]),
        )
        for name, rack, parts in (("m2", None, [3, 1]), ("m1", "r1", [0]))
    ]  # fmt: skip
    answer = ShareGroupDescribeResponse(
        throttle_time_ms=0,
        groups=[
            group_type(
                error_code=0, error_message=None, group_id="q", group_state="Stable", group_epoch=5,
                assignment_epoch=5, assignor_name="simple", members=members, authorized_operations=-2147483648,
            )
        ],
    )  # fmt: skip
    (group,) = round_trip(answer, 1).groups
    described = share_description(group, 2)
    assert (described.group_id, described.state, described.coordinator, described.assignor) == (
        "q",
        "Stable",
        2,
        "simple",
    )
    assert [(m.member_id, m.rack, m.assignment) for m in described.members] == [
        ("m1", "r1", (("orders", 0),)),
        ("m2", None, (("orders", 1), ("orders", 3))),
    ]


@pytest.mark.parametrize(
    ("start", "end", "broker_lag", "expected"),
    [
        (30, 37, 7, ShareLag(7, LAG_BROKER)),  # the broker's word wins
        (30, 37, 0, ShareLag(0, LAG_BROKER)),
        (30, 37, None, ShareLag(7, LAG_END_MINUS_START)),  # an upper bound before Kafka 4.2
        (40, 37, None, ShareLag(0, LAG_END_MINUS_START)),  # a stale end is clamped
        (None, 37, None, ShareLag(None, LAG_NONE)),  # no start offset yet
        (-1, 37, None, ShareLag(None, LAG_NONE)),
        (30, None, None, ShareLag(None, LAG_NONE)),  # end offset unread
        (30, 37, -1, ShareLag(7, LAG_END_MINUS_START)),  # -1: the broker does not know
    ],
)
def test_share_lag(start: int | None, end: int | None, broker_lag: int | None, expected: ShareLag) -> None:
    assert share_lag(start, end, broker_lag) == expected


def _versions(**keys: tuple[int, int]) -> BrokerVersionData:
    api = {ListGroupsRequest.API_KEY: (0, 5)}
    api.update({ShareGroupDescribeRequest.API_KEY: (1, 1), DescribeShareGroupOffsetsRequest.API_KEY: (0, 1)})
    for name, versions in keys.items():
        api[{"list": ListGroupsRequest, "describe": ShareGroupDescribeRequest}[name].API_KEY] = versions
    return BrokerVersionData(broker_version=(4, 4), api_versions=api)


def test_requests_a_broker_must_have() -> None:
    assert missing_request(_versions()) is None
    assert missing_request(_versions(list=(0, 4))) == "ListGroups v5 (the group type filter, Kafka 3.8+)"
    no_describe = _versions()
    del no_describe.api_versions[ShareGroupDescribeRequest.API_KEY]  # a 3.x broker, or the feature off
    assert missing_request(no_describe) == "ShareGroupDescribe v1 (Kafka 4.1+)"


# describe_features() of kafka-python's admin client, as a Kafka 4.1.2 broker answered it.
_ON = {"share.version": {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 26}}
_OFF = {"share.version": {"supported": (0, 1)}}  # after `upgrade --feature share.version=0`


@pytest.mark.parametrize(
    ("features", "off"),
    [
        (_ON, False),
        (_OFF, True),
        ({"share.version": {"supported": (0, 1), "finalized": (0, 0)}}, True),
        ({"share.version": {"supported": (0, 2), "finalized": (2, 2)}}, False),
        ({"metadata.version": {"supported": (7, 27)}}, False),  # a broker that does not know it
        ({}, False),
        (None, False),
    ],
)
def test_share_groups_off_by_the_cluster_feature_say_how_to_turn_them_on(features: object, off: bool) -> None:
    reason = feature_off(features)
    assert (reason is not None) == off
    if reason:
        assert "share.version is at level 0" in reason
        assert "upgrade --feature share.version=1" in reason


@pytest.mark.parametrize(
    ("version", "arguments"),
    [("4.1.2", ["--feature", "share.version=1"]), ("4.0.0", []), ("4.2.0", []), ("4.4.0", [])],
)
def test_dev_cluster_turns_share_groups_on_where_a_new_cluster_leaves_them_off(
    version: str, arguments: list[str]
) -> None:
    assert kafka_mode(version).format_features() == arguments
