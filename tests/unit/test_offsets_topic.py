"""The `__consumer_offsets` decoder (monitor/kafka/offsets_topic.py) on records a Kafka 4.1 broker
wrote (captured from the dev cluster: a simple group's commit and its deletion, a classic group
joining, committing and leaving, a consumer-protocol group committing) and on hand-built records
of the other schema versions and of what must be skipped, never raised past `DecodeError`."""

from __future__ import annotations

import struct

import pytest

from monitor.core.records import GroupMetadataRecord, OffsetCommitRecord
from monitor.kafka.offsets_topic import (
    SKIP_MALFORMED,
    SKIP_OTHER_RECORD,
    SKIP_UNKNOWN_KEY,
    SKIP_UNKNOWN_VALUE,
    DecodeError,
    Skipped,
    decode,
)

TOPIC = "cap1795658239"
CLIENT = "rdkafka-b8e39be4-dc26-4b88-9e7f-ac619550fa2b"

# -- records written by a Kafka 4.1 broker ------------------------------------------------------

SIMPLE_COMMIT = (
    bytes.fromhex("0001000a6361702d73696d706c65000d6361703137393536353832333900000000"),
    bytes.fromhex("00040000000000000003ffffffff01000001a215924d4b00"),
)
CLASSIC_GROUP = (
    bytes.fromhex("0002000b6361702d636c6173736963"),
    bytes.fromhex(
        "00030008636f6e73756d657200000003000572616e6765002c72646b61666b612d62386533396265342d646332"
        "362d346238382d396537662d616336313935353066613262000001a215924dc300000001002c72646b61666b61"
        "2d62386533396265342d646332362d346238382d396537662d616336313935353066613262ffff000772646b61"
        "666b61000a2f3132372e302e302e31000493e00000177000000023000300000001000d63617031373935363538"
        "3233390000000000000000ffffffff000000000021000000000001000d63617031373935363538323339000000"
        "010000000000000000"
    ),
)
CLASSIC_COMMIT = (
    bytes.fromhex("0001000b6361702d636c6173736963000d6361703137393536353832333900000000"),
    bytes.fromhex("000400000000000000050000000001000001a215924e6200"),
)
CLASSIC_GROUP_EMPTY = (
    bytes.fromhex("0002000b6361702d636c6173736963"),
    bytes.fromhex("00030008636f6e73756d657200000004ffffffff000001a215924e7a00000000"),
)
C848_MEMBER = (
    bytes.fromhex("000500076361702d38343800166737623369516638536b796d58586165494735733241"),
    bytes.fromhex(
        "000000000872646b61666b610b2f3132372e302e302e31020e6361703137393536353832333901000493e00001000100"
    ),
)
C848_GROUP = (
    bytes.fromhex("000300076361702d383438"),
    bytes.fromhex("0000000000030100085d416881d523fc48"),
)
C848_COMMIT = (
    bytes.fromhex("000100076361702d383438000d6361703137393536353832333900000000"),
    bytes.fromhex("000400000000000000050000000001000001a215924f7e00"),
)
SIMPLE_COMMIT_TOMBSTONE = (
    bytes.fromhex("0001000a6361702d73696d706c65000d6361703137393536353832333900000000"),
    None,
)
SIMPLE_GROUP_TOMBSTONE = (
    bytes.fromhex("0002000a6361702d73696d706c65"),
    None,
)


def test_a_simple_groups_commit_on_kafka_4_1() -> None:
    assert decode(*SIMPLE_COMMIT) == OffsetCommitRecord(
        "cap-simple", TOPIC, 0, 3, commit_timestamp_ms=1795658239307, leader_epoch=None, metadata=""
    )


def test_a_classic_groups_commit_carries_the_leader_epoch() -> None:
    assert decode(*CLASSIC_COMMIT) == OffsetCommitRecord(
        "cap-classic", TOPIC, 0, 5, commit_timestamp_ms=1795658239586, leader_epoch=0
    )


