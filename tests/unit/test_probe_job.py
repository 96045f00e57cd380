"""The end-to-end probe job (monitor/collect/jobs/probe.py) on the fake cluster: the topic fitted
to the brokers, one result per partition, and a stopped broker failing the partition it led."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from monitor.collect.jobs import probe
from monitor.collect.jobs.offsets import OffsetsCollector
from monitor.core.clock import FakeClock
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import BrokerInfo, ProbePartition, ProbeResult
from monitor.core.settings import ClusterConfig, CollectConfig, ProbeConfig
from monitor.kafka.fake import FakeCluster
from monitor.kafka.probe import plan_topic
from monitor.store.runs import Run
from tests.fixtures.collect import T0, RecordingWriter, fake_context

TOPIC = "kafka-health-probe"


class ProbeRig:
    def __init__(self, brokers: int = 3, name: str = "prod") -> None:
        self.clock = FakeClock(T0)
        self.kafka = FakeCluster("prod", brokers=brokers, clock=self.clock)
        self.writer = RecordingWriter()
        self.context = fake_context(  # no store: the writer records the rows
            self.kafka,
            self.writer,
            self.clock,
            CollectConfig(probe=ProbeConfig(enabled=True)),
            cluster=ClusterConfig(name=name, bootstrap_servers=["127.0.0.1:9092"]),
        )
        self.job = probe.build(self.context)

    def cycle(self) -> tuple[Run, dict[int, tuple[ProbeResult, Any]]]:
        run = Run("prod", "probe", self.clock.now())
        self.job(run)
        self.clock.advance(10)
        _, write = self.writer.writes[-1]
        cells = {
            name: cell.cell_contents
            for name, cell in zip(write.__code__.co_freevars, write.__closure__ or (), strict=True)
        }
        return run, {result.broker_id: (result, leader) for result, leader in cells["rows"]}


@pytest.fixture
def rig() -> ProbeRig:
    return ProbeRig()


def test_the_first_run_creates_the_topic_with_a_partition_led_by_every_broker(rig: ProbeRig) -> None:
    run, rows = rig.cycle()

    parts = rig.kafka.topic(TOPIC).partitions
    assert [(p.replicas[0], p.leader, len(p.replicas)) for p in parts] == [(1, 1, 3), (2, 2, 3), (3, 3, 3)]
    assert sorted(rows) == [1, 2, 3]
    assert all(
        r.ok and r.produce_seconds and r.end_to_end_seconds and r.commit_seconds for r, _ in rows.values()
    )
    assert run.problems == [] and run.counts == {"partitions": 3, "succeeded": 3, "failed": 0}
    committed = rig.kafka.groups["kafka-health-probe"].committed
    assert committed == {(TOPIC, p): rig.kafka.partition(TOPIC, p).end for p in range(3)}, (
        "each message committed"
    )


def test_a_stopped_broker_fails_the_partition_it_led_and_only_that_one(rig: ProbeRig) -> None:
    rig.cycle()
    rig.kafka.stop_broker(2)

    run, rows = rig.cycle()

    failed, leader = rows[2]
    assert not failed.ok and failed.produce_seconds is None
    assert failed.error is not None and "broker 2 does not lead its probe partition 1" in failed.error
    assert leader == 3, "the partition moved to the next in-sync replica"
    assert rows[1][0].ok and rows[3][0].ok
    assert run.counts["failed"] == 1 and len(run.problems) == 1 and "broker 2" in run.problems[0]


def test_a_returning_broker_gets_its_partition_back_and_probes_again(rig: ProbeRig) -> None:
    rig.cycle()
    rig.kafka.stop_broker(2)
    rig.cycle()
    rig.kafka.start_broker(2)

    run, rows = rig.cycle()

    assert rig.kafka.partition(TOPIC, 1).leader == 2, "the preferred leader was elected back"
    assert rows[2][0].ok and run.counts["failed"] == 0


def test_a_new_broker_gets_a_partition_of_its_own() -> None:
    rig = ProbeRig(brokers=2)
    rig.cycle()
    rig.kafka.brokers[3] = BrokerInfo(3, "127.0.0.1", 9094, "rack-0")

    _, rows = rig.cycle()

    assert sorted(rows) == [1, 2, 3]
    assert rig.kafka.partition(TOPIC, 2).replicas[0] == 3 and rows[3][0].ok


def test_a_cluster_that_does_not_answer_fails_the_run(rig: ProbeRig) -> None:
    rig.cycle()
    rig.kafka.fail("probe")

    with pytest.raises(KafkaUnavailableError, match="no answer within"):
        rig.job(Run("prod", "probe", rig.clock.now()))


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_each_round_is_counted_under_kminions_names_and_types() -> None:
    rig = ProbeRig(name="kminion-names")
    one = {"cluster": "kminion-names", "partition_id": "1", "broker": "2"}
    rig.cycle()
    rig.kafka.stop_broker(2)
    rig.cycle()

    # Partition 1 made one round trip, then was not produced to (its broker is down): KMinion
    # produces only to leaders, so that is neither a message produced nor one lost.
    assert _sample("kminion_end_to_end_messages_produced_total", **one) == 1
    assert _sample("kminion_end_to_end_messages_received_total", **one) == 1
    assert _sample("kminion_end_to_end_messages_lost_total", **one) == 0
    assert _sample("kminion_end_to_end_roundtrip_latency_seconds_count", **one) == 1
    assert _sample("kminion_end_to_end_produce_latency_seconds_bucket", le="0.005", **one) == 1
    other = {"cluster": "kminion-names", "partition_id": "0", "broker": "1"}
    assert _sample("kminion_end_to_end_messages_received_total", **other) == 2
    assert _sample("kminion_end_to_end_offset_commits_total", cluster="kminion-names") == 2
    assert _sample("kminion_end_to_end_offset_commits_failed_total", cluster="kminion-names") == 0
    assert _sample("kminion_end_to_end_offset_commit_latency_seconds_count", cluster="kminion-names") == 2


def test_the_probes_group_is_not_sampled_as_a_group_of_the_cluster(rig: ProbeRig) -> None:
    rig.kafka.create_topic("orders", 1, 1)
    rig.kafka.produce("orders", 0, timestamps_ms=[rig.kafka.now_ms()])
    rig.kafka.commit("billing", {("orders", 0): 1})
    rig.cycle()
    assert "kafka-health-probe" in rig.context.admin.list_group_ids(), "the probe committed as a group"

    run = Run("prod", "offsets", rig.clock.now())
    OffsetsCollector(rig.context)(run)

    batch = rig.writer.batches()[-1]
    assert {s.committed.group_id for s in batch.group_offsets} == {"billing"}
    assert run.counts["groups"] == 1
    assert rig.context.watches_group("billing") and not rig.context.watches_group("kafka-health-probe")


def test_the_topic_keeps_an_hour_of_probe_messages(rig: ProbeRig) -> None:
    rig.cycle()

    configs = rig.kafka.topic(TOPIC).configs
    assert configs["retention.ms"] == "3600000" and configs["cleanup.policy"] == "delete"
    assert int(configs["segment.ms"]) < int(configs["retention.ms"]), "whole segments can be deleted"


def _results(rig: ProbeRig) -> tuple[Run, list[ProbeResult]]:
    run, _ = rig.cycle()
    _, write = rig.writer.writes[-1]
    rows = next(c.cell_contents for c in write.__closure__ or () if isinstance(c.cell_contents, list))
    return run, [result for result, _ in rows]


def test_a_removed_broker_fails_until_it_counts_as_removed_then_its_partition_is_reassigned() -> None:
    rig = ProbeRig()
    rig.cycle()
    rig.kafka.stop_broker(3)

    # 1. Down, not yet removed: its partition stays and fails, the replicas stay where they were.
    run, results = _results(rig)
    assert [r.broker_id for r in results if not r.ok] == [3]
    rig.clock.advance(ProbeConfig().retire_after_seconds - 30)
    run, results = _results(rig)
    assert [r.broker_id for r in results if not r.ok] == [3] and "brokers_retired" not in run.counts
    assert all(3 in p.replicas for p in rig.kafka.topic(TOPIC).partitions)

    # 2. Gone past `retire_after_seconds`: no replica is left on it, every live broker leads a
    #    partition, and every partition passes.
    rig.clock.advance(30)
    run, results = _results(rig)
    parts = rig.kafka.topic(TOPIC).partitions
    assert run.counts["brokers_retired"] == 1
    assert [p.replicas for p in parts] == [[1, 2], [2, 1], [1, 2]]
    assert {p.leader for p in parts} == {1, 2} and all(p.leader == p.replicas[0] for p in parts)
    assert all(r.ok for r in results) and run.counts["failed"] == 0
    assert sorted(r.broker_id for r in results) == [1, 1, 2]


def test_a_broker_that_comes_back_after_its_removal_takes_a_spare_partition() -> None:
    rig = ProbeRig()
    rig.cycle()
    rig.kafka.stop_broker(3)
    rig.cycle()
    rig.clock.advance(ProbeConfig().retire_after_seconds)
    rig.cycle()
    rig.kafka.start_broker(3)

    run, results = _results(rig)

    parts = rig.kafka.topic(TOPIC).partitions
    assert len(parts) == 3, "the spare partition was reassigned, none added"
    assert [p.replicas[0] for p in parts] == [1, 2, 3] and parts[2].leader == 3
    assert all(r.ok for r in results) and sorted(r.broker_id for r in results) == [1, 2, 3]
    assert run.counts["failed"] == 0


def _part(number: int, *replicas: int) -> ProbePartition:
    return ProbePartition(number, replicas[0], replicas[0], replicas)


@pytest.mark.parametrize(
    ("case", "parts", "live", "retired", "moves", "additions"),
    [
        ("1 fits", [_part(0, 1, 2), _part(1, 2, 1)], [1, 2], [], {}, []),
        ("2 a down broker keeps its partition", [_part(0, 1, 2), _part(1, 2, 1)], [1], [], {}, []),
        ("3 a new broker with no spare gets one added", [_part(0, 1, 2), _part(1, 2, 1)], [1, 2, 3], [],
         {}, [[3, 1]]),
        ("4 a removed broker's partition goes to the least probed", [_part(0, 1, 2), _part(1, 2, 3), _part(2, 3, 1)],
         [1, 2], [3], {1: [2, 1], 2: [1, 2]}, []),
        ("5 a new broker takes the removed one's partition", [_part(0, 1, 2), _part(1, 2, 3), _part(2, 3, 1)],
         [1, 2, 4], [3], {2: [4, 1], 1: [2, 4]}, []),
        ("6 a removed replica of a live broker's partition is replaced", [_part(0, 1, 3), _part(1, 2, 1)],
         [1, 2, 4], [3], {0: [1, 2]}, [[4, 1]]),
        ("7 a down broker's partition keeps its removed replica until it is back",
         [_part(0, 1, 3), _part(1, 2, 3)], [1], [3], {0: [1]}, []),
        ("8 a new broker takes a surplus partition", [_part(0, 1, 2), _part(1, 2, 1), _part(2, 1, 2)], [1, 2, 3],
         [], {2: [3, 1]}, []),
    ],
)  # fmt: skip
def test_plan_topic(
    case: str,
    parts: list[ProbePartition],
    live: list[int],
    retired: list[int],
    moves: dict[int, list[int]],
    additions: list[list[int]],
) -> None:
    plan = plan_topic(parts, live, retired, replication_factor=2)
    assert (plan.moves, plan.additions) == (moves, additions), case
