"""`ProbeClient`: the end-to-end probe of one cluster over confluent-kafka (KMinion's end-to-end
monitoring): a topic with a partition led by every broker, one message per partition produced
with acks=all, consumed back by the probe's own consumer group and committed.

Partial-failure policy: `prepare` raises as the admin requests do (the probe cannot run without
its topic), except the reassignment of partitions off a removed broker and the preferred-leader
election, which are best effort (logged, asked again next round); `probe` never
raises for a broker that fails: each partition's failure is its own result's `error`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]  # public, not in `__all__`
from confluent_kafka.cimpl import NewTopic

from monitor.core.errors import KafkaRequestError
from monitor.core.records import ProbePartition, ProbeResult
from monitor.core.settings import ClusterConfig
from monitor.kafka import records
from monitor.kafka.alter import ConfigChange, TopicConfigWriter, differs
from monitor.kafka.leaders import LeaderAdmin
from monitor.kafka.properties import ClientLog, ClientValue, client_config, rejected_configuration, scrub
from monitor.kafka.translate import is_unknown_topic

log = logging.getLogger(__name__)

_HEADER: Final = "kafka-health-probe"
_POLL_SECONDS: Final = 0.05


RETENTION: Final = {"retention.ms": "3600000", "segment.ms": "600000", "cleanup.policy": "delete"}
"""The probe topic's configuration: a probe message is read back within seconds, so an hour of
them is kept (segments roll every ten minutes so that whole segments can be deleted)."""


def assignment(broker_ids: Sequence[int], replication_factor: int) -> list[list[int]]:
    """Replicas of one partition per broker: broker i first (its preferred leader), then the
    next brokers in order, `replication_factor` in all (at most the number of brokers)."""
    ids = sorted(broker_ids)
    return [replicas_for(b, ids, replication_factor) for b in ids]


def replicas_for(owner: int, broker_ids: Sequence[int], replication_factor: int) -> list[int]:
    """The replicas of a partition probing `owner`: it first, then the brokers after it in order
    (`broker_ids`, and `owner` if not among them), `replication_factor` in all at most."""
    ids = sorted({*broker_ids, owner})
    start = ids.index(owner)
    factor = max(1, min(replication_factor, len(ids)))
    return [ids[(start + r) % len(ids)] for r in range(factor)]


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """How the probe topic changes to fit the brokers: partitions whose replicas move (partition
    -> the new replicas, the probed broker first) and partitions to add (their replicas)."""

    moves: dict[int, list[int]]
    additions: list[list[int]]

    def __bool__(self) -> bool:
        return bool(self.moves or self.additions)


def plan_topic(
    partitions: Sequence[ProbePartition],
    broker_ids: Sequence[int],
    retired: Collection[int],
    replication_factor: int,
) -> TopicPlan:
    """Fit the probe topic to the live brokers (`broker_ids`) so that every one of them is the
    probed (preferred) broker of a partition, and no replica stays on a `retired` broker (one
    gone from the cluster long enough to count as removed). A broker merely down is neither:
    its partition stays and fails the probe, which is how its outage shows.

    1. A live broker with no partition takes a spare one: a retired broker's, else the last
       partition of a broker that has two; only when there is none is a partition added.
    2. A retired broker's partition nobody took goes to the live broker probed by the fewest.
    3. Any other partition with a replica on a retired broker keeps its probed broker, if that
       one is live, and gets its replicas from the live brokers (a partition of a broker that is
       down waits: a reassignment onto it could not complete).
    """
    live = sorted(set(broker_ids))
    gone = set(retired) - set(live)
    owners = Counter(p.broker_id for p in partitions)
    spare = [p for p in partitions if p.broker_id in gone]
    for part in reversed(partitions):
        if part.broker_id not in gone and owners[part.broker_id] > 1:
            owners[part.broker_id] -= 1
            spare.append(part)
    moves: dict[int, list[int]] = {}
    additions: list[list[int]] = []
    for broker in (b for b in live if owners[b] == 0):
        if spare:
            moves[spare.pop(0).partition] = replicas_for(broker, live, replication_factor)
        else:
            additions.append(replicas_for(broker, live, replication_factor))
        owners[broker] += 1
    for part in spare:
        if part.broker_id in gone and live:
            broker = min(live, key=lambda b: (owners[b], b))
            owners[broker] += 1
            moves[part.partition] = replicas_for(broker, live, replication_factor)
    for part in partitions:
        if part.partition not in moves and part.broker_id in live and gone & set(part.replicas):
            moves[part.partition] = replicas_for(part.broker_id, live, replication_factor)
    return TopicPlan(moves, additions)


class _ProbeAdmin(LeaderAdmin, TopicConfigWriter):
    """The admin requests only the probe makes: a topic with an explicit assignment, partitions
    added with one, and its own partitions reassigned (data moves: the probe topic only); the
    preferred-leader election is the repair actions' (`LeaderAdmin`), the config writes the
    retention button's (`TopicConfigWriter`)."""

    def create_assigned_topic(self, name: str, replicas: list[list[int]]) -> bool:
        """Create the topic with the probe's retention; False when it exists already (made by
        someone else, with configs of their own)."""
        topic = NewTopic(
            name, num_partitions=len(replicas), replica_assignment=replicas, config=dict(RETENTION)
        )
        with self._call(f"create probe topic {name!r}") as call:
            futures = self._admin().create_topics(
                [topic], request_timeout=self.timeout, operation_timeout=self.timeout
            )
            try:
                futures[name].result(timeout=call.remaining())
            except KafkaException as exc:
                # Described as missing by a broker whose metadata had not caught up yet, or made
                # meanwhile: either way it is there.
                error = exc.args[0] if exc.args else None
                if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise
                return False
        return True

    def add_partitions(self, name: str, total: int, replicas: list[list[int]]) -> None:
        with self._call(f"add partitions to probe topic {name!r}") as call:
            futures = self._admin().create_partitions(
                [NewPartitions(name, total, replica_assignment=replicas)],
                request_timeout=self.timeout,
                operation_timeout=self.timeout,
            )
            futures[name].result(timeout=call.remaining())

    def reassign(self, name: str, moves: dict[int, list[int]]) -> dict[str, str]:
        """Give the probe topic's partitions the replicas in `moves`; "topic:partition" -> the
        error of each refused one."""
        orders = {(name, p): replicas for p, replicas in moves.items()}
        return self._reassigner.alter(orders, f"reassign probe topic {name!r}")

    def probe_partitions(self, name: str) -> list[ProbePartition] | None:
        """The topic's partitions, or None when it does not exist."""
        with self._call(f"describe probe topic {name!r}") as call:
            futures = self._admin().describe_topics(TopicCollection([name]), request_timeout=self.timeout)
            try:
                described = futures[name].result(timeout=call.remaining())
            except KafkaException as exc:
                if is_unknown_topic(exc):
                    return None
                raise
        info = records.topic_info(described)
        return [
            ProbePartition(p.partition, p.replicas[0], p.leader, tuple(p.replicas))
            for p in info.partitions
            if p.replicas
        ]


