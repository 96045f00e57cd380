"""`FakeKafkaAdmin` over a `ClusterState`, and what every fake client shares: starting, the
injected failures and the partial-failure tally (`monitor.kafka.translate.Outcome`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.records import (
    ClusterInfo,
    CommittedOffset,
    EndOffsetHeldBack,
    GroupDescription,
    ListedOffsets,
    Partial,
    PartitionOffsets,
    TopicConfigEntry,
    TopicInfo,
    TopicPartition,
)
from monitor.kafka.fake.cluster import (
    DEFAULT_CONFIGS,
    OFFSET_NOT_AVAILABLE,
    PREFERRED_NOT_AVAILABLE,
    UNKNOWN_TOPIC,
    ClusterState,
)
from monitor.kafka.records import CONFIG_KEYS, partition_key


class Tally:
    """`monitor.kafka.translate.Outcome` for the fake: raise when nothing answered and every
    failure was "no answer"."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.answered = 0
        self.refused = False

    def unanswered(self, key: str, text: str) -> None:
        self.errors[key] = text

    def refusal(self, key: str, text: str) -> None:
        self.errors[key] = text
        self.refused = True

    def raise_if_unreachable(self, cluster: ClusterState, action: str) -> None:
        if self.errors and not self.answered and not self.refused:
            raise KafkaUnavailableError(cluster.unanswered(action))


class FakeClient:
    def __init__(self, cluster: ClusterState) -> None:
        self.fake = cluster
        self._started = False

    def start(self) -> None:
        self._started = True

    def close(self) -> None:
        self._started = False

    def _begin(self, operation: str, action: str) -> None:
        if not self._started:
            raise RuntimeError(f"{type(self).__name__}.start() must be called before making requests")
        self.fake.check(operation, action)


