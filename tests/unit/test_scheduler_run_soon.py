"""`Scheduler.run_soon`: a job runs at once instead of at its next tick, and requests made while it
runs coalesce into one more run, never a queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from monitor.core.scheduler import Scheduler

HOUR = 3600.0


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler(max_workers=2)
    s.start()
    yield s
    s.stop()


def wait_until(predicate: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_job_asked_to_run_soon_runs_without_waiting_for_its_tick(scheduler: Scheduler) -> None:
    runs: list[float] = []
    scheduler.every("evaluate", HOUR, lambda: runs.append(time.monotonic()), first_run_in=HOUR)

    asked = time.monotonic()
    assert scheduler.run_soon("evaluate") is True

    assert wait_until(lambda: len(runs) == 1)
    assert runs[0] - asked < 2.0
    time.sleep(0.3)
    assert len(runs) == 1, "one request, one run"


def test_requests_while_running_coalesce_into_one_more_run(scheduler: Scheduler) -> None:
    release = threading.Event()
    started: list[float] = []

    def evaluate() -> None:
        started.append(time.monotonic())
        release.wait(5)

    scheduler.every("evaluate", HOUR, evaluate, first_run_in=HOUR)
    scheduler.run_soon("evaluate")
    assert wait_until(lambda: len(started) == 1)

    answers = [scheduler.run_soon("evaluate") for _ in range(3)]
    assert answers == [True, False, False], "the first is pending, the others coalesce into it"
    release.set()

    assert wait_until(lambda: len(started) == 2)
    time.sleep(0.5)
    assert len(started) == 2, "three requests while running make one more run, not three"


def test_an_unknown_job_is_not_run(scheduler: Scheduler) -> None:
    assert scheduler.run_soon("evaluate") is False
