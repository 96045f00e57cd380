"""Kafka protocol messages that kafka-python does not define, from schemas kept beside this module.

kafka-python 3.0 builds a message class from a JSON schema in the Kafka protocol's own format, read
from the package named by `load_json`; it ships no schema for ConsumerGroupDescribe (API key 69),
the only way to describe a KIP-848 ("consumer" protocol) group: a classic DescribeGroups answers
for such a group as if it did not exist; nor for the share groups' (KIP-932) ShareGroupDescribe
(77) and DescribeShareGroupOffsets (90). A response class registers itself by API key when it is
defined, so importing this module is what lets kafka-python decode the answers.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage


class ConsumerGroupDescribeRequest(ApiMessage, load_json=__package__):  # type: ignore[misc,call-arg]
    """GroupIds, IncludeAuthorizedOperations (versions 0-1, both flexible)."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=__package__):  # type: ignore[misc,call-arg]
    """Per group: error, state, epochs, assignor and members (with their current and target
    assignments as topic id, topic name and partitions). Version 1 adds each member's type."""


class ShareGroupDescribeRequest(ApiMessage, load_json=__package__):  # type: ignore[misc,call-arg]
    """GroupIds, IncludeAuthorizedOperations (version 1, Kafka 4.1+; 4.0's version 0 is gone)."""


class ShareGroupDescribeResponse(ApiMessage, load_json=__package__):  # type: ignore[misc,call-arg]
    """Per group: error, state, epochs, assignor and members (client, host, rack, subscribed
    topics and current assignment as topic id, topic name and partitions)."""


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=__package__):  # type: ignore[misc,call-arg]
    """Per group: its id and the topic partitions wanted (null: all of them). Versions 0-1."""


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=__package__):  # type: ignore[misc,call-arg]
    """Per group, topic and partition: the share-partition start offset, the leader epoch and,
    from version 1 (Kafka 4.2, KIP-1226), the lag the broker keeps (-1 when it does not know)."""


__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
]
