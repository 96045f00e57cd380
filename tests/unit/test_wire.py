"""The OffsetFetch and ListOffsets answers decoded from their bytes (`monitor.kafka.wire`), held
to kafka-python's own encoding of the same answers, and the hook into kafka-python's protocol
parser: a request of `wire` is answered by its decoder, a cut answer fails the request.

Nothing here connects to a broker.
"""

from __future__ import annotations

import struct
from typing import Any

import kafka.errors
import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.parser import KafkaProtocol

from monitor.core.records import CommittedOffset
from monitor.kafka.wire import (
    LIST_OFFSETS_MAX_VERSION,
    ListOffsets,
    ListOffsetsAnswer,
    MalformedAnswer,
    OffsetFetchAnswer,
    decode_list_offsets,
    decode_offset_fetch,
    offset_fetch_request,
)

_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_Topic = _Group.OffsetFetchResponseTopics
_Partition = _Topic.OffsetFetchResponsePartitions
_LTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_LPartition = _LTopic.ListOffsetsPartitionResponse


def committed(index: int, offset: int, epoch: int = 0, metadata: str | None = "", code: int = 0) -> Any:
    return _Partition(
        partition_index=index,
        committed_offset=offset,
        committed_leader_epoch=epoch,
        metadata=metadata,
        error_code=code,
    )


def offset_fetch_bytes() -> bytes:
    """kafka-python's encoding of an answer with every case the decoder must get right."""
    groups = [
        _Group(
            group_id="payments",
            error_code=0,
            topics=[
                # Partitions out of order, an unknown epoch, no committed offset (-1), null and
                # long metadata (a length of two varint bytes).
                _Topic(
                    name="orders",
                    partitions=[
                        committed(2, 40, epoch=7),
                        committed(0, 10, epoch=-1, metadata=None),
                        committed(1, -1, metadata="x" * 300),
                    ],
                ),
                _Topic(name="audit", partitions=[committed(0, 2**40, epoch=1, metadata="é")]),
            ],
        ),
        _Group(group_id="refused", error_code=kafka.errors.GroupAuthorizationFailedError.errno, topics=[]),
        _Group(
            group_id="half",
            error_code=0,
            topics=[
                _Topic(
                    name="orders",
                    partitions=[
                        committed(0, 5),
                        committed(1, -1, code=kafka.errors.UnstableOffsetCommitError.errno),
                    ],
                )
            ],
        ),
        _Group(group_id="empty", error_code=0, topics=[]),
    ]
    data: bytes = OffsetFetchResponse(throttle_time_ms=25, groups=groups).encode(version=8)
    return data


def test_offset_fetch_v8_decodes_as_kafka_python_encodes_it_into_sorted_records() -> None:
    answer = decode_offset_fetch(offset_fetch_bytes(), 8)

    assert isinstance(answer, OffsetFetchAnswer)
    assert answer.throttle_time_ms == 25
    assert [(g.group_id, g.error_code, g.partition_error_code) for g in answer.groups] == [
        ("payments", 0, 0),
        ("refused", kafka.errors.GroupAuthorizationFailedError.errno, 0),
        ("half", 0, kafka.errors.UnstableOffsetCommitError.errno),
        ("empty", 0, 0),
    ]
    assert answer.groups[0].committed == [
        CommittedOffset("payments", "audit", 0, 2**40, leader_epoch=1),
        CommittedOffset("payments", "orders", 0, 10, leader_epoch=None),
        CommittedOffset("payments", "orders", 2, 40, leader_epoch=7),
    ]
    assert answer.groups[2].committed == [CommittedOffset("half", "orders", 0, 5, leader_epoch=0)]
    assert answer.groups[3].committed == []


def test_offset_fetch_v8_skips_tagged_fields() -> None:
    # kafka-python writes no tagged fields of its own: an answer with a partition's and a group's
    # (a size of two varint bytes), written by hand and checked with kafka-python's decoder.
    partition = struct.pack(">iqi", 3, 9, 0) + b"\x01" + struct.pack(">h", 0) + b"\x01\x05\x03abc"
    topic = b"\x02t" + b"\x02" + partition + b"\x00"
    group = b"\x02g" + b"\x02" + topic + struct.pack(">h", 0) + b"\x01\x09\xc8\x01" + b"z" * 200
    data = struct.pack(">i", 0) + b"\x02" + group + b"\x00"
    theirs = OffsetFetchResponse[8].decode(data).groups[0]
    assert theirs.unknown_tags and theirs.topics[0].partitions[0].unknown_tags

    assert decode_offset_fetch(data, 8).groups[0].committed == [CommittedOffset("g", "t", 3, 9, 0)]