def test_a_consumer_protocol_groups_commit_is_the_same_record() -> None:
    assert decode(*C848_COMMIT) == OffsetCommitRecord(
        "cap-848", TOPIC, 0, 5, commit_timestamp_ms=1795658239870, leader_epoch=0
    )


def test_a_classic_group_with_its_member_then_empty() -> None:
    assert decode(*CLASSIC_GROUP) == GroupMetadataRecord(
        "cap-classic",
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader=CLIENT,
        state_timestamp_ms=1795658239427,
        member_ids=(CLIENT,),
    )
    empty = decode(*CLASSIC_GROUP_EMPTY)
    assert isinstance(empty, GroupMetadataRecord)
    assert (empty.generation, empty.protocol, empty.leader, empty.member_ids) == (4, None, None, ())


def test_a_deleted_group_leaves_tombstones_for_its_offsets_and_itself() -> None:
    assert decode(*SIMPLE_COMMIT_TOMBSTONE) == OffsetCommitRecord("cap-simple", TOPIC, 0, None)
    assert decode(*SIMPLE_GROUP_TOMBSTONE) == GroupMetadataRecord("cap-simple", deleted=True)


@pytest.mark.parametrize("record", [C848_MEMBER, C848_GROUP])
def test_consumer_protocol_group_state_is_skipped_as_expected(record: tuple[bytes, bytes]) -> None:
    assert decode(*record) == Skipped(SKIP_OTHER_RECORD)


# -- the other schema versions, built by hand ---------------------------------------------------------


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


def _commit_key(group: str = "g", topic: str = "t", partition: int = 2, kind: int = 1) -> bytes:
    return struct.pack(">h", kind) + _string(group) + _string(topic) + struct.pack(">i", partition)


@pytest.mark.parametrize(
    ("version", "body", "expected"),
    [
        (0, struct.pack(">q", 7) + _string("m") + struct.pack(">q", 1000), (7, None, "m", 1000, None)),
        (
            1,
            struct.pack(">q", 7) + _string("") + struct.pack(">qq", 1000, 5000),
            (7, None, "", 1000, 5000),
        ),
        (2, struct.pack(">q", 8) + _string("x") + struct.pack(">q", 1001), (8, None, "x", 1001, None)),
        (3, struct.pack(">qi", 9, 4) + _string("") + struct.pack(">q", 1002), (9, 4, "", 1002, None)),
        # flexible: a compact string and one tagged field (tag 0, 2 bytes) to skip
        (
            4,
            struct.pack(">qi", 10, -1) + _compact("meta") + struct.pack(">q", 1003) + b"\x01\x00\x02ab",
            (10, None, "meta", 1003, None),
        ),
    ],
)
def test_every_offset_commit_value_version(
    version: int, body: bytes, expected: tuple[int, int | None, str, int, int | None]
) -> None:
    for kind in (0, 1):
        record = decode(_commit_key(kind=kind), struct.pack(">h", version) + body)
        assert isinstance(record, OffsetCommitRecord)
        assert (
            record.offset,
            record.leader_epoch,
            record.metadata,
            record.commit_timestamp_ms,
            record.expire_timestamp_ms,
        ) == expected
        assert (record.group_id, record.topic, record.partition) == ("g", "t", 2)


