"""The composition root starts in order, stops in reverse, and rolls back a failed start; what
waits for the collectors' first answer starts after it, in the background, and stops the daemon
when it cannot start; the scheduler stops before the stages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from monitor.core.errors import MonitorError
from monitor.core.lifecycle import AfterFirstAnswer, App, StopsFirst
from tests.conditions import wait_for


class Recorder:
    def __init__(self, name: str, log: list[str], fail: bool = False, fail_stop: bool = False) -> None:
        self.name = name
        self._log = log
        self._fail = fail
        self._fail_stop = fail_stop

    def start(self) -> None:
        self._log.append(f"start {self.name}")
        if self._fail:
            raise MonitorError(f"{self.name} cannot start")

    def stop(self) -> None:
        self._log.append(f"stop {self.name}")
        if self._fail_stop:
            raise RuntimeError("boom")


def test_start_in_order_stop_in_reverse() -> None:
    log: list[str] = []
    app = App([Recorder("store", log), Recorder("collect", log), Recorder("web", log)])
    app.start()
    app.stop()
    assert log == ["start store", "start collect", "start web", "stop web", "stop collect", "stop store"]
    app.stop()  # idempotent
    assert len(log) == 6


def test_failed_start_rolls_back_what_started(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    app = App([Recorder("store", log), Recorder("collect", log, fail=True), Recorder("web", log)])
    with pytest.raises(MonitorError, match="collect cannot start"):
        app.start()
    assert log == ["start store", "start collect", "stop store"]
    failed = [r for r in caplog.records if "failed to start" in r.getMessage()]
    assert [r.getMessage() for r in failed] == [
        "collect failed to start (collect cannot start); stopping what was started"
    ]
    assert not failed[0].exc_info, "a failure the monitor explains is logged without a traceback"


def test_an_unexpected_failed_start_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Recorder):
        def start(self) -> None:
            raise RuntimeError("a bug")

    app = App([Broken("web", [])])
    with pytest.raises(RuntimeError):
        app.start()
    failed = [r for r in caplog.records if "failed to start" in r.getMessage()]
    assert failed and failed[0].exc_info


def test_a_failing_stop_does_not_keep_others_running() -> None:
    log: list[str] = []
    app = App([Recorder("store", log), Recorder("collect", log, fail_stop=True)])
    app.start()
    app.stop()
    assert log[-2:] == ["stop collect", "stop store"]


def test_request_stop_ends_run_until_signalled() -> None:
    log: list[str] = []
    app = App([Recorder("store", log)])
    timer = threading.Timer(0.3, app.request_stop)
    timer.start()
    app.run_until_signalled()
    assert log == ["start store", "stop store"]


class Answer:
    """The collectors' first answer, given when the test says."""

    def __init__(self) -> None:
        self.given = threading.Event()

    def __call__(self, timeout: float) -> bool:
        return self.given.wait(timeout)


def test_what_waits_for_the_first_answer_starts_after_it_on_its_own_thread() -> None:
    log: list[str] = []
    answer = Answer()
    later = AfterFirstAnswer(
        answer, 60, lambda: log.append("maintenance"), [lambda: Recorder("evaluate", log)]
    )
    app = App([Recorder("collect", log), later, Recorder("web", log)])
    app.start()  # returns without waiting for the answer
    assert log == ["start collect", "start web"]
    answer.given.set()
    wait_for(lambda: "start evaluate" in log, 5, "the evaluate stage's start")
    assert log == ["start collect", "start web", "maintenance", "start evaluate"]
    app.stop()
    assert log[4:] == ["stop web", "stop evaluate", "stop collect"]


def test_no_answer_within_the_wait_starts_the_rest_anyway() -> None:
    log: list[str] = []
    later = AfterFirstAnswer(Answer(), 0.3, lambda: log.append("maintenance"), [lambda: Recorder("x", log)])
    later.start()
    wait_for(lambda: "start x" in log, 5, "the start without an answer")
    later.stop()
    assert log == ["maintenance", "start x", "stop x"]


def test_a_stop_before_the_answer_starts_nothing() -> None:
    log: list[str] = []
    later = AfterFirstAnswer(Answer(), 60, lambda: log.append("maintenance"), [lambda: Recorder("x", log)])
    later.start()
    later.stop()
    assert log == []


def test_a_stage_that_cannot_start_in_the_background_stops_the_daemon_with_its_error() -> None:
    log: list[str] = []
    answer = Answer()
    answer.given.set()
    later = AfterFirstAnswer(answer, 60, lambda: None, [lambda: Recorder("evaluate", log, fail=True)])
    app = App([Recorder("collect", log), later])
    later.on_failure = app.fail
    with pytest.raises(MonitorError, match="evaluate cannot start"):
        app.run_until_signalled()
    assert log == ["start collect", "start evaluate", "stop collect"]


def test_the_scheduler_stops_before_the_stages_it_runs_jobs_of() -> None:
    log: list[str] = []
    scheduler = Recorder("scheduler", log)
    app = App([Recorder("collect", log), scheduler, Recorder("web", log), StopsFirst(scheduler)])
    app.start()
    app.stop()
    assert log[3:] == ["stop scheduler", "stop web", "stop scheduler", "stop collect"]


