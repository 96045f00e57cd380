"""Decoding the records of `__consumer_offsets`, from the record formats Kafka documents in its
group coordinator's message schemas (`OffsetCommitKey/Value`, `GroupMetadataKey/Value`).

Every key starts with an int16 that says which record it is: 0 and 1 are offset commits (key:
group, topic, partition), 2 is a classic group's metadata (key: group); higher types are the
records of consumer-protocol (KIP-848), share and streams groups, which carry no committed
offset (a consumer-protocol group's commits are type 1 records like any other). Every value
starts with its own int16 schema version:

- OffsetCommitValue 0: offset, metadata, commitTimestamp; 1: ... plus expireTimestamp; 2: as 0;
  3: offset, leaderEpoch, metadata, commitTimestamp; 4: as 3, flexible (compact strings, tagged
  fields).
- GroupMetadataValue 0-3: protocolType, generation, protocol, leader, currentStateTimestamp (2+),
  members (memberId, groupInstanceId (3+), clientId, clientHost, rebalanceTimeout (1+),
  sessionTimeout, subscription, assignment); 4: as 3, flexible.

A record without a value is a tombstone: the offset was deleted or expired, or the group was
removed. Pure functions: no client library is needed to decode.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from monitor.core.records import GroupMetadataRecord, OffsetCommitRecord

OFFSET_COMMIT_KEYS: Final = frozenset({0, 1})
GROUP_METADATA_KEY: Final = 2
OFFSET_COMMIT_VALUE_VERSIONS: Final = range(0, 5)
GROUP_METADATA_VALUE_VERSIONS: Final = range(0, 5)
_FLEXIBLE: Final = 4
"""The first flexible version of both value schemas."""

SKIP_OTHER_RECORD: Final = "other record type"
"""A record of consumer-protocol, share or streams group state: expected, not decoded."""
SKIP_UNKNOWN_KEY: Final = "unknown key version"
SKIP_UNKNOWN_VALUE: Final = "unknown value version"
SKIP_MALFORMED: Final = "malformed record"
WARNED_SKIPS: Final = frozenset({SKIP_UNKNOWN_KEY, SKIP_UNKNOWN_VALUE, SKIP_MALFORMED})
"""The reasons a reader warns about (once, then counts): the others are expected."""


class DecodeError(ValueError):
    """A record that cannot be decoded; `reason` is one of the SKIP_ constants."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record of the topic that is not an offset commit or group metadata record."""

    reason: str


Decoded = OffsetCommitRecord | GroupMetadataRecord | Skipped


class _Buffer:
    """A cursor over the bytes of one key or value; reading past the end is `SKIP_MALFORMED`."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._at = 0

    def _take(self, size: int) -> memoryview:
        if size < 0 or self._at + size > len(self._data):
            raise DecodeError(SKIP_MALFORMED, f"{size} bytes wanted at {self._at} of {len(self._data)}")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise DecodeError(SKIP_MALFORMED, "a varint longer than 5 bytes")

    def string(self, flexible: bool) -> str:
        value = self.nullable_string(flexible)
        if value is None:
            raise DecodeError(SKIP_MALFORMED, "a null string where the schema allows none")
        return value

    def nullable_string(self, flexible: bool) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size < 0:
            return None
        try:
            return bytes(self._take(size)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(SKIP_MALFORMED, f"a string that is not UTF-8 ({exc.reason})") from exc

    def skip_bytes(self, flexible: bool) -> None:
        size = self.uvarint() - 1 if flexible else self.int32()
        if size > 0:
            self._take(size)

    def array_length(self, flexible: bool) -> int:
        size = self.uvarint() - 1 if flexible else self.int32()
        return max(size, 0)

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self._take(self.uvarint())


def decode(key: bytes | None, value: bytes | None) -> Decoded:
    """One record of `__consumer_offsets`. Raises `DecodeError` for a record that cannot be
    decoded (an unknown version, truncated bytes); never anything else."""
    if key is not None and value is not None:
        fast = _offset_commit_fast(key, value)
        if fast is not None:
            return fast
    return _decode(key, value)


_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_VALUE_HEAD: Final = struct.Struct(">hqi")
"""OffsetCommitValue 3 and 4: version, offset, leaderEpoch."""


def _offset_commit_fast(key: bytes, value: bytes) -> OffsetCommitRecord | None:
    """The offset commit record of the shapes brokers write all the time (key 0 or 1, value 3
    or 4 with a metadata of under 127 bytes and no tagged field), read with fixed layouts; None
    for anything else, which `_decode` reads field by field and judges (the commit stream reads
    every commit of a fleet: 10,000 a second at 100,000 group-partitions). Equal to `_decode`'s
    result wherever it answers (tests/unit/test_offsets_topic.py)."""
    try:
        if _INT16.unpack_from(key)[0] not in OFFSET_COMMIT_KEYS:
            return None
        group_end = 4 + _INT16.unpack_from(key, 2)[0]
        topic_end = group_end + 2 + _INT16.unpack_from(key, group_end)[0]
        if group_end < 4 or topic_end < group_end + 2 or topic_end + 4 > len(key):
            return None
        group, topic = key[4:group_end].decode(), key[group_end + 2 : topic_end].decode()
        partition = _INT32.unpack_from(key, topic_end)[0]
        version, offset, epoch = _VALUE_HEAD.unpack_from(value)
        if version == _FLEXIBLE:
            size = value[14] - 1  # a compact string's length + 1, in one byte below 128
            if not 0 <= size < 126:
                return None
            at = 15 + size
            if at + 9 != len(value) or value[at + 8] != 0:  # the commit time, then no tagged field
                return None
        elif version == 3:
            size = _INT16.unpack_from(value, 14)[0]
            at = 16 + size
            if size < 0 or at + 8 > len(value):
                return None
        else:
            return None
        metadata = value[at - size : at].decode()
        committed_at = _INT64.unpack_from(value, at)[0]
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    return _commit(group, topic, partition, offset, epoch, metadata, committed_at, -1)


def _commit(
    group: str,
    topic: str,
    partition: int,
    offset: int,
    epoch: int,
    metadata: str,
    committed_at: int,
    expires_at: int,
) -> OffsetCommitRecord:
    """The record of an offset commit value's fields (-1: none, as the schemas write it)."""
    return OffsetCommitRecord(
        group,
        topic,
        partition,
        offset,
        commit_timestamp_ms=committed_at if committed_at >= 0 else None,
        leader_epoch=epoch if epoch >= 0 else None,
        metadata=metadata,
        expire_timestamp_ms=expires_at if expires_at >= 0 else None,
    )


