"""A Kafka cluster in memory, behind the same protocols as the real clients
(`monitor.kafka.protocol`): `FakeCluster` holds brokers, topics, partitions with their records,
configs and consumer groups; `FakeKafkaAdmin`, `FakeTimestampReader`, `FakeLogDirs` and
`FakeProbe` answer from it as `KafkaAdmin`, `RecordTimestampReader`, `LogDirClient` and
`ProbeClient` answer from a real cluster
(tests/contract holds the suite both pass), with the same partial-failure policy.

Failures are injected on the cluster, between requests:

- `stop_broker(id)`: the broker leaves the metadata; its partitions lose it from their ISR and
  elect the next in-sync replica (offline when none is left); its groups move to another
  coordinator; requests needing it go unanswered. `start_broker(id)` brings it back in sync.
- `silence_coordinator(id)`: the broker stays up but its group requests go unanswered (a
  coordinator that does not answer); `answer_coordinator(id)` ends that.
- `fail(operation, times)`: the next calls of one request fail as a whole (a timeout by default).
- a partition whose ISR is below its topic's `min.insync.replicas` has its end offset held back
  (OFFSET_NOT_AVAILABLE), as a Kafka 4 leader holds back its high watermark.
- `reader_capacity`: record timestamps resolved per read at most (a budget too short).
- `deny_commit_stream`: reading `__consumer_offsets` is refused (a missing ACL).

Commits, offset deletions and group membership changes are also written, as decoded records, to
the cluster's `offsets_log`: `FakeCommitStream` reads it as `CommitStreamReader` reads
`__consumer_offsets`.

Not thread-safe beyond what the collectors need: one lock guards every request and change.
"""

from monitor.kafka.fake.admin import FakeKafkaAdmin
from monitor.kafka.fake.cluster import ClusterState
from monitor.kafka.fake.readers import FakeCommitStream, FakeLogDirs, FakeProbe, FakeTimestampReader


class FakeCluster(ClusterState):
    """A fake cluster and the clients that answer from it."""

    def admin(self) -> FakeKafkaAdmin:
        return FakeKafkaAdmin(self)

    def reader(self) -> FakeTimestampReader:
        return FakeTimestampReader(self)

    def log_dirs(self) -> FakeLogDirs:
        return FakeLogDirs(self)

    def commit_stream(self) -> FakeCommitStream:
        return FakeCommitStream(self)

    def probe(self, group_id: str = "kafka-health-probe") -> FakeProbe:
        return FakeProbe(self, group_id)


__all__ = [
    "FakeCluster",
    "FakeCommitStream",
    "FakeKafkaAdmin",
    "FakeLogDirs",
    "FakeProbe",
    "FakeTimestampReader",
]
