"""Leadership changes for the repair actions: preferred leader election and replica reordering.

- `elect_preferred_leaders`: ElectLeaders with election type PREFERRED (confluent-kafka). Kafka
  makes the first replica of each named partition its leader when that replica is alive and in
  sync; a partition already led by it answers ELECTION_NOT_NEEDED, which counts as done here.
- `reorder_replicas`: AlterPartitionReassignments (kafka-python: librdkafka lacks it) with the
  SAME replica set in another order, which only changes which replica is preferred: no data
  moves. A new order that adds or drops a broker is refused before anything is sent, so this
  adapter can never start a data-moving reassignment.

Moving leadership off a broker is the two in sequence: reorder so the chosen replica comes first,
then elect the preferred leaders of those partitions. Kafka 4.1 has no request that sets a
partition's leader directly; this is the smallest change that does it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import kafka
from confluent_kafka import ElectionType, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from monitor.core.errors import KafkaRequestError
from monitor.core.records import Partial, TopicPartition
from monitor.core.settings import ClusterConfig
from monitor.kafka.admin import KafkaAdmin
from monitor.kafka.pyclient import KafkaPythonClient
from monitor.kafka.records import partition_key
from monitor.kafka.translate import Outcome

_NOT_NEEDED: Final = KafkaError.ELECTION_NOT_NEEDED


class Reassigner(KafkaPythonClient):
    """AlterPartitionReassignments through kafka-python (see `KafkaPythonClient`). It sends what
    it is given: `LeaderAdmin` allows only reorderings; the probe moves its own topic's replicas."""

    def alter(
        self, orders: Mapping[TopicPartition, Sequence[int]], action: str = "reorder partition replicas"
    ) -> dict[str, str]:
        """Send the new replica lists; returns "topic:partition" -> the error of each refused one.
        `action` names the request in the error raised when it fails as a whole."""
        with self._lock:
            self._require_started()
            client = self._connect().admin
            try:
                answers = client.alter_partition_reassignments(
                    {kafka.TopicPartition(t, p): list(r) for (t, p), r in orders.items()},
                    timeout_ms=max(1, round(self.timeout * 1000)),
                )
            except Exception as exc:
                raise self._failed(action, exc) from exc
        errors = {partition_key(tp.topic, tp.partition): self._text(e()) for tp, e in answers.items() if e}
        for topic, partition in orders:
            if (topic, partition) not in {(tp.topic, tp.partition) for tp in answers}:
                errors.setdefault(partition_key(topic, partition), "the controller did not report on it")
        return errors


class LeaderAdmin(KafkaAdmin):
    """A `KafkaAdmin` with the two leadership requests of the repair actions.

    Each request blocks for at most about `request_timeout_seconds` and raises
    `KafkaUnavailableError` (no answer) or `KafkaRequestError` (refused as a whole); a partition
    refused on its own is in the answer's `errors` as "topic:partition".
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster)
        self._reassigner = Reassigner(cluster)

    def start(self) -> None:
        super().start()
        self._reassigner.start()

    def close(self) -> None:
        super().close()
        self._reassigner.close()

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition]) -> Partial[list[TopicPartition]]:
        """Elect the preferred (first) replica of each partition as its leader. `value`: the
        partitions now led by their preferred replica (elected, or already were)."""
        if not partitions:
            return Partial([], {})
        outcome = Outcome(self._config.secret_values(), self.timeout)
        asked = [KafkaTopicPartition(t, p) for t, p in partitions]
        with self._call("elect preferred leaders") as call:
            # confluent-kafka 2.16's binding rejects every timeout keyword of this call; the wait
            # on the future bounds it instead.
            future = self._admin().elect_leaders(ElectionType.PREFERRED, asked)
            answers = future.result(timeout=call.remaining())
        done: list[TopicPartition] = []
        for tp, error in answers.items():
            key = partition_key(tp.topic, tp.partition)
            if error is None or error.code() == _NOT_NEEDED:
                done.append((tp.topic, tp.partition))
                outcome.success()
            else:
                outcome.failure(key, KafkaException(error))
        return Partial(sorted(done), outcome.errors)

    def reorder_replicas(
        self, orders: Mapping[TopicPartition, Sequence[int]]
    ) -> Partial[list[TopicPartition]]:
        """Give each partition the replica order in `orders` (the same brokers, reordered).
        Raises KafkaRequestError, sending nothing, when an order is not a reordering of the
        partition's current replicas."""
        if not orders:
            return Partial([], {})
        topics = sorted({t for t, _ in orders})
        current = {
            (info.name, p.partition): p.replicas
            for info in self.describe_topics(topics)
            for p in info.partitions
        }
        for (topic, partition), order in orders.items():
            now = current.get((topic, partition))
            if now is None:
                raise KafkaRequestError(
                    f"topic {topic!r} on cluster {self.cluster.name!r} has no partition {partition}"
                )
            if sorted(order) != sorted(now) or len(set(order)) != len(order):
                raise KafkaRequestError(
                    f"refused to reassign {topic}:{partition} on cluster {self.cluster.name!r} from "
                    f"{list(now)} to {list(order)}: only a reordering of the same replicas is allowed"
                )
        errors = self._reassigner.alter(orders)
        return Partial(sorted(tp for tp in orders if partition_key(*tp) not in errors), errors)
