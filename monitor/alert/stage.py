"""The alert stage as an app component: the alert cycle every `alert.interval_seconds` and the
outbox sender every `alert.sender_interval_seconds`.

Routing and ownership are reloaded every cycle, so an edited routing.yaml applies without a
restart; an edit that does not validate is reported on the cycle's run and the last good routing
stays in force. At start a bad routing file is an error (nothing would be routed).

The stage keeps the open alerts between cycles (`monitor.alert.memory`): a cycle reads again only
the findings of the clusters an evaluation changed since the last one, and none when no
evaluation did. Without it, a cycle read every open finding and alert: at 115,000 of them one took
6 s on a quiet machine and 18-25 s on a busy one (docs/bench/evaluate-findings.md), longer than the
interval, so cycles ran back to back and held a core. A tick still runs a cycle only once the time
since the last one is twice what it took (`CYCLE_REST`), or when an evaluation changed the
findings since (those are never held back). With a few thousand alerts a cycle takes
milliseconds and every tick runs one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from monitor.alert.config import Routing, load_routing, routing_paths
from monitor.alert.cycle import run_cycle
from monitor.alert.memory import CycleMemory
from monitor.alert.model import DeliveryResult, FailureReason, Notification
from monitor.alert.notices import forward_notices
from monitor.alert.notify.retry import RetryPolicy
from monitor.alert.notify.sender import Sendable, Sender
from monitor.alert.receivers import Receiver, build_receiver, parse_receiver
from monitor.alert.render import Templates
from monitor.core.clock import Clock
from monitor.core.errors import ConfigError, StoreUnavailableError
from monitor.core.scheduler import Pacing, Scheduler
from monitor.core.settings import AlertConfig, WebConfig
from monitor.store import changes
from monitor.store.runs import RunRecorder, instance_name

log = logging.getLogger(__name__)

CYCLE_REST = 2.0
"""After an alert cycle, the next tick's cycle waits this many times as long as the last took,
unless the findings changed (core.scheduler.Pacing): cycles take at most a third of a core."""


class UnusableReceiver:
    """Stands in for a receiver whose configuration cannot be used (a secret that is not set):
    each notification to it fails at once with the reason, visible in the outbox."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def send(self, notification: Notification) -> DeliveryResult:
        return DeliveryResult.failed(FailureReason.MISCONFIGURED, self.reason)

    def close(self) -> None:
        return None


def build_receivers(routing: Routing, templates: Templates) -> dict[str, Receiver | UnusableReceiver]:
    receivers: dict[str, Receiver | UnusableReceiver] = {}
    for name, raw in routing.receiver_configs.items():
        try:
            receivers[name] = build_receiver(parse_receiver(raw), templates)
        except (ConfigError, ValueError, OSError) as exc:
            log.error("receiver %s cannot be used: %s", name, exc)
            receivers[name] = UnusableReceiver(name, f"receiver {name!r} cannot be used: {exc}")
    return receivers


class AlertStage:
    name = "alert"

    def __init__(
        self,
        config: AlertConfig,
        web: WebConfig,
        engine: Callable[[], Engine],
        clock: Clock,
        scheduler: Scheduler,
        instance: str | None = None,
    ) -> None:
        self._config = config
        self._engine = engine
        self._clock = clock
        self._scheduler = scheduler
        self.instance = instance or instance_name()
        self.external_url = (config.external_url or f"http://{web.host}:{web.port}").rstrip("/")
        self._templates = Templates(self.external_url)
        self.routing: Routing | None = None
        self._receivers: dict[str, Receiver | UnusableReceiver] = {}
        self._receiver_source: Mapping[str, Any] = {}
        self._sender: Sender | None = None
        self._recorder: RunRecorder | None = None
        self._pacing = Pacing(CYCLE_REST)
        self._memory = CycleMemory()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Load routing (a ConfigError stops the start), build the receivers, schedule both jobs."""
        self._use(self._load())
        self._recorder = RunRecorder(self._engine(), self._clock)
        policy = RetryPolicy(
            self._config.retry_base_seconds,
            self._config.retry_max_seconds,
            self._config.give_up_after_seconds,
        )
        self._sender = Sender(
            self._engine,
            self._sendable,
            self._clock,
            self.instance,
            batch=self._config.sender_batch,
            concurrency=self._config.sender_concurrency,
            claim_seconds=self._config.claim_seconds,
            policy=policy,
        )
        self._scheduler.every("alert", self._config.interval_seconds, self.cycle,
                              first_run_in=self._config.interval_seconds)  # fmt: skip
        self._scheduler.every("alert:send", self._config.sender_interval_seconds, self.send)

    def stop(self) -> None:
        if self._sender is not None:
            self._sender.close()
            self._sender = None
        for receiver in self._receivers.values():
            try:
                receiver.close()
            except Exception:  # closing one must not keep the others open
                log.exception("receiver %s did not close cleanly", receiver.name)
        self._receivers = {}

    # -- jobs -----------------------------------------------------------------------------------

    def cycle(self) -> None:
        stamp: object
        try:
            with self._engine().connect() as conn:
                stamp = changes.of_findings(changes.versions(conn))
        except (SQLAlchemyError, StoreUnavailableError):
            stamp = object()  # not known: the cycle runs, and reports the database as it did
        started = self._clock.monotonic()
        if not self._pacing.due(started, stamp):
            log.debug("alert cycle: resting after a long cycle; the findings did not change")
            return
        try:
            self._cycle()
        finally:
            self._pacing.ran(started, self._clock.monotonic(), stamp)

    def _cycle(self) -> None:
        assert self._recorder is not None
        with self._recorder.run(None, "alert") as run:
            try:
                self._use(self._load())
            except ConfigError as exc:
                run.problem(f"routing not reloaded, the previous one stays in force: {exc}")
            assert self.routing is not None
            with self._engine().begin() as conn:
                result = run_cycle(conn, self.routing, self._clock.now(), self.external_url, self._memory)
                run.count("notices", forward_notices(conn, self.routing, self._clock.now()))
            self._memory.committed(result.alerts_version)  # not reached when it did not commit
            run.count("full_read", int(result.full_read))
            run.count("findings_read", result.findings_read)
            run.count("clusters_read", len(result.clusters_read))
            for key, value in result.alerts.items():
                run.count(f"alerts_{key}", value)
            run.count("notifications", len(result.notifications))
            run.count("groups_opened", result.groups_opened)
            run.count("groups_closed", result.groups_closed)

    def send(self) -> dict[str, int]:
        """Drain the outbox; a database outage is logged and retried on the next tick."""
        if self._sender is None:
            return {}
        try:
            return self._sender.drain()
        except (SQLAlchemyError, StoreUnavailableError) as exc:
            log.warning("cannot send notifications now, the database is unavailable: %s", exc)
            return {}

    # -- routing and receivers ------------------------------------------------------------------

    def _load(self) -> Routing:
        routing_file, owners_file = routing_paths(self._config)
        return load_routing(routing_file, owners_file)

    def _use(self, routing: Routing) -> None:
        self.routing = routing
        if routing.receiver_configs != self._receiver_source:
            old = self._receivers
            self._receivers = build_receivers(routing, self._templates)
            self._receiver_source = dict(routing.receiver_configs)
            for receiver in old.values():
                receiver.close()

    def _sendable(self) -> Mapping[str, Sendable]:
        return self._receivers