@pytest.mark.parametrize("version", range(1, LIST_OFFSETS_MAX_VERSION + 1))
def test_list_offsets_decodes_every_version_as_kafka_python_does(version: int) -> None:
    topics = [
        _LTopic(
            name="orders",
            partitions=[
                _LPartition(partition_index=0, error_code=0, timestamp=-1, offset=2**35, leader_epoch=3),
                _LPartition(partition_index=4, error_code=6, timestamp=-1, offset=-1, leader_epoch=-1),
            ],
        ),
        _LTopic(
            name="t" * 200,
            partitions=[_LPartition(partition_index=1, error_code=0, timestamp=1_700_000_000_000, offset=9)],
        ),
    ]
    data = ListOffsetsResponse(throttle_time_ms=12, topics=topics).encode(version=version)
    theirs = ListOffsetsResponse[version].decode(data)

    answer = decode_list_offsets(data, version)

    assert isinstance(answer, ListOffsetsAnswer)
    assert answer.replies == {
        (t.name, p.partition_index): (p.error_code, p.offset, p.timestamp)
        for t in theirs.topics
        for p in t.partitions
    }
    assert answer.replies[("orders", 4)] == (6, -1, -1)
    assert answer.throttle_time_ms == (12 if version >= 2 else 0)


def test_a_cut_answer_is_a_clear_error_at_every_length() -> None:
    fetched = offset_fetch_bytes()
    listed = ListOffsetsResponse(
        throttle_time_ms=0,
        topics=[_LTopic(name="orders", partitions=[_LPartition(partition_index=0, error_code=0, offset=5)])],
    ).encode(version=9)

    for cut in range(len(fetched)):
        with pytest.raises(MalformedAnswer, match=r"OffsetFetch v8: the answer ends early"):
            decode_offset_fetch(fetched[:cut], 8)
    for cut in range(len(listed)):
        with pytest.raises(MalformedAnswer, match=r"ListOffsets v9: the answer ends early"):
            decode_list_offsets(listed[:cut], 9)


def test_bytes_left_over_or_an_unknown_version_are_clear_errors() -> None:
    with pytest.raises(MalformedAnswer, match="3 bytes left over"):
        decode_offset_fetch(offset_fetch_bytes() + b"abc", 8)
    with pytest.raises(MalformedAnswer, match=r"OffsetFetch v10 is not decoded here \(only v8 and v9\)"):
        decode_offset_fetch(offset_fetch_bytes(), 10)
    with pytest.raises(MalformedAnswer, match="ListOffsets v12 is not decoded here"):
        decode_list_offsets(b"", 12)
    with pytest.raises(MalformedAnswer, match="runs past five bytes"):
        decode_list_offsets(struct.pack(">i", 0) + b"\xff" * 8, 9)


# -- the hook into kafka-python's parser ---------------------------------------------------------------


def exchange(request: Any, version: int, body: bytes) -> Any:
    """`request` sent through kafka-python's protocol parser at `version`, answered with `body`
    after a response header: what the parser hands to the request's future."""
    parser = KafkaProtocol(client_id="test")
    request.API_VERSION = version
    correlation_id = parser.send_request(request)
    header = struct.pack(">i", correlation_id) + (b"\x00" if version >= 6 else b"")  # flexible: no tags
    frame = header + body
    [(answered_id, response)] = parser.receive_bytes(struct.pack(">i", len(frame)) + frame)
    assert answered_id == correlation_id
    return response


def test_the_requests_encode_as_kafka_python_s_own() -> None:
    ours = offset_fetch_request(["a", "b"])
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    theirs = OffsetFetchRequest(groups=[group(group_id="a", topics=None), group(group_id="b", topics=None)])
    listed = ListOffsets(replica_id=-1, isolation_level=0, topics=[])

    assert ours.encode(version=8) == theirs.encode(version=8)
    assert listed.encode(version=9) == ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[]).encode(
        version=9
    )


def test_kafka_python_s_parser_answers_a_request_of_wire_with_its_decoder() -> None:
    response = exchange(offset_fetch_request(["payments"]), 8, offset_fetch_bytes())

    assert isinstance(response, OffsetFetchAnswer)
    assert response.groups[0].committed[0] == CommittedOffset("payments", "audit", 0, 2**40, leader_epoch=1)


def test_kafka_python_s_parser_fails_a_cut_answer_instead_of_waiting() -> None:
    body = ListOffsetsResponse(
        throttle_time_ms=0,
        topics=[_LTopic(name="orders", partitions=[_LPartition(partition_index=0, error_code=0, offset=5)])],
    ).encode(version=9)
    request = ListOffsets(replica_id=-1, isolation_level=0, topics=[])

    assert exchange(request, 9, body).replies == {("orders", 0): (0, 5, -1)}
    with pytest.raises(kafka.errors.KafkaProtocolError):
        exchange(ListOffsets(replica_id=-1, isolation_level=0, topics=[]), 9, body[:-3])
