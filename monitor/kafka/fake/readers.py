"""The fake readers over a `ClusterState`: record timestamps, log dirs, the commit stream and
the probe."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Sequence

from monitor.core.errors import KafkaAuthorizationError, KafkaRequestError
from monitor.core.records import (
    CommitStreamBatch,
    GroupMetadataRecord,
    LogDirReplica,
    LogDirUsage,
    OffsetCommitRecord,
    Partial,
    ProbePartition,
    ProbeResult,
    RecordTimestamp,
)
from monitor.kafka.fake.admin import FakeClient, Tally
from monitor.kafka.fake.cluster import LOG_DIR_TOTAL_BYTES, ClusterState, FakePartition, FakeTopic
from monitor.kafka.probe import RETENTION, assignment, plan_topic
from monitor.kafka.protocol import LogDirs, Target


def _no_record(target: Target) -> RecordTimestamp:
    return RecordTimestamp(target[0], target[1], target[2], None, None)


class FakeTimestampReader(FakeClient):
    """`monitor.kafka.protocol.TimestampReader` over a `ClusterState`; at most
    `ClusterState.reader_capacity` targets resolve in one read."""

    def read(
        self, targets: Sequence[Target], budget_seconds: float
    ) -> tuple[dict[Target, RecordTimestamp], list[Target]]:
        resolved: dict[Target, RecordTimestamp] = {}
        with self.fake.lock:
            self._begin("read", "read record timestamps")
            capacity = self.fake.reader_capacity
            for target in dict.fromkeys(targets):
                if capacity is not None and len(resolved) >= capacity:
                    break
                found = self._resolve(target)
                if found is not None:
                    resolved[target] = found
        return resolved, [t for t in dict.fromkeys(targets) if t not in resolved]

    def _resolve(self, target: Target) -> RecordTimestamp | None:
        topic_name, number, offset = target
        if offset < 0:
            return _no_record(target)
        topic = self.fake.topics.get(topic_name)
        if topic is None or not 0 <= number < len(topic.partitions):
            return None
        part = topic.partitions[number]
        if part.leader is None or part.leader in self.fake.down:
            return None
        if not part.start <= offset < part.end:
            return _no_record(target)
        index = bisect_left([r.offset for r in part.records], offset)
        if index == len(part.records):
            return _no_record(target)
        record = part.records[index]
        return RecordTimestamp(
            topic_name, number, offset, record.offset, record.timestamp_ms, record.timestamp_type
        )


class FakeLogDirs(FakeClient):
    """`monitor.kafka.protocol.LogDirReader` over a `ClusterState`: one log dir per broker."""

    def describe(self, broker_ids: Sequence[int]) -> Partial[LogDirs]:
        replicas: list[LogDirReplica] = []
        usages: list[LogDirUsage] = []
        tally = Tally()
        with self.fake.lock:
            self._begin("describe", "list topics for log dirs")
            for broker in dict.fromkeys(broker_ids):
                if broker not in self.fake.brokers or broker in self.fake.down:
                    tally.unanswered(f"broker:{broker}", self.fake.no_answer())
                    continue
                tally.answered += 1
                log_dir = f"/var/lib/kafka/data-{broker}"
                mine = [
                    LogDirReplica(
                        broker, log_dir, topic.name, number, sum(r.size_bytes for r in part.records), 0, False
                    )
                    for topic in self.fake.topics.values()
                    for number, part in enumerate(topic.partitions)
                    if broker in part.replicas
                ]
                used = sum(r.size_bytes for r in mine)
                usages.append(LogDirUsage(broker, log_dir, LOG_DIR_TOTAL_BYTES, LOG_DIR_TOTAL_BYTES - used))
                replicas.extend(mine)
            tally.raise_if_unreachable(self.fake, "describe log dirs")
        replicas.sort(key=lambda r: (r.topic, r.partition, r.log_dir))
        return Partial((replicas, usages), tally.errors)


class FakeCommitStream(FakeClient):
    """`monitor.kafka.protocol.CommitStream` over a `ClusterState`'s offsets log."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._position: int | None = None

    def _check_allowed(self) -> None:
        if self.fake.deny_commit_stream:
            raise KafkaAuthorizationError(
                f"{self.fake.name}: reading __consumer_offsets is not allowed (Broker: Topic authorization "
                "failed); grant the monitor's principal Describe and Read on the topic __consumer_offsets, "
                "or set commit_stream: false for this cluster"
            )

    def seek_to_end(self) -> None:
        with self.fake.lock:
            self._begin("seek_to_end", "position the commit stream")
            self._check_allowed()
            self._position = len(self.fake.offsets_log)

    def poll(self, max_seconds: float) -> CommitStreamBatch:
        if self._position is None:
            raise RuntimeError("FakeCommitStream.seek_to_end() must be called before poll()")
        self.fake.wait_for_offsets_log(self._position, max_seconds)
        with self.fake.lock:
            self._begin("poll", "read the commit stream")
            self._check_allowed()
            records = self.fake.offsets_log[self._position :]
            self._position = len(self.fake.offsets_log)
        return CommitStreamBatch(
            commits=[r for r in records if isinstance(r, OffsetCommitRecord)],
            groups=[r for r in records if isinstance(r, GroupMetadataRecord)],
            caught_up=True,
        )


