"""The collect stage asks for an evaluation at once when a metadata run sees what a critical rule
depends on change for the worse: a broker gone, a partition offline, a partition losing in-sync
replicas (under min ISR is one of those). The same state seen again asks nothing more. The
metadata step is a stand-in returning chosen topics; the clients are built but never connect."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.collect import stage
from monitor.collect.stage import ClusterCollector
from monitor.core.clock import FakeClock
from monitor.core.records import PartitionInfo, TopicInfo
from monitor.core.settings import ClusterConfig, CollectConfig
from monitor.store.runs import Run

HEALTHY = (1, (1, 2, 3), (1, 2, 3))


class Recorder:
    def __init__(self) -> None:
        self.runs: list[Run] = []

    @contextmanager
    def run(self, cluster: str | None, job: str) -> Iterator[Run]:
        run = Run(cluster, job, datetime(2026, 11, 26, tzinfo=UTC))
        self.runs.append(run)
        yield run


class Metadata:
    """Stands in for collect_metadata: the next topics, and how many brokers went down."""

    def __init__(self) -> None:
        self.partitions: dict[int, tuple[int | None, tuple[int, ...], tuple[int, ...]]] = {}
        self.brokers_went_down = 0

    def __call__(self, run: Run, *args: Any) -> list[TopicInfo]:
        if self.brokers_went_down:
            run.count("brokers_went_down", self.brokers_went_down)
        return [
            TopicInfo(
                "orders",
                False,
                tuple(
                    PartitionInfo(p, leader, replicas, isr)
                    for p, (leader, replicas, isr) in self.partitions.items()
                ),
            )
        ]


@pytest.fixture
def collector(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[ClusterCollector, Metadata, list[str], Recorder]]:
    metadata = Metadata()
    monkeypatch.setattr(stage, "collect_metadata", metadata)
    asked: list[str] = []
    recorder = Recorder()
    collector = ClusterCollector(
        ClusterConfig(name="c1", bootstrap_servers=["127.0.0.1:1"]),
        engine=None,  # type: ignore[arg-type]  # the stand-in metadata step writes nothing
        clock=FakeClock(datetime(2026, 11, 26, tzinfo=UTC)),
        recorder=recorder,  # type: ignore[arg-type]
        writer=None,  # type: ignore[arg-type]
        config=CollectConfig(),
        on_critical=asked.append,
    )
    yield collector, metadata, asked, recorder


def test_each_worsening_asks_for_one_evaluation(
    collector: tuple[ClusterCollector, Metadata, list[str], Recorder],
) -> None:
    c, metadata, asked, recorder = collector
    metadata.partitions = {0: HEALTHY, 1: HEALTHY, 2: HEALTHY}
    c.metadata()
    assert asked == [], "a healthy cluster asks for nothing"

    metadata.partitions[1] = (1, (1, 2, 3), (1, 2))  # a replica lost
    c.metadata()
    assert asked == ["c1"]
    c.metadata()
    assert asked == ["c1"], "the same state again: no new evaluation"

    metadata.partitions[1] = (1, (1, 2, 3), (1,))  # under min ISR (2)
    c.metadata()
    assert asked == ["c1"] * 2

    metadata.partitions[2] = (None, (1, 2, 3), (3,))  # offline
    c.metadata()
    assert asked == ["c1"] * 3

    metadata.brokers_went_down = 1
    c.metadata()
    assert asked == ["c1"] * 4
    assert [run.counts.get("evaluation_requested", 0) for run in recorder.runs] == [0, 1, 0, 1, 1, 1]


def test_recovery_asks_for_nothing(collector: tuple[ClusterCollector, Metadata, list[str], Recorder]) -> None:
    c, metadata, asked, _ = collector
    metadata.partitions = {0: (None, (1, 2, 3), (3,))}
    c.metadata()
    assert asked == ["c1"], "offline when first seen: evaluated at once"
    metadata.partitions = {0: HEALTHY}
    c.metadata()
    assert asked == ["c1"], "a recovery waits for the next evaluation"
