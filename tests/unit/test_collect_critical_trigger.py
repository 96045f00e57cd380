"""The metadata job asks for an evaluation at once when it sees what a critical rule depends on
change for the worse: a broker gone, a partition offline, a partition losing in-sync replicas
(under min ISR is one of those). The same state seen again asks nothing more, nor does a
recovery. Run on the fake cluster of monitor/kafka/fake.py."""

from __future__ import annotations

import pytest

from tests.fixtures.collect import Rig


@pytest.fixture
def rig() -> Rig:
    """`orders`: 3 partitions of 3 replicas, min.insync.replicas 2."""
    rig = Rig()
    rig.kafka.create_topic("orders", 3, 3, {"min.insync.replicas": "2"})
    return rig


def _metadata(rig: Rig) -> int:
    return rig.cycle(rig.metadata, "metadata").counts.get("evaluation_requested", 0)


def test_each_worsening_asks_for_one_evaluation(rig: Rig) -> None:
    assert _metadata(rig) == 0 and rig.critical == [], "a healthy cluster asks for nothing"
    replicas = rig.kafka.partition("orders", 1).replicas

    rig.kafka.shrink_isr("orders", 1, replicas[:2])  # a replica lost
    assert _metadata(rig) == 1 and rig.critical == ["prod"]
    assert _metadata(rig) == 0 and rig.critical == ["prod"], "the same state again: no new evaluation"

    rig.kafka.shrink_isr("orders", 1, replicas[:1])  # under min ISR (2)
    assert _metadata(rig) == 1 and rig.critical == ["prod"] * 2

    rig.kafka.stop_broker(3)  # a broker gone: others lose a replica, the cluster a broker
    assert _metadata(rig) == 1 and rig.critical == ["prod"] * 3


def test_a_partition_offline_when_first_seen_asks_and_its_recovery_does_not() -> None:
    rig = Rig()
    rig.kafka.create_topic("single", 3, 1)
    rig.kafka.stop_broker(2)
    assert _metadata(rig) == 1, "offline when first seen: evaluated at once"
    rig.kafka.start_broker(2)
    assert _metadata(rig) == 0, "a recovery waits for the next evaluation"
    assert rig.critical == ["prod"]
