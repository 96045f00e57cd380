"""`Scheduler` pools: a cluster whose jobs all hang (a broker that does not answer, each call
waiting for its timeout) holds its own pool's threads only; the daemon's jobs and the other
clusters' keep their ticks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from monitor.collect.jobs import JOBS
from monitor.core.scheduler import Scheduler

pytestmark = pytest.mark.unit

TICK = 0.1


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler()
    s.start()
    yield s
    s.stop()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_cluster_that_hangs_delays_neither_the_sender_nor_another_cluster(scheduler: Scheduler) -> None:
    answer = threading.Event()
    hanging: set[str] = set()
    lock = threading.Lock()

    def hang(job: str) -> Callable[[], None]:
        def run() -> None:
            with lock:
                hanging.add(job)
            answer.wait(30)

        return run

    ticks: dict[str, int] = {"alert:send": 0, "west:offsets": 0}

    def count(job: str) -> Callable[[], None]:
        def run() -> None:
            with lock:
                ticks[job] += 1

        return run

    try:
        for name in JOBS:  # every job of the cluster, and more than a small pool's threads
            scheduler.every(f"east:{name}", TICK, hang(name), pool="collect:east")
        assert wait_until(lambda: len(hanging) == len(JOBS)), f"only {sorted(hanging)} started"

        scheduler.every("alert:send", TICK, count("alert:send"))
        scheduler.every("west:offsets", TICK, count("west:offsets"), pool="collect:west")
        assert wait_until(lambda: min(ticks.values()) >= 5), f"runs while east hangs: {ticks}"
        assert scheduler.run_soon("east:offsets") is True, "pending behind the hanging run"
        assert scheduler.run_soon("east:offsets") is False, "coalesced into that one"
    finally:
        answer.set()


def test_a_job_runs_in_its_pool_s_threads(scheduler: Scheduler) -> None:
    threads: dict[str, str] = {}
    done = threading.Event()

    def record(job: str) -> Callable[[], None]:
        def run() -> None:
            threads[job] = threading.current_thread().name
            if len(threads) == 2:
                done.set()

        return run

    scheduler.every("east:offsets", 3600, record("east:offsets"), pool="collect:east")
    scheduler.every("evaluate", 3600, record("evaluate"))
    assert done.wait(10)
    assert threads["east:offsets"].startswith("jobs-collect:east")
    assert threads["evaluate"].startswith("jobs-daemon")