class FakeProbe(FakeClient):
    """`monitor.kafka.protocol.ProbeApi` over a `ClusterState`: each step takes
    `latency_seconds`; a partition whose leader is down or gone fails to produce, a group whose
    coordinator is down fails to commit."""

    latency_seconds = 0.002

    def __init__(self, cluster: ClusterState, group_id: str = "kafka-health-probe") -> None:
        super().__init__(cluster)
        self.group_id = group_id

    def _partitions_of(self, topic: str) -> list[ProbePartition]:
        return [
            ProbePartition(number, part.replicas[0], part.leader, tuple(part.replicas))
            for number, part in enumerate(self.fake.topic(topic).partitions)
        ]

    def prepare(
        self,
        topic: str,
        broker_ids: Sequence[int],
        replication_factor: int,
        retired: Collection[int] = (),
    ) -> list[ProbePartition]:
        with self.fake.lock:
            self._begin("prepare", f"prepare probe topic {topic!r}")
            if not broker_ids:
                raise KafkaRequestError(
                    f"cannot prepare probe topic {topic!r} on cluster {self.fake.name!r}: no broker is up"
                )
            if topic not in self.fake.topics:
                rows = assignment(broker_ids, replication_factor)
                self.fake.topics[topic] = FakeTopic(
                    topic, [FakePartition(r, list(r), r[0]) for r in rows], dict(RETENTION)
                )
            self.fake.topic(topic).configs.update(RETENTION)
            plan = plan_topic(self._partitions_of(topic), broker_ids, retired, replication_factor)
            parts = self.fake.topic(topic).partitions
            for number, replicas in plan.moves.items():
                # A reassignment: the new replicas catch up at once here; a leader removed from
                # the replicas hands over to the first live one.
                part = parts[number]
                part.replicas = list(replicas)
                part.isr = [b for b in replicas if b not in self.fake.down]
                if part.leader not in part.isr:
                    part.leader = part.isr[0] if part.isr else None
            parts.extend(FakePartition(r, list(r), r[0]) for r in plan.additions)
            for part in parts:
                preferred = part.replicas[0]
                if part.leader != preferred and preferred not in self.fake.down and preferred in part.isr:
                    part.leader = preferred
            return self._partitions_of(topic)

    def probe(
        self, topic: str, partitions: Sequence[ProbePartition], budget_seconds: float
    ) -> list[ProbeResult]:
        step = self.latency_seconds
        results = []
        with self.fake.lock:
            self._begin("probe", f"probe topic {topic!r}")
            coordinator = self.fake.coordinator(self.group_id)
            for target in partitions:
                part = self.fake.partition(topic, target.partition)
                if part.leader is None or part.leader in self.fake.down:
                    error = f"produce failed: {self.fake.no_answer()}"
                    results.append(ProbeResult(target.partition, target.broker_id, None, None, None, error))
                    continue
                (offset,) = self.fake.produce(topic, target.partition)
                if coordinator is None:
                    error = f"commit failed: {self.fake.no_answer()}"
                    results.append(
                        ProbeResult(target.partition, target.broker_id, step, 2 * step, None, error)
                    )
                    continue
                self.fake.commit(self.group_id, {(topic, target.partition): offset + 1})
                results.append(ProbeResult(target.partition, target.broker_id, step, 2 * step, step))
        return results
