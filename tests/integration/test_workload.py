"""The demo's workload on the real test cluster, its story compressed four times: each behaviour
leaves its signature in Kafka itself (committed offsets, group members, log start offsets, the ISR),
where the monitor will read it. The timeline stops one broker; the test starts it again and waits
until it is back."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, TopicPartition

from monitor.devtools.workload import Workload, demo_plan
from monitor.devtools.workload.plan import Plan
from tests.fixtures.kafka import KafkaTestHelper

T = TypeVar("T")
SPEED = 4.0
STOPPED_BROKER = 3


@dataclass
class Snapshot:
    at: float
    committed: dict[tuple[str, int], int | None]
    ends: dict[int, int]

    def lag(self) -> int:
        return sum(self.ends[p] - (c or 0) for (_, p), c in self.committed.items())


class Observer:
    """Reads a group's committed offsets and its topic's end offsets without joining the group;
    in the background it records every committed offset of one group, to catch a rewind."""

    def __init__(self, kafka: KafkaTestHelper) -> None:
        self.kafka = kafka
        self.consumers: dict[str, Consumer] = {}
        self.history: list[dict[int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _consumer(self, group: str) -> Consumer:
        if group not in self.consumers:
            self.consumers[group] = Consumer(
                {
                    "bootstrap.servers": self.kafka.bootstrap_servers,
                    "group.id": group,
                    "enable.auto.commit": False,
                }
            )
        return self.consumers[group]

    def committed(self, group: str, topic: str, partitions: int) -> dict[tuple[str, int], int | None]:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        answer = self._retry(lambda: self._consumer(group).committed(wanted, timeout=10))
        return {(topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in answer}

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """A new client each time: one made before a broker stop keeps asking the old leader."""

        def ask() -> tuple[int, int]:
            probe = Consumer(
                {"bootstrap.servers": self.kafka.bootstrap_servers, "group.id": "workload-probe"}
            )
            try:
                low, high = probe.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                return int(low), int(high)
            finally:
                probe.close()

        return self._retry(ask)

    def _retry(self, call: Callable[[], T]) -> T:
        """Leaders move when the timeline stops a broker: a client's metadata is stale a moment."""
        return self.kafka.wait_for(
            lambda: [call()], timeout=30, message="an answer", ignore=(KafkaException,)
        )[0]

    def snapshot(self, group: str, topic: str, partitions: int) -> Snapshot:
        committed = self.committed(group, topic, partitions)
        ends = {p: self.watermarks(topic, p)[1] for p in range(partitions)}
        return Snapshot(time.monotonic(), committed, ends)

    def watch(self, group: str, topic: str, partitions: int) -> None:
        def loop() -> None:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.kafka.bootstrap_servers,
                    "group.id": group,
                    "enable.auto.commit": False,
                }
            )
            try:
                while not self._stop.wait(0.5):
                    try:
                        answer = consumer.committed(
                            [TopicPartition(topic, p) for p in range(partitions)], timeout=5
                        )
                    except Exception:
                        continue  # a broker stopping: the next read will do
                    self.history.append({tp.partition: tp.offset for tp in answer if tp.offset >= 0})
            finally:
                consumer.close()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for consumer in self.consumers.values():
            consumer.close()


def _went_back(history: list[dict[int, int]]) -> list[tuple[int, int, int]]:
    backs = []
    for before, after in itertools.pairwise(history):
        for partition, offset in after.items():
            if partition in before and offset < before[partition]:
                backs.append((partition, before[partition], offset))
    return backs


@pytest.fixture
def plan() -> Plan:
    base = demo_plan(
        web_url="http://127.0.0.1:8080",
        cluster="test",
        nodes=3,
        stop_brokers=(STOPPED_BROKER,),
        speed=SPEED,
        prefix=f"wl{uuid.uuid4().hex[:6]}-",
    )
    # A faster telemetry producer fills retention.bytes (2 MiB + a 1 MiB segment) within the test.
    topics = tuple(replace(t, rate=120) if t.name.endswith("telemetry") else t for t in base.topics)
    return replace(base, topics=topics)


@pytest.fixture
def observer(kafka: KafkaTestHelper) -> Iterator[Observer]:
    watcher = Observer(kafka)
    try:
        yield watcher
    finally:
        watcher.close()