def test_a_flexible_group_metadata_value() -> None:
    member = (
        _compact("m-1")
        + _compact("static-1")
        + _compact("client")
        + _compact("/10.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + b"\x03ab"  # subscription: compact bytes, two of them
        + b"\x01"  # empty assignment
        + b"\x00"  # no tagged fields
    )
    value = (
        struct.pack(">h", 4)
        + _compact("consumer")
        + struct.pack(">i", 12)
        + _compact("cooperative-sticky")
        + _compact("m-1")
        + struct.pack(">q", 1234)
        + b"\x02"  # one member
        + member
        + b"\x00"
    )
    key = struct.pack(">h", 2) + _string("flex")
    assert decode(key, value) == GroupMetadataRecord(
        "flex",
        protocol_type="consumer",
        generation=12,
        protocol="cooperative-sticky",
        leader="m-1",
        state_timestamp_ms=1234,
        member_ids=("m-1",),
    )


# -- what is skipped ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (_commit_key(), struct.pack(">h", 5) + bytes(30), SKIP_UNKNOWN_VALUE),
        (_commit_key(), struct.pack(">h", -1), SKIP_UNKNOWN_VALUE),
        (struct.pack(">h", 2) + _string("g"), struct.pack(">h", 9) + bytes(10), SKIP_UNKNOWN_VALUE),
        (struct.pack(">h", -3) + _string("g"), b"", SKIP_UNKNOWN_KEY),
        (None, b"", SKIP_MALFORMED),
        (b"\x00", b"", SKIP_MALFORMED),
        (_commit_key()[:-2], struct.pack(">h", 3), SKIP_MALFORMED),
        (_commit_key(), SIMPLE_COMMIT[1][:-5], SKIP_MALFORMED),
        (
            _commit_key(),
            struct.pack(">hq", 3, 1) + struct.pack(">i", 0) + b"\x00\x02\xff\xfe",
            SKIP_MALFORMED,
        ),
        (struct.pack(">h", 2) + _string("g"), CLASSIC_GROUP[1][:40], SKIP_MALFORMED),
        (_commit_key(), struct.pack(">hqi", 4, 1, 0) + b"\xff\xff\xff\xff\xff\xff", SKIP_MALFORMED),
    ],
    ids=[
        "commit value v5",
        "commit value v-1",
        "group value v9",
        "negative key",
        "no key",
        "short key",
        "truncated key",
        "truncated value",
        "not utf-8",
        "truncated members",
        "endless varint",
    ],
)
def test_what_cannot_be_decoded_is_a_decode_error_naming_why(
    key: bytes | None, value: bytes | None, reason: str
) -> None:
    with pytest.raises(DecodeError) as raised:
        decode(key, value)
    assert raised.value.reason == reason


# -- the fast reader of the common offset commits agrees with the field-by-field one -------------


def _outcome(read: object, key: bytes | None, value: bytes | None) -> object:
    try:
        return read(key, value)  # type: ignore[operator]
    except DecodeError as exc:
        return ("skipped", exc.reason)


def _common_commits() -> list[tuple[bytes, bytes]]:
    v3 = struct.pack(">hqi", 3, 123, 7) + _string("meta") + struct.pack(">q", 1795658239307)
    v4 = struct.pack(">hqi", 4, 124, -1) + _compact("") + struct.pack(">q", 1795658239308) + b"\x00"
    v4_tagged = v4[:-1] + b"\x01\x00\x02ab"
    v4_long = (
        struct.pack(">hqi", 4, 125, 3) + b"\xad\x02" + b"m" * 300 + struct.pack(">q", 1) + b"\x00"
    )  # 301: 2 bytes
    key = _commit_key("group-ünï", "orders", 41)
    return [
        SIMPLE_COMMIT,
        CLASSIC_COMMIT,
        C848_COMMIT,
        (key, v3),
        (key, v4),
        (key, v4_tagged),
        (key, v4_long),
        (_commit_key(kind=0), v3),
        (key, v4 + b"trailing"),
        (key, v3 + b"trailing"),
    ]


def test_the_fast_reader_agrees_on_every_commit_every_truncation_and_every_changed_byte() -> None:
    from monitor.kafka.offsets_topic import _decode

    cases: list[tuple[bytes, bytes]] = []
    for key, value in _common_commits():
        cases.append((key, value))
        cases += [(key[:n], value) for n in range(len(key))]
        cases += [(key, value[:n]) for n in range(len(value))]
        for at in range(len(key)):
            for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
                cases.append((key[:at] + bytes([byte]) + key[at + 1 :], value))
        for at in range(min(len(value), 40)):
            for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
                cases.append((key, value[:at] + bytes([byte]) + value[at + 1 :]))
    fast = 0
    for key, value in cases:
        assert _outcome(decode, key, value) == _outcome(_decode, key, value), (key.hex(), value.hex())
        fast += isinstance(_outcome(decode, key, value), OffsetCommitRecord)
    assert fast > 1000, "most of the cases are commits the fast reader reads"
