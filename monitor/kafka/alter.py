"""Topic config writes: IncrementalAlterConfigs for the retention button.

Never AlterConfigs: it replaces a topic's whole set of dynamic configs, so a key the request does
not name would silently fall back to its default. IncrementalAlterConfigs changes only the keys
named, each with its own operation: SET a value, or DELETE the topic's own value so the broker's
default applies again (how a revert restores a value that was a default).

`TopicConfigWriter` is a `KafkaAdmin` (same lifecycle, timeouts, error translation and client
replacement after an unanswered request) with the two requests the act stage needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, but not in its `__all__`
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from monitor.core.errors import KafkaRequestError
from monitor.core.records import TopicConfigEntry
from monitor.kafka.admin import KafkaAdmin

SOURCE_DYNAMIC_TOPIC = "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One key of one topic: `value` to SET, or None to DELETE the topic's own value."""

    name: str
    value: str | None


class TopicConfigWriter(KafkaAdmin):
    """Reads and incrementally alters the configs of single topics.

    Each request blocks for at most about `request_timeout_seconds` and raises
    `KafkaUnavailableError` (no answer: retry later) or `KafkaRequestError` (refused: an invalid
    value, an unknown topic, not authorised).
    """

    def read_configs(self, topic: str, names: Sequence[str]) -> dict[str, TopicConfigEntry]:
        """The named configs of `topic` in force now, with where each value comes from."""
        described = self.describe_topic_configs([topic], names)
        if topic not in described.value:
            reason = described.errors.get(topic, "no answer for the topic")
            raise KafkaRequestError(
                f"cannot read the configs of topic {topic!r} on cluster {self.cluster.name!r}: {reason}"
            )
        return {entry.name: entry for entry in described.value[topic]}

    def alter_configs(self, topic: str, changes: Sequence[ConfigChange]) -> None:
        """Apply `changes` to `topic` in one IncrementalAlterConfigs request (all or nothing: the
        controller validates every key before changing any)."""
        if not changes:
            return
        entries = [
            ConfigEntry(
                change.name,
                change.value,
                incremental_operation=(
                    AlterConfigOpType.SET if change.value is not None else AlterConfigOpType.DELETE
                ),
            )
            for change in changes
        ]
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        with self._call(f"alter the configs of topic {topic!r}") as call:
            futures = self._admin().incremental_alter_configs([resource], request_timeout=self.timeout)
            for future in futures.values():
                future.result(timeout=call.remaining())


def differs(current: Mapping[str, TopicConfigEntry], wanted: Mapping[str, str | None]) -> list[str]:
    """The keys whose value in force is not the wanted one (None: any non-topic-level value)."""
    wrong = []
    for name, value in wanted.items():
        entry = current.get(name)
        if value is None:
            if entry is not None and entry.source == SOURCE_DYNAMIC_TOPIC:
                wrong.append(name)
        elif entry is None or entry.value != value:
            wrong.append(name)
    return wrong