def test_each_behaviour_leaves_its_signature_on_the_cluster(
    kafka: KafkaTestHelper, plan: Plan, observer: Observer
) -> None:
    said: list[str] = []
    workload = Workload(plan, kafka.bootstrap_servers, said.append, kafka.cluster.stop_node)
    names = {g.behaviour.value + ("-loss" if "inventory" in g.topic else ""): g for g in plan.groups}
    healthy, slow, stopped = names["healthy"], names["slow"], names["stopped"]
    stalled, rewinding, at_risk = names["stalled"], names["rewinding"], names["slow-loss"]
    telemetry = next(t for t in plan.topics if t.name.endswith("telemetry"))
    inventory = next(t for t in plan.topics if t.name.endswith("inventory.events"))
    groups = (healthy, slow, stopped, stalled, at_risk)
    try:
        workload.start()
        observer.watch(rewinding.group_id, rewinding.topic, plan.topic(rewinding.topic).partitions)
        time.sleep(15)  # past the stop and the stall (10 s and 20 s at speed 1)
        first = {
            g.group_id: observer.snapshot(g.group_id, g.topic, plan.topic(g.topic).partitions) for g in groups
        }

        # The broker stop of the timeline (2 minutes at speed 1), and its effect on the ISR.
        kafka.wait_for(
            lambda: STOPPED_BROKER in workload.stopped_brokers, timeout=40, message="the broker stop"
        )
        assert not next(n for n in kafka.cluster.status() if n.node_id == STOPPED_BROKER).running

        def shrunk() -> bool:
            kafka.renew_admin()
            meta = kafka.admin.list_topics(plan.groups[0].topic, timeout=10).topics[plan.groups[0].topic]
            return all(STOPPED_BROKER not in p.isrs and len(p.isrs) == 2 for p in meta.partitions.values())

        kafka.wait_for(shrunk, timeout=30, message="the ISR without the stopped broker")
        time.sleep(max(0.0, 30 - (time.monotonic() - min(s.at for s in first.values()))))
        second = {
            g.group_id: observer.snapshot(g.group_id, g.topic, plan.topic(g.topic).partitions) for g in groups
        }
        # Healthy: keeps up (a second or two of messages at most; a loaded machine may hold one
        # snapshot a little longer behind, so the group is watched until it is seen caught up).
        healthy_partitions = plan.topic(healthy.topic).partitions
        kafka.wait_for(
            lambda: (
                observer.snapshot(healthy.group_id, healthy.topic, healthy_partitions).lag()
                <= plan.topic(healthy.topic).rate * 3
            ),
            timeout=30,
            message="the healthy group to be caught up",
        )
        described = kafka.admin.describe_consumer_groups([stopped.group_id, stalled.group_id])
        states = {group_id: future.result(timeout=30) for group_id, future in described.items()}

        # Retention: the size cap and the short retention.ms both moved the log start forward.
        kafka.wait_for(
            lambda: observer.watermarks(telemetry.name, 0)[0] > 0,
            timeout=40,
            message="telemetry's start to move",
        )
        kafka.wait_for(
            lambda: all(observer.watermarks(inventory.name, p)[0] > 0 for p in range(inventory.partitions)),
            timeout=60,
            message="inventory.events' start to move",
        )
        # Data loss: the slow group's next offset was deleted; it skips to the log start.
        kafka.wait_for(
            lambda: workload.group_stats[at_risk.group_id].lost > 0,
            timeout=60,
            message="the group to lose messages",
        )
    finally:
        workload.stop()
        kafka.start_broker(STOPPED_BROKER)

    # Slow: commits on every partition and falls further behind.
    assert all(c is not None for c in second[slow.group_id].committed.values()), second[slow.group_id]
    assert second[slow.group_id].lag() > first[slow.group_id].lag() + 100
    # Stopped: nobody in the group, offsets frozen, lag growing.
    assert first[stopped.group_id].committed == second[stopped.group_id].committed
    assert second[stopped.group_id].lag() > first[stopped.group_id].lag()
    # Stalled: one member, the same committed offsets, lag growing.
    assert first[stalled.group_id].committed == second[stalled.group_id].committed
    assert second[stalled.group_id].lag() > first[stalled.group_id].lag()
    assert states[stopped.group_id].state == ConsumerGroupState.EMPTY and not states[stopped.group_id].members
    assert states[stalled.group_id].state == ConsumerGroupState.STABLE
    assert len(states[stalled.group_id].members) == plan.topic(stalled.topic).partitions
    assert len(workload.group_stats[stalled.group_id].stalled) == plan.topic(stalled.topic).partitions
    # Rewinding: a committed offset went down on the cluster, as the workload says it did.
    assert _went_back(observer.history), observer.history[-5:]
    assert workload.group_stats[rewinding.group_id].rewinds
    # The data-loss group is behind on a topic whose start moves: lag grows.
    assert second[at_risk.group_id].lag() > first[at_risk.group_id].lag()
    # The terminal said what happened and where to look.
    text = "\n".join(said)
    assert f"stopped broker {STOPPED_BROKER}: expect BrokerDown" in text
    assert "http://127.0.0.1:8080/alerts" in text
    assert f"group {stopped.group_id} closed its consumers" in text
    assert f"group {stalled.group_id} stalled" in text
    assert f"group {rewinding.group_id} rewound partition" in text
    assert f"group {at_risk.group_id}: retention deleted" in text
    assert "stopped the workload's producers and consumers" in text
    members = [c for group in workload.consumers.values() for c in group]
    assert all(not t.is_alive() for t in [*members, *workload.producers.values()])
