"""`Workload`: plays a `Plan` on a cluster, and says on the terminal what happens and where to look.

`start()`:
1. Recreates the plan's topics (all but `keep_topics`, which are created when missing and get
   the plan's configs) and deletes its consumer groups, so every run tells the same story.
2. Writes the backdated history of the topics that have one.
3. Starts one producer thread per topic and one consumer thread per group.
4. Starts the timeline thread: it stops the plan's brokers when their time comes and says what to
   expect, then, once, where to look.

`stop()` sets one event every thread watches, joins them (the consumers commit and leave their
groups) and flushes the producers. It never restarts a broker: the stack that started the cluster
stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, but not in its `__all__`
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from monitor.devtools.workload.clients import ConsumerLoop, GroupStats, ProducerLoop, seed_history
from monitor.devtools.workload.plan import Plan, TopicPlan, due, members_of

log = logging.getLogger(__name__)
Report = Callable[[str], None]
StopBroker = Callable[[int], None]

_ADMIN_TIMEOUT = 30.0
_COORDINATOR_BUSY = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)
_READY_TIMEOUT = 60.0


class Workload:
    """The demo's client applications on `bootstrap_servers`; `stop_broker` stops one node of the
    local cluster (None: the timeline stops nothing)."""

    def __init__(
        self,
        plan: Plan,
        bootstrap_servers: str,
        report: Report,
        stop_broker: StopBroker | None = None,
        keep_topics: Sequence[str] = (),
    ) -> None:
        self.plan = plan
        self.bootstrap_servers = bootstrap_servers
        self._report = report
        self._stop_broker = stop_broker
        self.keep_topics = frozenset(keep_topics)
        self.stop_event = threading.Event()
        self.producers: dict[str, ProducerLoop] = {}
        self.consumers: dict[str, list[ConsumerLoop]] = {}
        self.group_stats: dict[str, GroupStats] = {}
        self.stopped_brokers: list[int] = []
        self.started_at: float | None = None
        self._clients: list[Producer] = []
        self._timeline: threading.Thread | None = None

    def say(self, message: str) -> None:
        self._report(f"{time.strftime('%H:%M:%S')} {message}")

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Prepare the topics and groups, write the history, start every thread. Raises
        KafkaException when the cluster refuses the topics (nothing is left running then)."""
        try:
            self._prepare()
            self._start_threads()
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 20.0) -> None:
        """Stop every thread and wait for them (each has `timeout` seconds). Idempotent."""
        self.stop_event.set()
        threads: list[threading.Thread] = [c for members in self.consumers.values() for c in members]
        threads += self.producers.values()
        if self._timeline is not None:
            threads.append(self._timeline)
        for thread in threads:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s did not stop within %gs", thread.name, timeout)
        for producer in self._clients:
            # Messages a broker cannot take (under min.insync.replicas) are dropped, not waited for.
            producer.flush(3)
            producer.purge()
            producer.close()
        if self._clients:
            self.say("stopped the workload's producers and consumers")
        self._clients.clear()

    def __enter__(self) -> Workload:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def elapsed(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    # -- 1. topics and groups ---------------------------------------------------------------

    def _prepare(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        recreate = [t for t in self.plan.topics if t.name not in self.keep_topics]
        kept = [t for t in self.plan.topics if t.name in self.keep_topics]
        self._delete_groups(admin)
        self._delete_topics(admin, [t.name for t in recreate])
        self._create_topics(admin, self.plan.topics)
        for topic in kept:
            self._set_configs(admin, topic)
        self._wait_for_leaders(admin, self.plan.topics)

    def _delete_groups(self, admin: AdminClient) -> None:
        """Delete the plan's groups that exist (none on a new cluster). A coordinator still loading
        (a cluster just started) is asked again for a while."""
        listed = admin.list_consumer_groups(request_timeout=_ADMIN_TIMEOUT).result(timeout=_ADMIN_TIMEOUT)
        existing = {str(g.group_id) for g in listed.valid or []}
        waiting = [g.group_id for g in self.plan.groups if g.group_id in existing]
        deadline = time.monotonic() + _READY_TIMEOUT
        while waiting:
            futures = admin.delete_consumer_groups(waiting, request_timeout=_ADMIN_TIMEOUT)
            waiting = []
            for group_id, future in futures.items():
                try:
                    future.result(timeout=_ADMIN_TIMEOUT)
                except KafkaException as exc:
                    if _code(exc) in _COORDINATOR_BUSY and time.monotonic() < deadline:
                        waiting.append(group_id)
                    elif _code(exc) != KafkaError.GROUP_ID_NOT_FOUND:
                        self.say(f"could not delete the consumer group {group_id} of an earlier run: {exc}")
            if waiting:
                time.sleep(0.5)

    def _delete_topics(self, admin: AdminClient, names: list[str]) -> None:
        existing = set(admin.list_topics(timeout=_ADMIN_TIMEOUT).topics)
        doomed = [n for n in names if n in existing]
        if not doomed:
            return
        for future in admin.delete_topics(doomed, operation_timeout=_ADMIN_TIMEOUT).values():
            future.result(timeout=_ADMIN_TIMEOUT)
        self.say(f"deleted the topics of an earlier run: {', '.join(doomed)}")

    def _create_topics(self, admin: AdminClient, topics: Sequence[TopicPlan]) -> None:
        """Create the missing topics; a topic still being deleted is retried until it is gone."""
        replicas = min(3, len(admin.list_topics(timeout=_ADMIN_TIMEOUT).brokers))
        deadline = time.monotonic() + _READY_TIMEOUT
        waiting = list(topics)
        while waiting:
            existing = set(admin.list_topics(timeout=_ADMIN_TIMEOUT).topics)
            new = [
                NewTopic(t.name, t.partitions, replication_factor=replicas, config=dict(t.configs))
                for t in waiting
                if t.name not in existing
            ]
            retry: list[TopicPlan] = []
            futures = admin.create_topics(new, operation_timeout=_ADMIN_TIMEOUT) if new else {}
            for topic in waiting:
                future = futures.get(topic.name)
                if future is None:
                    continue
                try:
                    future.result(timeout=_ADMIN_TIMEOUT)
                except KafkaException as exc:
                    if _code(exc) != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                        raise
                    retry.append(topic)  # the earlier run's topic is still being deleted
            waiting = retry
            if waiting:
                time.sleep(0.5)

    def _set_configs(self, admin: AdminClient, topic: TopicPlan) -> None:
        """SET only the plan's keys of a kept topic (IncrementalAlterConfigs)."""
        if not topic.configs:
            return
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in topic.configs.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, topic.name, incremental_configs=entries)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=_ADMIN_TIMEOUT)

    def _wait_for_leaders(self, admin: AdminClient, topics: Sequence[TopicPlan]) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT
        while True:
            metadata = admin.list_topics(timeout=_ADMIN_TIMEOUT).topics
            ready = all(
                t.name in metadata
                and len(metadata[t.name].partitions) == t.partitions
                and all(p.leader >= 0 for p in metadata[t.name].partitions.values())
                for t in topics
            )
            if ready:
                return
            if time.monotonic() > deadline:
                missing = KafkaError(KafkaError._TIMED_OUT, "the workload's topics have no leaders")
                raise KafkaException(missing)
            time.sleep(0.5)

    # -- 2, 3. history and threads ----------------------------------------------------------

    def _producer(self, acks: str) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "client.id": f"workload-acks-{acks}",
                "acks": acks,
                "linger.ms": 20,
                "message.timeout.ms": 30_000,
            }
        )
        self._clients.append(producer)
        return producer

    def _start_threads(self) -> None:
        by_acks = {acks: self._producer(acks) for acks in sorted({t.acks for t in self.plan.topics})}
        now_ms = int(time.time() * 1000)
        seeded: dict[str, int] = {}
        for topic in self.plan.topics:
            if topic.history_seconds > 0:
                seeded[topic.name] = seed_history(by_acks[topic.acks], topic, now_ms)
                self.say(
                    f"wrote {seeded[topic.name]:,} messages of backdated history to {topic.name} "
                    f"(record timestamps over the last {topic.history_seconds / 60:g} minutes)"
                )
        self.started_at = time.monotonic()
        partitions = {t.name: t.partitions for t in self.plan.topics}
        consumer_config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        for topic in self.plan.topics:
            producer = by_acks[topic.acks]
            loop = ProducerLoop(topic, producer, self.stop_event, self.say, seeded.get(topic.name, 0))
            self.producers[topic.name] = loop
            loop.start()
        for group in self.plan.groups:
            stats = self.group_stats[group.group_id] = GroupStats()
            count = members_of(group, partitions[group.topic])
            self.consumers[group.group_id] = [
                ConsumerLoop(
                    group, partitions[group.topic], consumer_config, self.stop_event, self.say,
                    self.started_at, stats, member, count,
                )
                for member in range(count)
            ]  # fmt: skip
            for consumer in self.consumers[group.group_id]:
                consumer.start()
        self._announce()
        self._timeline = threading.Thread(target=self._run_timeline, name="workload-timeline", daemon=True)
        self._timeline.start()

    def _announce(self) -> None:
        plan = self.plan
        self.say(f"workload started on {self.bootstrap_servers}; the monitor's view: {plan.cluster_url}")
        for topic in plan.topics:
            self.say(f"  topic {topic.name}: {topic.rate:g} msg/s; {topic.purpose or 'steady traffic'}")
        for group in plan.groups:
            self.say(f"  group {group.group_id} ({group.behaviour}) on {group.topic}: {group.expect}")
            self.say(f"    {plan.group_url(group.group_id)}")
        for step in plan.steps:
            at = f"{int(step.at_seconds // 60)}:{int(step.at_seconds % 60):02d}"
            self.say(f"  at +{at} broker {step.broker_id} stops")
        self.say(f"alerts: {plan.alerts_url}   notifications: {plan.inbox_url}")

    # -- 4. timeline ------------------------------------------------------------------------

    def _run_timeline(self) -> None:
        done = 0
        summarised = self.plan.summary_at_seconds is None
        while not self.stop_event.wait(0.5):
            for step in due(self.plan.steps, self.elapsed(), done):
                done += 1
                self._stop(step.broker_id, step.expect)
            if not summarised and self.elapsed() >= (self.plan.summary_at_seconds or 0):
                summarised = True
                self._summary()

    def _stop(self, broker_id: int, expect: str) -> None:
        if self._stop_broker is None:
            return
        self.say(f"stopping broker {broker_id} ...")
        try:
            self._stop_broker(broker_id)
        except Exception as exc:
            self.say(f"could not stop broker {broker_id}: {exc}")
            return
        self.stopped_brokers.append(broker_id)
        where = f"see {self.plan.alerts_url} and {self.plan.cluster_url}"
        self.say(f"stopped broker {broker_id}: {expect}; {where}")

    def _summary(self) -> None:
        plan = self.plan
        self.say(
            f"{self.elapsed() / 60:.0f} minutes in: every incident of the story should be on "
            f"{plan.alerts_url} (firing, pending, or inhibited by BrokerDown), and what was sent on "
            f"{plan.inbox_url}. Ctrl-C stops the demo."
        )


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None