def test_a_daemon_that_stops_while_its_jobs_end_starts_nothing_more() -> None:
    """The scheduler's stop waits for the jobs that run (a Kafka timeout, when the cluster is
    down); the collectors' first answer, or the end of its wait, must not start the evaluate
    stage (a JVM) in a daemon that is stopping."""
    log: list[str] = []
    answer = Answer()
    later = AfterFirstAnswer(
        answer, 60, lambda: log.append("maintenance"), [lambda: Recorder("evaluate", log)]
    )

    class SlowScheduler(Recorder):
        def stop(self) -> None:  # a job ends as the scheduler stops: it gave the first answer
            answer.given.set()
            time.sleep(0.3)
            super().stop()

    scheduler = SlowScheduler("scheduler", log)
    app = App([Recorder("collect", log), scheduler, later, StopsFirst(scheduler, halts=[later.halt])])
    app.start()
    app.stop()
    assert log == ["start collect", "start scheduler", "stop scheduler", "stop scheduler", "stop collect"]


def test_a_maintenance_that_postponed_a_table_runs_again_soon_not_at_its_next_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read that held a table past the lock wait makes the pass postpone it
    (`partitions.maintain_partitions`); the job asks for another pass a minute later, where its
    interval is an hour, and asks nothing once no table waits."""
    from monitor import app
    from monitor.core.scheduler import Scheduler

    monkeypatch.setattr(app, "MAINTENANCE_RETRY_SECONDS", 0.2)
    answers = [["group_offsets"], []]
    passes: list[float] = []

    class Store:
        def maintain(self) -> list[str]:
            passes.append(time.monotonic())
            return answers[len(passes) - 1] if len(passes) <= len(answers) else []

    scheduler = Scheduler()
    scheduler.start()
    try:
        scheduler.every("store:maintenance", 3600, app.maintenance(Store(), scheduler))  # type: ignore[arg-type]
        wait_for(lambda: len(passes) >= 2, 10, "the pass after the postponing one")
        time.sleep(0.6)  # three retry delays: a pass that postponed nothing asks for no other
        assert len(passes) == 2
        assert passes[1] - passes[0] >= 0.2
    finally:
        scheduler.stop()


class Halting(Recorder):
    """A stage that can end its running work early (the evaluate stage)."""

    def __init__(self, name: str, log: list[str], fail_halt: bool = False) -> None:
        super().__init__(name, log)
        self._fail_halt = fail_halt

    def halt(self) -> None:
        self._log.append(f"halt {self.name}")
        if self._fail_halt:
            raise RuntimeError("boom")


def test_a_stopping_daemon_halts_the_started_stages_before_the_scheduler_waits_for_their_jobs() -> None:
    log: list[str] = []
    answer = Answer()
    answer.given.set()
    later = AfterFirstAnswer(
        answer,
        60,
        lambda: None,
        [
            lambda: Halting("share", log, fail_halt=True),
            lambda: Recorder("alert", log),
            lambda: Halting("evaluate", log),
        ],
    )
    scheduler = Recorder("scheduler", log)
    app = App([scheduler, later, StopsFirst(scheduler, halts=[later.halt])])
    app.start()
    wait_for(lambda: "start evaluate" in log, 5, "the stages after the first answer")
    app.stop()
    assert log[log.index("start evaluate") + 1 :] == [
        "halt share",  # its failure is logged; the others are still told
        "halt evaluate",
        "stop scheduler",
        "stop evaluate",
        "stop alert",
        "stop share",
        "stop scheduler",
    ]


class SignalledAgain(Recorder):
    """A component whose stop takes long enough for the operator to send the signal again."""

    def stop(self) -> None:
        super().stop()
        signal.raise_signal(signal.SIGTERM)


def test_a_second_signal_during_the_stop_exits_at_once() -> None:
    log: list[str] = []
    exits: list[int] = []
    app = App([Recorder("store", log), SignalledAgain("collect", log)], force_exit=exits.append)
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    app.run_until_signalled()
    assert exits == [128 + signal.SIGTERM]  # the first signal stopped, the second one exited
    assert log == ["start store", "start collect", "stop collect", "stop store"]
    assert signal.getsignal(signal.SIGTERM) == before  # the daemon's handler is taken away after


def test_a_single_signal_stops_without_forcing_an_exit() -> None:
    log: list[str] = []
    exits: list[int] = []
    app = App([Recorder("store", log)], force_exit=exits.append)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    app.run_until_signalled()
    assert exits == []
    assert log == ["start store", "stop store"]


_SLOW_STOP = """
import sys, time
from monitor.core.lifecycle import App

class SlowStop:
    name = "slow"
    def start(self):
        print("started", flush=True)
    def stop(self):
        print("stopping", flush=True)
        time.sleep(60)

App([SlowStop()]).run_until_signalled()
"""


def test_a_second_signal_ends_a_real_process_stuck_in_its_stop() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_STOP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "stopping"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 128 + signal.SIGINT  # not the 60 s the stop would take
        assert "exiting now, without waiting for the stop" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
