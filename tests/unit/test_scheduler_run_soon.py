"""`Scheduler.run_soon`: a job runs at once instead of at its next tick, and requests made while it
runs coalesce into one more run, never a queue."""

from __future__ import annotations

import random
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


def test_a_request_made_as_the_run_ends_is_not_lost(scheduler: Scheduler) -> None:
    """The request comes from another thread in the last moment of the run: after the run has done
    its work, before it has returned. It gets the one more run, straight after."""
    starts: list[float] = []

    def evaluate() -> None:
        starts.append(time.monotonic())
        if len(starts) == 1:
            asking = threading.Thread(target=scheduler.run_soon, args=("evaluate",))
            asking.start()
            asking.join()

    scheduler.every("evaluate", HOUR, evaluate, first_run_in=HOUR)
    scheduler.run_soon("evaluate")

    assert wait_until(lambda: len(starts) == 2, timeout=3.0), "the request made as the run ended was lost"
    time.sleep(0.3)
    assert len(starts) == 2


def test_many_requesters_never_lose_a_request_nor_overlap_runs(scheduler: Scheduler) -> None:
    """Four threads ask for runs at random moments while runs start and end: every request is
    followed by a run that starts after it, two runs never overlap, and there is at most one
    more run per run than requests could explain (never a queue)."""
    lock = threading.Lock()
    running = 0
    overlaps = 0
    starts: list[float] = []

    def evaluate() -> None:
        nonlocal running, overlaps
        with lock:
            running += 1
            overlaps += running > 1
            starts.append(time.monotonic())
        time.sleep(random.uniform(0, 0.004))
        with lock:
            running -= 1

    scheduler.every("evaluate", HOUR, evaluate, first_run_in=HOUR)
    asked: list[float] = []

    def requester(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(60):
            time.sleep(rng.uniform(0, 0.006))
            with lock:
                asked.append(time.monotonic())
            scheduler.run_soon("evaluate")

    threads = [threading.Thread(target=requester, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    last_request = max(asked)

    assert wait_until(lambda: bool(starts) and starts[-1] >= last_request, timeout=3.0), (
        "the last request was not followed by a run"
    )
    time.sleep(0.2)
    with lock:
        assert overlaps == 0, "two runs of one job overlapped"
        assert len(starts) <= len(asked)
        runs = sorted(starts)
    # every request is served by a run that starts after it, within the length of a run or two
    for at in asked:
        assert any(start >= at for start in runs)


def test_a_tick_during_a_requested_run_is_skipped_not_queued(scheduler: Scheduler) -> None:
    release = threading.Event()
    starts: list[float] = []

    def evaluate() -> None:
        starts.append(time.monotonic())
        release.wait(5)

    scheduler.every("evaluate", 0.2, evaluate, first_run_in=HOUR)
    assert scheduler.run_soon("evaluate") is True
    assert wait_until(lambda: len(starts) == 1)
    time.sleep(0.7)  # ticks come and go while the requested run is under way
    assert len(starts) == 1, "a tick ran beside the requested run"
    release.set()
    time.sleep(0.1)
    assert len(starts) <= 2, "ticks missed while running are not queued up"


def test_no_run_is_started_once_stopping() -> None:
    s = Scheduler(max_workers=2)
    s.start()
    release = threading.Event()
    starts: list[float] = []

    def evaluate() -> None:
        starts.append(time.monotonic())
        release.wait(5)

    s.every("evaluate", HOUR, evaluate, first_run_in=HOUR)
    s.run_soon("evaluate")
    assert wait_until(lambda: len(starts) == 1)
    assert s.run_soon("evaluate") is True  # pending behind the run under way
    stopper = threading.Thread(target=s.stop)
    stopper.start()
    time.sleep(0.1)
    release.set()
    stopper.join(5)
    assert not stopper.is_alive(), "stop() waits for the run under way, then returns"
    assert len(starts) == 1, "the pending run is not started by a scheduler that is stopping"
    assert s.run_soon("evaluate") is False


def test_a_request_before_an_expected_job_is_scheduled_runs_when_it_is(scheduler: Scheduler) -> None:
    """The evaluation's stage starts after the collectors: a critical change they collect before
    then is evaluated as soon as the job exists, once however often it was asked."""
    runs: list[float] = []
    scheduler.expect("evaluate")
    assert scheduler.run_soon("evaluate") is True
    assert scheduler.run_soon("evaluate") is False, "coalesced into the request kept"
    assert scheduler.run_soon("alert") is False, "not expected: unknown"
    time.sleep(0.2)
    assert runs == []

    scheduler.every("evaluate", HOUR, lambda: runs.append(time.monotonic()), first_run_in=HOUR)
    assert wait_until(lambda: len(runs) == 1)
    time.sleep(0.3)
    assert len(runs) == 1


def test_an_expected_job_not_asked_for_waits_for_its_tick(scheduler: Scheduler) -> None:
    runs: list[float] = []
    scheduler.expect("evaluate")
    scheduler.every("evaluate", HOUR, lambda: runs.append(time.monotonic()), first_run_in=HOUR)
    time.sleep(0.3)
    assert runs == []
