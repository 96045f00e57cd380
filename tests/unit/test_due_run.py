"""`DueRun`: the evaluation runs at the first sample that can make a pending alert fire (a run of
one of its entity's jobs on its cluster ending at or after its `for:` runs out), once, and not
before nor for another job's or another cluster's sample."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from monitor.core.scheduler import Due, DueRun, Scheduler

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
HOUR = 3600.0
BROKER = frozenset({"metadata", "log_dirs", "probe"})
PARTITION = frozenset({"metadata", "offsets", "log_dirs"})


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler(max_workers=2)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def runs(scheduler: Scheduler) -> list[float]:
    ran: list[float] = []
    scheduler.every("evaluate", HOUR, lambda: ran.append(time.monotonic()), first_run_in=HOUR)
    return ran


def _runs_after(runs: list[float], count: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(runs) < count:
        time.sleep(0.01)
    return len(runs) >= count


def test_the_first_sample_at_or_after_the_due_time_runs_the_job_once(
    scheduler: Scheduler, runs: list[float]
) -> None:
    due = DueRun(scheduler, "evaluate")
    due.set([Due("prod", T0 + timedelta(seconds=60), BROKER)])

    assert due.sample_arrived("prod", "metadata", T0 + timedelta(seconds=45)) is False, "before the due time"
    time.sleep(0.2)
    assert runs == []

    assert due.sample_arrived("prod", "metadata", T0 + timedelta(seconds=60)) is True
    assert _runs_after(runs, 1)
    assert due.dues == ()
    assert due.sample_arrived("prod", "metadata", T0 + timedelta(seconds=75)) is False, "asked once"
    time.sleep(0.2)
    assert len(runs) == 1


def test_only_a_run_of_the_entitys_jobs_on_its_cluster_can_make_it_fire(
    scheduler: Scheduler, runs: list[float]
) -> None:
    """A broker's `for` counts to the end of its own jobs' runs: an offsets run ending after the
    due time cannot make BrokerDown fire, nor can another cluster's metadata run; asking for an
    evaluation then would only spend one."""
    due = DueRun(scheduler, "evaluate")
    at = T0 + timedelta(seconds=60)
    due.set([Due("prod", at, BROKER)])

    assert due.sample_arrived("prod", "offsets", at + timedelta(seconds=1)) is False
    assert due.sample_arrived("other", "metadata", at + timedelta(seconds=1)) is False
    time.sleep(0.2)
    assert runs == []
    assert due.sample_arrived("prod", "probe", at + timedelta(seconds=2)) is True
    assert _runs_after(runs, 1)


def test_one_sample_meeting_several_due_times_asks_for_one_run_and_the_others_wait(
    scheduler: Scheduler, runs: list[float]
) -> None:
    due = DueRun(scheduler, "evaluate")
    at = T0 + timedelta(seconds=60)
    later = Due("prod", at + timedelta(seconds=240), PARTITION)
    due.set([Due("prod", at, BROKER), Due("prod", at, PARTITION), later])

    assert due.sample_arrived("prod", "metadata", at) is True
    assert _runs_after(runs, 1)
    assert due.dues == (later,), "the partition's due time five minutes on still waits"
    assert due.sample_arrived("prod", "offsets", at + timedelta(seconds=1)) is False, "already asked"
    time.sleep(0.2)
    assert len(runs) == 1


def test_a_due_time_without_jobs_is_met_by_any_run_of_its_cluster(
    scheduler: Scheduler, runs: list[float]
) -> None:
    """The cluster's own rules (collection failing, stale) count in evaluation time: any run of
    the cluster ending after the due time brings the evaluation."""
    due = DueRun(scheduler, "evaluate")
    due.set([Due("prod", T0)])
    assert due.sample_arrived("other", "configs", T0) is False
    assert due.sample_arrived("prod", "configs", T0) is True
    assert _runs_after(runs, 1)


def test_nothing_due_asks_for_nothing(scheduler: Scheduler, runs: list[float]) -> None:
    due = DueRun(scheduler, "evaluate")
    assert due.sample_arrived("prod", "metadata", T0) is False
    due.set([Due("prod", T0 + timedelta(seconds=30))])
    due.set([])  # the evaluation found nothing pending any more
    assert due.sample_arrived("prod", "metadata", T0 + timedelta(hours=1)) is False
    time.sleep(0.2)
    assert runs == []


def test_run_later_runs_the_job_once_after_the_delay_and_a_second_request_replaces_the_first(
    scheduler: Scheduler, runs: list[float]
) -> None:
    asked = time.monotonic()
    assert scheduler.run_later("evaluate", 5.0)
    assert scheduler.run_later("evaluate", 0.3), "replaces the request 5 s on"
    assert _runs_after(runs, 1)
    assert runs[0] - asked >= 0.3
    time.sleep(0.5)
    assert len(runs) == 1, "once"
    assert scheduler.job_ids() == ["evaluate"], "the request is not a scheduled job"
    assert scheduler.run_later("unknown", 0.1) is False
