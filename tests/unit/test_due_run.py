"""`DueRun`: the evaluation runs at the first sample at or after a pending alert's `for:` runs out,
once, and not before."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from monitor.core.scheduler import DueRun, Scheduler

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
HOUR = 3600.0


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler(max_workers=2)
    s.start()
    yield s
    s.stop()


def _runs_after(runs: list[float], count: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(runs) < count:
        time.sleep(0.01)
    return len(runs) >= count


def test_the_first_sample_at_or_after_the_due_time_runs_the_job_once(scheduler: Scheduler) -> None:
    runs: list[float] = []
    scheduler.every("evaluate", HOUR, lambda: runs.append(time.monotonic()), first_run_in=HOUR)
    due = DueRun(scheduler, "evaluate")
    due.set(T0 + timedelta(seconds=60))

    assert due.sample_arrived(T0 + timedelta(seconds=45)) is False, "a sample before the due time"
    time.sleep(0.2)
    assert runs == []

    assert due.sample_arrived(T0 + timedelta(seconds=60)) is True
    assert _runs_after(runs, 1)
    assert due.at is None
    assert due.sample_arrived(T0 + timedelta(seconds=75)) is False, "asked once per due time"
    time.sleep(0.2)
    assert len(runs) == 1


def test_nothing_due_asks_for_nothing(scheduler: Scheduler) -> None:
    runs: list[float] = []
    scheduler.every("evaluate", HOUR, lambda: runs.append(time.monotonic()), first_run_in=HOUR)
    due = DueRun(scheduler, "evaluate")
    assert due.sample_arrived(T0) is False
    due.set(T0 + timedelta(seconds=30))
    due.set(None)  # the evaluation found nothing pending any more
    assert due.sample_arrived(T0 + timedelta(hours=1)) is False
    time.sleep(0.2)
    assert runs == []
