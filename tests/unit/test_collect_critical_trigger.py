"""The metadata job asks for an evaluation at once when it sees what a critical rule depends on
change for the worse: a broker gone, a partition offline, a partition losing in-sync replicas
(under min ISR is one of those). The same state seen again asks nothing more, nor does a
recovery. Run on the fake cluster of monitor/kafka/fake.py."""

from __future__ import annotations

import pytest

from monitor.collect.jobs import metadata
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


def test_a_change_has_the_metadata_read_again_soon_for_a_while() -> None:
    """A broker's controlled shutdown shows a partition offline first and the broker gone seconds
    later: after a run that saw a change, the metadata job asks for itself again in a few seconds,
    for LOOK_AGAIN_FOR_SECONDS after the last change, not at its interval only."""
    rig = Rig()
    rig.kafka.create_topic("single", 3, 1)
    later: list[tuple[str, float]] = []
    rig.context.run_later = lambda job, seconds: later.append((job, seconds))
    _metadata(rig)
    assert later == [], "a steady cluster is read at the job's interval"

    rig.kafka.stop_broker(2)
    asked = [("metadata", metadata.LOOK_AGAIN_SECONDS)]
    for run in range(int(metadata.LOOK_AGAIN_FOR_SECONDS // 15)):  # each run 15 s after the other
        _metadata(rig)
        assert later == asked * (run + 1), f"run {run} after the change"
    _metadata(rig)
    assert len(later) == len(asked) * int(metadata.LOOK_AGAIN_FOR_SECONDS // 15), "it has settled"
