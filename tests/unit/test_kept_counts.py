"""A cluster's kept count of groups: counted again once older than a second, or ten times what its
count took; one request counts while the others serve the kept count."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.expose.read import fresh
from monitor.expose.read.fresh import GroupCount, KeptCounts

AS_OF = datetime(2026, 11, 30, 12, tzinfo=UTC)
NO_CONN: Any = None
"""The counts are replaced here: they read no database."""


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The clusters counted, in order; each count's lagging groups is how many counts came before."""
    calls: list[str] = []

    def count(conn: Any, cluster: str) -> GroupCount:
        calls.append(cluster)
        return GroupCount(10, len(calls) - 1, AS_OF)

    monkeypatch.setattr(fresh, "group_count", count)
    return calls


def test_a_count_serves_for_a_second_then_is_counted_again(counted: list[str]) -> None:
    clock = Clock()
    kept = KeptCounts(clock)
    assert kept.count(NO_CONN, "prod").lagging_groups == 0
    clock.now += 0.9
    assert kept.count(NO_CONN, "prod").lagging_groups == 0, "kept"
    assert kept.count(NO_CONN, "test").lagging_groups == 1, "each cluster its own"
    clock.now += 0.2
    assert kept.count(NO_CONN, "prod").lagging_groups == 2, "counted again after a second"
    kept.forget("prod")
    assert kept.count(NO_CONN, "prod").lagging_groups == 3
    assert counted == ["prod", "test", "prod", "prod"]


def test_a_costly_count_serves_ten_times_its_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()

    def slow(conn: Any, cluster: str) -> GroupCount:
        clock.now += 1.5  # as at 1,000,000 group-partitions
        return GroupCount(5_000, 12, AS_OF)

    monkeypatch.setattr(fresh, "group_count", slow)
    kept = KeptCounts(clock)
    kept.count(NO_CONN, "big")
    counted_at = clock.now
    clock.now = counted_at + 14.9
    kept.count(NO_CONN, "big")
    assert clock.now == counted_at + 14.9, "kept for 15 s"
    clock.now = counted_at + 15.0
    kept.count(NO_CONN, "big")
    assert clock.now == counted_at + 16.5, "counted again"


def test_while_one_request_counts_the_others_serve_the_kept_count(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    started, release = threading.Event(), threading.Event()
    results: list[int] = []
    calls = 0

    def count(conn: Any, cluster: str) -> GroupCount:
        nonlocal calls
        calls += 1
        if calls == 2:
            started.set()
            assert release.wait(10)
        return GroupCount(10, calls, AS_OF)

    monkeypatch.setattr(fresh, "group_count", count)
    kept = KeptCounts(clock)
    assert kept.count(NO_CONN, "prod").lagging_groups == 1
    clock.now += 2
    counting = threading.Thread(target=lambda: results.append(kept.count(NO_CONN, "prod").lagging_groups))
    counting.start()
    assert started.wait(10)
    assert kept.count(NO_CONN, "prod").lagging_groups == 1, "served the kept count, not waiting"
    release.set()
    counting.join(10)
    assert results == [2] and kept.count(NO_CONN, "prod").lagging_groups == 2


def test_a_failed_count_keeps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(conn: Any, cluster: str) -> GroupCount:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(fresh, "group_count", fail)
    kept = KeptCounts(Clock())
    with pytest.raises(RuntimeError, match="went away"):
        kept.count(NO_CONN, "prod")
    monkeypatch.setattr(fresh, "group_count", lambda conn, cluster: GroupCount(1, 0, None))
    assert kept.count(NO_CONN, "prod") == GroupCount(1, 0, None)