class ProbeClient:
    """`monitor.kafka.protocol.ProbeApi` on a real cluster.

    The constructor only builds configurations; `start()` creates the admin client, the producer
    (acks=all, idempotence off: one message, no retries past the budget) and the consumer of the
    probe's group (it only assigns, never subscribes, and commits explicitly). `probe` calls are
    serialised.
    """

    def __init__(self, cluster: ClusterConfig, group_id: str) -> None:
        self._cluster = cluster
        self._group_id = group_id
        base = dict(client_config(cluster))
        self._secrets = client_config(cluster).secret_values()
        self._producer_config: dict[str, ClientValue] = {
            **base,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 0,
        }
        self._consumer_config: dict[str, ClientValue] = {
            **base,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 20,
        }
        self._admin = _ProbeAdmin(cluster)
        self._configured: set[str] = set()
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ProbeClient(cluster={self._cluster.name!r}, group={self._group_id!r})"

    def start(self) -> None:
        """Create the clients. Raises ConfigError if librdkafka rejects a configuration."""
        self._admin.start()
        with self._lock:
            try:
                if self._producer is None:
                    self._producer = Producer(self._producer_config, logger=ClientLog())
                if self._consumer is None:
                    self._consumer = Consumer(self._consumer_config, logger=ClientLog())
            except KafkaException as exc:
                raise rejected_configuration(
                    exc, self._cluster.name, self._secrets, "the Kafka probe clients"
                ) from exc

    def close(self) -> None:
        with self._lock:
            consumer, self._consumer = self._consumer, None
            producer, self._producer = self._producer, None
        if consumer is not None:
            consumer.close()
        if producer is not None:
            producer.flush(0)
        self._admin.close()

    # -- the topic ----------------------------------------------------------------------------

    def prepare(
        self,
        topic: str,
        broker_ids: Sequence[int],
        replication_factor: int,
        retired: Collection[int] = (),
    ) -> list[ProbePartition]:
        if not broker_ids:
            raise KafkaRequestError(
                f"cannot prepare probe topic {topic!r} on cluster {self._cluster.name!r}: no broker is up"
            )
        found = self._admin.probe_partitions(topic)
        if found is None:
            if self._admin.create_assigned_topic(topic, assignment(broker_ids, replication_factor)):
                self._configured.add(topic)
            else:  # made before, and not yet in the metadata that answered: its configs are not ours
                self._configure(topic)
            return self._wait_for_leaders(topic)
        if topic not in self._configured:
            self._configure(topic)
        plan = plan_topic(found, broker_ids, retired, replication_factor)
        if plan.moves:
            self._reassign(topic, plan.moves)
        if plan.additions:
            self._admin.add_partitions(topic, len(found) + len(plan.additions), plan.additions)
        if plan:
            found = self._wait_for_leaders(topic)
        live = set(broker_ids)
        moved = [p.partition for p in found if not p.led_by_its_broker and p.broker_id in live]
        if moved:
            # Best effort: a partition whose preferred leader is not back in sync yet refuses,
            # and is asked again next round.
            try:
                errors = self._admin.elect_preferred_leaders([(topic, p) for p in moved]).errors
            except KafkaRequestError as exc:
                errors = {topic: str(exc)}
            if errors:
                log.info("probe topic %s: preferred leader election not done yet: %s", topic, errors)
            return self._admin.probe_partitions(topic) or found
        return found

    def _configure(self, topic: str) -> None:
        """Give a topic made before (or by hand) the probe's retention, once per process. Best
        effort: a refusal (no Alter permission) is logged, and the probe goes on."""
        try:
            current = self._admin.read_configs(topic, list(RETENTION))
            wrong = differs(current, RETENTION)
            self._admin.alter_configs(topic, [ConfigChange(name, RETENTION[name]) for name in wrong])
        except KafkaRequestError as exc:
            log.warning("probe topic %s keeps its configuration: %s", topic, exc)
        else:
            if wrong:
                log.info("probe topic %s on cluster %s: set %s", topic, self._cluster.name, wrong)
        self._configured.add(topic)

    def _reassign(self, topic: str, moves: dict[int, list[int]]) -> None:
        """Move the replicas of the probe's own partitions (data moves, unlike a repair's
        reorder); a refusal is logged and asked again next round."""
        log.info("probe topic %s on cluster %s: reassigning %s", topic, self._cluster.name, moves)
        errors = self._admin.reassign(topic, moves)
        for partition, error in sorted(errors.items()):
            log.warning("probe topic %s: reassigning %s was refused: %s", topic, partition, error)

    def _wait_for_leaders(self, topic: str) -> list[ProbePartition]:
        """The partitions of a topic just created or grown, once each has a leader (or at the
        request timeout, as they are)."""
        deadline = time.monotonic() + self._cluster.request_timeout_seconds
        while True:
            found = self._admin.probe_partitions(topic)
            if found and all(p.leader is not None for p in found):
                return found
            if time.monotonic() > deadline:
                return found or []
            time.sleep(0.2)

    # -- one round ----------------------------------------------------------------------------

    def probe(
        self, topic: str, partitions: Sequence[ProbePartition], budget_seconds: float
    ) -> list[ProbeResult]:
        with self._lock:
            producer, consumer = self._producer, self._consumer
            if producer is None or consumer is None:
                raise RuntimeError("ProbeClient.start() must be called before probing")
            return _Round(topic, list(partitions), self._describe).run(producer, consumer, budget_seconds)

    def _describe(self, error: KafkaError | BaseException) -> str:
        if isinstance(error, KafkaError):
            return scrub(f"{error.str()} ({error.name()})", self._secrets)
        return scrub(str(error) or type(error).__name__, self._secrets)


