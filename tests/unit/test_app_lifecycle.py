"""The composition root starts in order, stops in reverse, and rolls back a failed start."""

from __future__ import annotations

import pytest

from monitor.app import App
from monitor.core.errors import MonitorError


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


def test_failed_start_rolls_back_what_started() -> None:
    log: list[str] = []
    app = App([Recorder("store", log), Recorder("collect", log, fail=True), Recorder("web", log)])
    with pytest.raises(MonitorError, match="collect cannot start"):
        app.start()
    assert log == ["start store", "start collect", "stop store"]


def test_a_failing_stop_does_not_keep_others_running() -> None:
    log: list[str] = []
    app = App([Recorder("store", log), Recorder("collect", log, fail_stop=True)])
    app.start()
    app.stop()
    assert log[-2:] == ["stop collect", "stop store"]


def test_request_stop_ends_run_until_signalled() -> None:
    import threading

    log: list[str] = []
    app = App([Recorder("store", log)])
    timer = threading.Timer(0.3, app.request_stop)
    timer.start()
    app.run_until_signalled()
    assert log == ["start store", "stop store"]
