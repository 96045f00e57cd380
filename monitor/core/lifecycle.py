"""The daemon's life: its components started in order and stopped in reverse, a failed start
rolled back (`App`); what waits for the collectors' first answer, started in the background
(`AfterFirstAnswer`); the scheduler's jobs stopped before every stage (`StopsFirst`).
`monitor.app` wires the stages into them."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

from monitor.core.errors import MonitorError

log = logging.getLogger(__name__)


class Component(Protocol):
    """A runtime part of the service.

    `start()` may block while it connects (bounded by its own timeouts) and raises a MonitorError
    when it cannot start; `stop()` never raises and is safe to call on a component that did not
    finish starting.
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


def _exit_now(status: int) -> None:
    """End the process with `status` without running anything else, once the log is written out."""
    logging.shutdown()
    os._exit(status)


@dataclass
class App:
    components: Sequence[Component]
    _started: list[Component] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _failure: BaseException | None = None
    force_exit: Callable[[int], object] = field(default=_exit_now, repr=False)
    """Ends the process at once with a status (a second signal during the stop)."""

    def start(self) -> None:
        """Start every component in order; on failure stop the started ones in reverse and re-raise."""
        for component in self.components:
            log.info("starting %s", component.name)
            try:
                component.start()
            except BaseException as exc:
                known = isinstance(exc, MonitorError)  # it says what is wrong and the fix: no traceback
                reason = f" ({exc})" if known else ""
                log.error("%s failed to start%s; stopping what was started", component.name, reason,
                          exc_info=not known)  # fmt: skip
                self.stop()
                raise
            self._started.append(component)

    def stop(self) -> None:
        """Stop the started components in reverse order. Idempotent."""
        while self._started:
            component = self._started.pop()
            log.info("stopping %s", component.name)
            try:
                component.stop()
            except Exception:  # a failing stop must not keep the others running
                log.exception("%s did not stop cleanly", component.name)
        self._stopping.set()

    def request_stop(self) -> None:
        self._stopping.set()

    def fail(self, exc: BaseException) -> None:
        """A component that starts in the background could not start: the daemon stops, and
        `run_until_signalled` raises `exc` as a failed start in the foreground does."""
        self._failure = exc
        self._stopping.set()

    def run_until_signalled(self) -> None:
        """Start, block until SIGTERM/SIGINT (or request_stop), then stop. The first signal stops
        gracefully: in-flight jobs finish their write before the scheduler shuts down. A signal
        while the daemon stops (a second Ctrl-C: the operator will not wait for a collector's
        Kafka timeout or a write) ends the process at once with 128 + the signal's number; what
        was not written is lost, and the leases it held expire after their time to live."""

        def handler(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stopping.is_set():
                log.warning("received %s while stopping: exiting now, without waiting for the stop", name)
                self.force_exit(128 + signum)
                return
            log.info("received %s, shutting down (send it again to exit at once)", name)
            self._stopping.set()

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
        self._stopping.clear()
        try:
            self.start()
            while not self._stopping.wait(timeout=1.0):
                pass
        finally:
            self.stop()
            for sig, old in previous.items():
                signal.signal(sig, old)
        if self._failure is not None:
            raise self._failure


class AfterFirstAnswer:
    """What waits for the collectors' first answer (each cluster's offsets job has answered the
    lag and read the append times its first run left: `CollectStage.answered_in_full`; or at
    most `wait_at_most` seconds): `first` (the store's maintenance, run on the scheduler), then the
    stages of `later`, built and started in order on a thread of their own, so that the start of
    the daemon, its collectors and its web server do not wait for them, nor share the CPUs with
    them before the lag is answered. A stage that cannot start stops the daemon
    (`on_failure`: `App.fail`), as a failed start in the foreground does."""

    name = "after the first answer"

    def __init__(
        self,
        answered: Callable[[float], bool],
        wait_at_most: float,
        first: Callable[[], object],
        later: Sequence[Callable[[], Component]],
    ) -> None:
        self._answered = answered
        self._wait_at_most = wait_at_most
        self._first = first
        self._later = later
        self._stages: App | None = None
        self._stages_halted = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_failure: Callable[[BaseException], object] = lambda exc: None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="after-first-answer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        waited = time.monotonic()
        while not self._stopping.is_set() and not self._answered(0.1):
            if time.monotonic() - waited >= self._wait_at_most:
                log.info(
                    "no first answer from the collectors after %.0f s: starting the rest", self._wait_at_most
                )
                break
        if self._stopping.is_set():  # halted while waiting, or as the answer came: no JVM starts
            return
        self._first()
        try:
            self._stages = App([build() for build in self._later])
            self._stages.start()
        except BaseException as exc:
            log.error("the daemon stops: a stage started after the first answer failed: %s", exc)
            self.on_failure(exc)

    def halt(self) -> None:
        """Start nothing more: the daemon stops (its stop comes later, after the scheduler's jobs
        have ended, which can take a Kafka timeout). The started stages that can end their
        running work early (a `halt` method: the evaluate stage cancels its Spark jobs) are told
        now, so that the scheduler's wait does not last a whole evaluation."""
        self._stopping.set()
        stages = self._stages
        if stages is None or self._stages_halted:
            return
        self._stages_halted = True  # once: `stop` halts too
        for component in stages.components:
            halt = getattr(component, "halt", None)
            if callable(halt):
                try:
                    halt()
                except Exception:  # a failing halt must not keep the daemon from stopping
                    log.exception("%s could not end its running work early", component.name)

    def stop(self) -> None:
        """Wait for a stage that is starting (a JVM), then stop the started ones in reverse."""
        self.halt()
        if self._thread is not None:
            self._thread.join()
        if self._stages is not None:
            self._stages.stop()


class StopsFirst:
    """The scheduler, started in its place (before the stages that schedule jobs) but stopped
    before every stage: no job runs while a stage stops (its own place's stop does nothing).
    `halts` are called before: what would still start something (`AfterFirstAnswer.halt`) does
    not while the scheduler waits for its jobs to end."""

    name = "the scheduler's jobs"

    def __init__(self, scheduler: Component, halts: Sequence[Callable[[], object]] = ()) -> None:
        self._scheduler = scheduler
        self._halts = halts

    def start(self) -> None:  # the scheduler started in its place
        pass

    def stop(self) -> None:
        for halt in self._halts:
            halt()
        self._scheduler.stop()
