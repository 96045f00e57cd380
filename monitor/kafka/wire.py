"""The two big answers of a collection cycle decoded straight from their bytes: OffsetFetch v8
(the committed offsets of many groups in one answer) and ListOffsets v1+ (one leader's offsets).

kafka-python decodes an answer into one Python object per struct of the protocol, and the
callers then walk those objects into records. For OffsetFetch at 100,000 group-partitions that
was the cold cycle's biggest CPU cost in the step (measured: 0.09 CPU-s per answer of 100 groups
of 200 partitions for the decoding, kafka-python's `OffsetAndMetadata` dicts and the records
made from them, against 0.02 CPU-s here); for ListOffsets it is about 1 microsecond per
partition (0.6 here). The requests stay kafka-python's (encoding, version negotiation,
connections, timeouts); only their answers are decoded here, with `struct.unpack_from` over the
bytes, into what the callers use: `CommittedOffset` records per group, and (error code, offset,
timestamp) per partition.

The hook is kafka-python's own: its protocol parser decodes an answer with the class named by
the request's header (`RequestHeader.get_response_class`). The requests below (`OffsetFetchV8`,
`ListOffsets`: kafka-python's own, subclassed) wrap their header so that it names a decoder of
this module. A decoder raises `MalformedAnswer` (a ValueError) for bytes it cannot decode (an
answer that ends early, or bytes left over); the parser turns that into `KafkaProtocolError`,
and kafka-python closes the connection and fails the requests on it, as it does when its own
decoding fails.
"""

from __future__ import annotations

import struct
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse

from monitor.core.records import CommittedOffset, TopicPartition


class MalformedAnswer(ValueError):
    """Bytes that are not the answer they should be: cut short, or with bytes left over."""


OFFSET_FETCH_VERSION: Final = 8
"""The one version asked (as kafka-python's own admin client does: many groups per request)."""
LIST_OFFSETS_MAX_VERSION: Final = 11
"""The newest ListOffsets answer layout known here (v4 to v11 answer the same fields)."""

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_COMMITTED: Final = struct.Struct(">iqi")  # partition index, committed offset, leader epoch
_LISTED_V4: Final = struct.Struct(">ihqqi")  # partition index, error, timestamp, offset, leader epoch
_LISTED_V1: Final = struct.Struct(">ihqq")  # the same without the leader epoch (v1-v3)


Reply = tuple[int, int, int]
"""One partition's ListOffsets answer: (error code, offset, timestamp)."""


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """One group of an OffsetFetch answer: its committed offsets (partitions without one, -1, left
    out), sorted by topic and partition; `error_code` is the group's, `partition_error_code` the
    first partition's that failed (0: none)."""

    group_id: str
    error_code: int
    partition_error_code: int
    committed: list[CommittedOffset]


@dataclass(frozen=True, slots=True)
class OffsetFetchAnswer:
    throttle_time_ms: int
    groups: list[GroupOffsets]


@dataclass(frozen=True, slots=True)
class ListOffsetsAnswer:
    throttle_time_ms: int
    replies: dict[TopicPartition, Reply]


# -- primitives: each takes the bytes and a position, returns (value, next position) ------------


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedAnswer(f"a length at byte {pos} runs past five bytes")


