"""What a broker can give the monitor, by the Apache Kafka version it runs (2.8 and later).

The monitor asks each broker which request versions it answers (ApiVersions) and chooses its
requests from that; some of what it shows then cannot exist on an older broker. Each such
feature is named here once, with the first Kafka release that gives it, so that the collectors,
the pages, the API and the tests say the same "not available on Kafka X".
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

KafkaVersion = tuple[int, int]
"""(major, minor) of an Apache Kafka release."""


class Feature(StrEnum):
    MAX_TIMESTAMP = "max_timestamp"
    """The offset and time of each partition's newest record (ListOffsets v7, KIP-734)."""
    LOG_DIR_VOLUME = "log_dir_volume"
    """The total and usable bytes of each log directory's volume (DescribeLogDirs v4, KIP-827)."""
    TIERED_STORAGE_CONFIGS = "tiered_storage_configs"
    """remote.storage.enable, local.retention.ms and local.retention.bytes (KIP-405)."""
    KIP848_GROUPS = "kip848_groups"
    """Consumer groups of the "consumer" rebalance protocol (ConsumerGroupDescribe, KIP-848)."""
    SIMPLE_GROUP_TOMBSTONE = "simple_group_tombstone"
    """A group that only committed offsets leaves a group tombstone in __consumer_offsets when it
    is deleted (the group coordinator of 4.0; before, its offset tombstones alone say so)."""
    SHARE_GROUPS = "share_groups"
    """Share groups (KIP-932, generally available in 4.1)."""


FIRST_RELEASE: Final[dict[Feature, KafkaVersion]] = {
    Feature.MAX_TIMESTAMP: (3, 0),
    Feature.LOG_DIR_VOLUME: (3, 3),
    Feature.TIERED_STORAGE_CONFIGS: (3, 0),
    Feature.KIP848_GROUPS: (4, 0),
    Feature.SIMPLE_GROUP_TOMBSTONE: (4, 0),
    Feature.SHARE_GROUPS: (4, 1),
}

LABELS: Final[dict[Feature, str]] = {
    Feature.MAX_TIMESTAMP: "the newest record's time per partition",
    Feature.LOG_DIR_VOLUME: "log directory volume size",
    Feature.TIERED_STORAGE_CONFIGS: "tiered storage topic configs",
    Feature.KIP848_GROUPS: "KIP-848 consumer groups",
    Feature.SIMPLE_GROUP_TOMBSTONE: "group tombstones of offset-only groups",
    Feature.SHARE_GROUPS: "share groups",
}

_RELEASE: Final = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


def parse_version(text: str) -> KafkaVersion:
    """ "2.8.2" or "3.9" as (2, 8) or (3, 9); ValueError for anything else."""
    match = _RELEASE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kafka version such as 3.9.1")
    return int(match.group(1)), int(match.group(2))


def version_text(version: KafkaVersion) -> str:
    """(3, 9) as "3.9", the way a version is shown and stored."""
    return f"{version[0]}.{version[1]}"


def available(feature: Feature, version: KafkaVersion) -> bool:
    return version >= FIRST_RELEASE[feature]


def unavailable_text(feature: Feature, version: KafkaVersion) -> str:
    """What is shown once for a feature the broker cannot give, e.g. "log directory volume size:
    not available on Kafka 2.8 (from 3.3)"."""
    first = version_text(FIRST_RELEASE[feature])
    return f"{LABELS[feature]}: not available on Kafka {version_text(version)} (from {first})"


def unavailable_features(version: KafkaVersion) -> list[Feature]:
    """The features a broker of `version` cannot give, in the order they are defined."""
    return [feature for feature in Feature if not available(feature, version)]