class _Round:
    """One probe message per partition: produce, consume back, commit. Times are monotonic and
    taken in this process, so no clock skew enters the latencies."""

    def __init__(
        self, topic: str, targets: list[ProbePartition], describe: Callable[[KafkaError | BaseException], str]
    ) -> None:
        self.topic = topic
        self.brokers = {t.partition: t.broker_id for t in targets}
        self.partitions = [t.partition for t in targets]
        self.describe = describe
        self.sent: dict[int, float] = {}
        self.produced: dict[int, tuple[int, float]] = {}
        self.received: dict[int, float] = {}
        self.errors: dict[int, str] = {}
        self.commit_seconds: float | None = None

    def _text(self, error: KafkaError | BaseException) -> str:
        return self.describe(error)

    def run(self, producer: Producer, consumer: Consumer, budget_seconds: float) -> list[ProbeResult]:
        deadline = time.monotonic() + max(0.1, budget_seconds)
        self._produce(producer, deadline)
        self._consume(consumer, deadline)
        self._commit(consumer, deadline)
        return [self._result(p) for p in self.partitions]

    def _produce(self, producer: Producer, deadline: float) -> None:
        for partition in self.partitions:

            def delivered(error: KafkaError | None, message: Message, partition: int = partition) -> None:
                if error is not None:
                    self.errors[partition] = f"produce failed: {self._text(error)}"
                else:
                    self.produced[partition] = (int(message.offset() or 0), time.monotonic())

            self.sent[partition] = time.monotonic()
            try:
                producer.produce(
                    self.topic,
                    value=str(time.time_ns()).encode(),
                    partition=partition,
                    headers=[(_HEADER, b"1")],
                    on_delivery=delivered,
                )
            except (KafkaException, BufferError) as exc:
                self.errors[partition] = f"produce failed: {self._text(exc)}"
        producer.flush(max(0.0, deadline - time.monotonic()))
        for partition in self.partitions:
            if partition not in self.produced and partition not in self.errors:
                self.errors[partition] = "produce failed: no acknowledgement (acks=all) within the budget"

    def _consume(self, consumer: Consumer, deadline: float) -> None:
        wanted = {p: offset for p, (offset, _) in self.produced.items()}
        if not wanted:
            return
        consumer.assign([TopicPartition(self.topic, p, offset) for p, offset in wanted.items()])
        try:
            while len(self.received) < len(wanted) and time.monotonic() < deadline:
                message = consumer.poll(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
                if message is None:
                    continue
                error = message.error()
                partition = message.partition()
                if error is not None:
                    if partition in wanted and error.code() != KafkaError._PARTITION_EOF:
                        self.errors.setdefault(partition, f"consume failed: {self._text(error)}")
                    continue
                if partition in wanted and message.offset() == wanted[partition]:
                    self.received[partition] = time.monotonic()
        finally:
            consumer.unassign()
        for partition in wanted:
            if partition not in self.received:
                self.errors.setdefault(
                    partition, "consume failed: the message did not come back within the budget"
                )

    def _commit(self, consumer: Consumer, deadline: float) -> None:
        done = [p for p in self.partitions if p in self.received]
        if not done:
            return
        offsets = [TopicPartition(self.topic, p, self.produced[p][0] + 1) for p in done]
        started = time.monotonic()
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            for partition in done:
                self.errors[partition] = f"commit failed: {self._text(exc)}"
            return
        self.commit_seconds = time.monotonic() - started
        for tp in answered or []:
            if tp.error is not None:
                self.errors[tp.partition] = f"commit failed: {self._text(tp.error)}"
        if time.monotonic() > deadline:
            log.info("probe commit on %s took %.3fs, past the budget", self.topic, self.commit_seconds)

    def _result(self, partition: int) -> ProbeResult:
        sent = self.sent.get(partition)
        produced = self.produced.get(partition)
        received = self.received.get(partition)
        return ProbeResult(
            partition=partition,
            broker_id=self.brokers[partition],
            produce_seconds=produced[1] - sent if produced and sent is not None else None,
            end_to_end_seconds=received - sent if received is not None and sent is not None else None,
            commit_seconds=self.commit_seconds if partition in self.received else None,
            error=self.errors.get(partition),
        )