def _decode(key: bytes | None, value: bytes | None) -> Decoded:
    """`decode`, field by field."""
    if key is None or len(key) < 2:
        raise DecodeError(SKIP_MALFORMED, "a record without a key version")
    buffer = _Buffer(key)
    kind = buffer.int16()
    if kind in OFFSET_COMMIT_KEYS:
        group, topic, partition = buffer.string(False), buffer.string(False), buffer.int32()
        if value is None:
            return OffsetCommitRecord(group, topic, partition, None)
        return _offset_commit(group, topic, partition, value)
    if kind == GROUP_METADATA_KEY:
        group = buffer.string(False)
        if value is None:
            return GroupMetadataRecord(group, deleted=True)
        return _group_metadata(group, value)
    if kind < 0:
        raise DecodeError(SKIP_UNKNOWN_KEY, f"key version {kind}")
    return Skipped(SKIP_OTHER_RECORD)


def _value_version(buffer: _Buffer, known: range, what: str) -> int:
    version = buffer.int16()
    if version not in known:
        raise DecodeError(
            SKIP_UNKNOWN_VALUE,
            f"{what} version {version} (this monitor reads {known.start}-{known.stop - 1})",
        )
    return version


def _offset_commit(group: str, topic: str, partition: int, value: bytes) -> OffsetCommitRecord:
    buffer = _Buffer(value)
    version = _value_version(buffer, OFFSET_COMMIT_VALUE_VERSIONS, "OffsetCommitValue")
    flexible = version >= _FLEXIBLE
    offset = buffer.int64()
    epoch = buffer.int32() if version >= 3 else -1
    metadata = buffer.string(flexible)
    committed_at = buffer.int64()
    expires_at = buffer.int64() if version == 1 else -1
    if flexible:
        buffer.skip_tagged_fields()
    return _commit(group, topic, partition, offset, epoch, metadata, committed_at, expires_at)


def _group_metadata(group: str, value: bytes) -> GroupMetadataRecord:
    buffer = _Buffer(value)
    version = _value_version(buffer, GROUP_METADATA_VALUE_VERSIONS, "GroupMetadataValue")
    flexible = version >= _FLEXIBLE
    protocol_type = buffer.string(flexible)
    generation = buffer.int32()
    protocol = buffer.nullable_string(flexible)
    leader = buffer.nullable_string(flexible)
    state_at = buffer.int64() if version >= 2 else -1
    members = []
    for _ in range(buffer.array_length(flexible)):
        members.append(buffer.string(flexible))
        if version >= 3:
            buffer.nullable_string(flexible)  # groupInstanceId
        buffer.string(flexible)  # clientId
        buffer.string(flexible)  # clientHost
        if version >= 1:
            buffer.int32()  # rebalanceTimeout
        buffer.int32()  # sessionTimeout
        buffer.skip_bytes(flexible)  # subscription
        buffer.skip_bytes(flexible)  # assignment
        if flexible:
            buffer.skip_tagged_fields()
    if flexible:
        buffer.skip_tagged_fields()
    return GroupMetadataRecord(
        group,
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        state_timestamp_ms=state_at if state_at >= 0 else None,
        member_ids=tuple(members),
    )