def _skip_tags(data: bytes, pos: int) -> int:
    """Past a flexible version's tagged fields (none of them is read here)."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def _compact_string(data: bytes, pos: int) -> tuple[str | None, int]:
    size, pos = _uvarint(data, pos)
    if size == 0:
        return None, pos
    end = pos + size - 1
    if end > len(data):
        raise IndexError(end)
    return data[pos:end].decode(), end


def _string(data: bytes, pos: int) -> tuple[str | None, int]:
    (size,) = _I16.unpack_from(data, pos)
    pos += 2
    if size < 0:
        return None, pos
    end = pos + size
    if end > len(data):
        raise IndexError(end)
    return data[pos:end].decode(), end


def _compact_count(data: bytes, pos: int) -> tuple[int, int]:
    count, pos = _uvarint(data, pos)
    return max(count - 1, 0), pos  # 0: a null array


def _count(data: bytes, pos: int) -> tuple[int, int]:
    (count,) = _I32.unpack_from(data, pos)
    return max(count, 0), pos + 4  # -1: a null array


def _whole(name: str, data: bytes, decode: Callable[[bytes], tuple[Any, int]]) -> Any:
    """`decode(data)` checked to end exactly at the end of `data`; any cut answer as MalformedAnswer."""
    try:
        value, end = decode(data)
    except (IndexError, struct.error) as exc:
        raise MalformedAnswer(f"{name}: the answer ends early ({len(data)} bytes)") from exc
    if end != len(data):
        raise MalformedAnswer(f"{name}: {len(data) - end} bytes left over after the answer")
    return value


# -- OffsetFetch v8 --------------------------------------------------------------------------------


def _position(c: CommittedOffset) -> tuple[str, int]:
    return (c.topic, c.partition)


def _offset_fetch_v8(data: bytes) -> tuple[OffsetFetchAnswer, int]:
    unpack_committed, unpack_i16 = _COMMITTED.unpack_from, _I16.unpack_from
    (throttle,) = _I32.unpack_from(data, 0)
    count, pos = _compact_count(data, 4)
    groups: list[GroupOffsets] = []
    for _ in range(count):
        group_id, pos = _compact_string(data, pos)
        group = group_id or ""
        committed: list[CommittedOffset] = []
        failed = 0
        topics, pos = _compact_count(data, pos)
        for _ in range(topics):
            topic, pos = _compact_string(data, pos)
            name = topic or ""
            partitions, pos = _compact_count(data, pos)
            for _ in range(partitions):
                partition, offset, epoch = unpack_committed(data, pos)
                pos += 16
                size = data[pos]  # the metadata string: a compact length, nearly always one byte
                if size < 0x80:
                    pos += 1
                else:
                    size, pos = _uvarint(data, pos)
                if size > 1:
                    pos += size - 1
                (code,) = unpack_i16(data, pos)
                pos += 2
                pos = pos + 1 if data[pos] == 0 else _skip_tags(data, pos)
                if code:
                    failed = failed or code
                elif offset >= 0:
                    committed.append(
                        CommittedOffset(group, name, partition, offset, epoch if epoch >= 0 else None)
                    )
            pos = pos + 1 if data[pos] == 0 else _skip_tags(data, pos)
        (group_code,) = unpack_i16(data, pos)
        pos = _skip_tags(data, pos + 2)
        committed.sort(key=_position)
        groups.append(GroupOffsets(group, group_code, failed, committed))
    pos = _skip_tags(data, pos)
    return OffsetFetchAnswer(throttle, groups), pos


def decode_offset_fetch(data: bytes, version: int) -> OffsetFetchAnswer:
    """An OffsetFetch answer of `version` (its body, after the header) as an `OffsetFetchAnswer`;
    MalformedAnswer for bytes that are not one."""
    if version not in (8, 9):  # v9 answers as v8; v10 names topics by id
        raise MalformedAnswer(f"OffsetFetch v{version} is not decoded here (only v8 and v9)")
    answer: OffsetFetchAnswer = _whole(f"OffsetFetch v{version}", data, _offset_fetch_v8)
    return answer


# -- ListOffsets v1+ -------------------------------------------------------------------------------


def _list_offsets(version: int) -> Callable[[bytes], tuple[ListOffsetsAnswer, int]]:
    flexible = version >= 6
    layout = _LISTED_V4 if version >= 4 else _LISTED_V1
    step = layout.size
    string = _compact_string if flexible else _string
    array = _compact_count if flexible else _count

    def decode(data: bytes) -> tuple[ListOffsetsAnswer, int]:
        unpack = layout.unpack_from
        throttle, pos = 0, 0
        if version >= 2:
            (throttle,) = _I32.unpack_from(data, 0)
            pos = 4
        replies: dict[TopicPartition, Reply] = {}
        topics, pos = array(data, pos)
        for _ in range(topics):
            topic, pos = string(data, pos)
            name = topic or ""
            partitions, pos = array(data, pos)
            for _ in range(partitions):
                fields = unpack(data, pos)
                pos += step
                if flexible:
                    pos = pos + 1 if data[pos] == 0 else _skip_tags(data, pos)
                replies[(name, fields[0])] = (fields[1], fields[3], fields[2])
            if flexible:
                pos = pos + 1 if data[pos] == 0 else _skip_tags(data, pos)
        if flexible:
            pos = _skip_tags(data, pos)
        return ListOffsetsAnswer(throttle, replies), pos

    return decode


_LIST_OFFSETS: Final = {v: _list_offsets(v) for v in range(1, LIST_OFFSETS_MAX_VERSION + 1)}


def decode_list_offsets(data: bytes, version: int) -> ListOffsetsAnswer:
    """A ListOffsets answer of `version` (its body, after the header) as a `ListOffsetsAnswer`;
    MalformedAnswer for bytes that are not one."""
    decode = _LIST_OFFSETS.get(version)
    if decode is None:
        raise MalformedAnswer(
            f"ListOffsets v{version} is not decoded here (only v1 to v{LIST_OFFSETS_MAX_VERSION})"
        )
    answer: ListOffsetsAnswer = _whole(f"ListOffsets v{version}", data, decode)
    return answer


# -- the hook into kafka-python's parser ----------------------------------------------------------


class _Decoder:
    """What kafka-python's parser asks of an answer's class: `parse_header` (kafka-python's own,
    for the answer's version) and `decode` of the body that follows it."""

    __slots__ = ("_decode", "_header_of", "_version")

    def __init__(self, response: Any, version: int, decode: Callable[[bytes, int], Any]) -> None:
        self._header_of = response[version]
        self._version = version
        self._decode = decode

    def parse_header(self, buffer: Any) -> Any:
        return self._header_of.parse_header(buffer)

    def decode(self, buffer: Any) -> Any:
        return self._decode(bytes(buffer.read()), self._version)

    def __repr__(self) -> str:
        return f"{self._header_of.__name__} (decoded by {__name__})"


class _Header:
    """kafka-python's request header, naming this module's decoder as the answer's class."""

    __slots__ = ("_decode", "_header", "_response")

    def __init__(self, header: Any, response: Any, decode: Callable[[bytes, int], Any]) -> None:
        self._header = header
        self._response = response
        self._decode = decode

    def get_response_class(self) -> _Decoder:
        return _Decoder(self._response, int(self._header.request_api_version), self._decode)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._header, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _Header.__slots__:
            object.__setattr__(self, name, value)
        else:
            setattr(self._header, name, value)


def _decoded_here(request: Any, response: Any, decode: Callable[[bytes, int], Any]) -> Any:
    """A subclass of kafka-python's `request` message whose answer `decode` decodes."""

    def with_header(self: Any, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        request.with_header(self, correlation_id=correlation_id, client_id=client_id)
        self._header = _Header(self._header, response, decode)

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(
            __slots__=(),
            with_header=with_header,
            __doc__=f"{request.__name__}, its answer decoded by {__name__}.{decode.__name__}",
        )

    return types.new_class(request.__name__, (request,), {"init": False}, body)


OffsetFetchV8: Final = _decoded_here(OffsetFetchRequest, OffsetFetchResponse, decode_offset_fetch)
ListOffsets: Final = _decoded_here(ListOffsetsRequest, ListOffsetsResponse, decode_list_offsets)


def offset_fetch_request(group_ids: list[str]) -> Any:
    """One OffsetFetch v8 for all committed offsets of `group_ids` (one coordinator's)."""
    groups = [OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in group_ids]
    return OffsetFetchV8(groups=groups, min_version=OFFSET_FETCH_VERSION, max_version=OFFSET_FETCH_VERSION)