class FakeKafkaAdmin(FakeClient):
    """`monitor.kafka.protocol.AdminApi` and `LeaderApi` over a `ClusterState`."""

    def describe_cluster(self) -> ClusterInfo:
        with self.fake.lock:
            self._begin("describe_cluster", "describe the cluster")
            live = self.fake.live
            registered = tuple(sorted(set(self.fake.brokers) - self.fake.unregistered))
            brokers = tuple(self.fake.brokers[b] for b in live)
            return ClusterInfo(self.fake.cluster_id, live[0], brokers, registered, self.fake.kafka_version)

    def list_topic_names(self, include_internal: bool) -> list[str]:
        with self.fake.lock:
            self._begin("list_topic_names", "list topics")
            return sorted(t.name for t in self.fake.topics.values() if include_internal or not t.internal)

    def describe_topics(self, names: Sequence[str], skip_unknown: bool = False) -> list[TopicInfo]:
        if not names:
            return []
        with self.fake.lock:
            self._begin("describe_topics", "describe topics")
            described = []
            for name in names:
                topic = self.fake.topics.get(name)
                if topic is None and skip_unknown:
                    continue
                if topic is None:
                    raise KafkaRequestError(
                        f"cannot describe topic {name!r} on cluster {self.fake.name!r}: the cluster "
                        f"refused the request: {UNKNOWN_TOPIC}"
                    )
                parts = tuple(p.info(i) for i, p in enumerate(topic.partitions))
                described.append(TopicInfo(topic.name, topic.internal, parts))
            return described

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition]) -> Partial[list[TopicPartition]]:
        with self.fake.lock:
            self._begin("elect_preferred_leaders", "elect preferred leaders")
            done: list[TopicPartition] = []
            errors: dict[str, str] = {}
            for topic, number in partitions:
                try:
                    part = self.fake.partition(topic, number)
                except KafkaRequestError:
                    errors[partition_key(topic, number)] = UNKNOWN_TOPIC
                    continue
                preferred = part.replicas[0]
                if preferred in self.fake.down or preferred not in part.isr:
                    errors[partition_key(topic, number)] = PREFERRED_NOT_AVAILABLE
                    continue
                part.leader = preferred
                done.append((topic, number))
            return Partial(sorted(done), errors)

    def reorder_replicas(
        self, orders: Mapping[TopicPartition, Sequence[int]]
    ) -> Partial[list[TopicPartition]]:
        with self.fake.lock:
            self._begin("reorder_replicas", "reorder partition replicas")
            for (topic, number), order in orders.items():
                now = self.fake.partition(topic, number).replicas
                if sorted(order) != sorted(now) or len(set(order)) != len(order):
                    raise KafkaRequestError(
                        f"refused to reassign {topic}:{number} on cluster {self.fake.name!r} from "
                        f"{now} to {list(order)}: only a reordering of the same replicas is allowed"
                    )
            for (topic, number), order in orders.items():
                self.fake.partition(topic, number).replicas = list(order)
            return Partial(sorted(orders), {})

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> None:
        with self.fake.lock:
            self._begin("create_topic", f"create topic {name!r}")
            self.fake.create_topic(name, partitions, replication_factor, configs)

    def describe_topic_configs(
        self, topics: Sequence[str], names: Collection[str] | None = CONFIG_KEYS
    ) -> Partial[dict[str, list[TopicConfigEntry]]]:
        value: dict[str, list[TopicConfigEntry]] = {}
        tally = Tally()
        wanted = list(dict.fromkeys(topics))
        if not wanted:
            return Partial(value, tally.errors)
        with self.fake.lock:
            self._begin("describe_topic_configs", "describe topic configs")
            for name in wanted:
                topic = self.fake.topics.get(name)
                if topic is None:
                    tally.refusal(name, UNKNOWN_TOPIC)
                    continue
                keys = sorted(set(DEFAULT_CONFIGS) | set(topic.configs))
                value[name] = [
                    TopicConfigEntry(
                        name,
                        key,
                        topic.config(key),
                        "DYNAMIC_TOPIC_CONFIG" if key in topic.configs else "DEFAULT_CONFIG",
                    )
                    for key in keys
                    if names is None or key in names
                ]
                tally.answered += 1
        return Partial(value, tally.errors)

    def list_offsets(
        self,
        partitions: Sequence[TopicPartition],
        leaders: Mapping[TopicPartition, int] | None = None,
        known: Mapping[TopicPartition, PartitionOffsets] | None = None,
    ) -> ListedOffsets:
        value: dict[TopicPartition, PartitionOffsets] = {}
        held_back: dict[TopicPartition, EndOffsetHeldBack] = {}
        tally = Tally()
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return ListedOffsets(value, tally.errors)
        with self.fake.lock:
            self._begin("list_offsets", "list offsets")
            for topic_name, number in wanted:
                key = partition_key(topic_name, number)
                topic = self.fake.topics.get(topic_name)
                if topic is None or not 0 <= number < len(topic.partitions):
                    tally.refusal(key, UNKNOWN_TOPIC)
                    continue
                part = topic.partitions[number]
                if part.leader is None or part.leader in self.fake.down:
                    tally.unanswered(key, f"the leader did not answer within {self.fake.timeout:g}s")
                    continue
                tally.answered += 1
                if len(part.isr) < int(topic.config("min.insync.replicas")):
                    held_back[(topic_name, number)] = EndOffsetHeldBack(
                        topic_name, number, part.start, OFFSET_NOT_AVAILABLE
                    )
                    continue
                newest = max(part.records, key=lambda r: r.timestamp_ms, default=None)
                value[(topic_name, number)] = PartitionOffsets(
                    topic_name,
                    number,
                    part.start,
                    part.end,
                    newest.offset if newest is not None else None,
                    newest.timestamp_ms if newest is not None else None,
                )
            tally.raise_if_unreachable(self.fake, "list offsets")
        return ListedOffsets(value, tally.errors, held_back)

    def list_end_offsets(
        self, partitions: Sequence[TopicPartition], leaders: Mapping[TopicPartition, int] | None = None
    ) -> Partial[dict[TopicPartition, int]]:
        listed = self.list_offsets(partitions, leaders)
        return Partial({key: offsets.end for key, offsets in listed.value.items()}, listed.errors)

    def list_group_ids(self) -> list[str]:
        with self.fake.lock:
            self._begin("list_group_ids", "list consumer groups")
            return sorted(g.group_id for g in self.fake.groups.values() if g.committed or g.members)

    def list_unwatched_groups(self) -> dict[str, str]:
        with self.fake.lock:
            return dict(self.fake.unwatched_groups)

    def _coordinator(self, group_id: str, tally: Tally) -> tuple[bool, int | None]:
        """(whether the group's coordinator answers, which broker it is)."""
        node = self.fake.coordinator(group_id)
        if node is None or node in self.fake.silent_coordinators:
            tally.unanswered(group_id, self.fake.no_answer())
            return False, node
        tally.answered += 1
        return True, node

    def describe_groups(self, group_ids: Sequence[str]) -> Partial[list[GroupDescription]]:
        described: list[GroupDescription] = []
        tally = Tally()
        wanted = list(dict.fromkeys(group_ids))
        if not wanted:
            return Partial(described, tally.errors)
        with self.fake.lock:
            self._begin("describe_groups", "describe consumer groups")
            for group_id in wanted:
                answers, node = self._coordinator(group_id, tally)
                if not answers:
                    continue
                group = self.fake.groups.get(group_id)
                if group is None or not (group.committed or group.members):
                    described.append(GroupDescription(group_id, "Dead", "", None, node, ()))
                elif group.members:
                    members = tuple(group.members)
                    described.append(GroupDescription(group_id, "Stable", "consumer", "range", node, members))
                else:
                    described.append(GroupDescription(group_id, "Empty", "", None, node, (), is_simple=True))
            tally.raise_if_unreachable(self.fake, "describe consumer groups")
        return Partial(described, tally.errors)

    def committed_offsets(self, group_ids: Sequence[str]) -> Partial[dict[str, list[CommittedOffset]]]:
        value: dict[str, list[CommittedOffset]] = {}
        tally = Tally()
        wanted = list(dict.fromkeys(group_ids))
        if not wanted:
            return Partial(value, tally.errors)
        with self.fake.lock:
            self._begin("committed_offsets", "fetch committed offsets")
            for group_id in wanted:
                answers, _ = self._coordinator(group_id, tally)
                if not answers:
                    continue
                group = self.fake.groups.get(group_id)
                committed = group.committed if group is not None else {}
                value[group_id] = [
                    CommittedOffset(group_id, topic, partition, offset)
                    for (topic, partition), offset in sorted(committed.items())
                    if offset >= 0
                ]
            tally.raise_if_unreachable(self.fake, "fetch committed offsets")
        return Partial(value, tally.errors)
