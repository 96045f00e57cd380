"""Console: the demo's inbox. One JSON line per notification appended to a file, or a log line.

The line is the webhook body (documented in `receivers/webhook.py`), so the demo shows exactly
what a webhook would get. The file is opened for each notification, so it may be rotated or
truncated while the monitor runs; a write that fails (disk full, directory gone) retries.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import ClassVar, Final, Literal

from monitor.alert.model import DeliveryResult, FailureReason, Notification
from monitor.alert.receivers.config import ReceiverConfigBase, StrictSettings
from monitor.alert.receivers.webhook import webhook_body
from monitor.alert.render import Templates, title

log = logging.getLogger(__name__)


class ConsoleSettings(StrictSettings):
    """The demo's inbox: one JSON line per notification appended to `path`, or a log line."""

    path: Path | None = None


class ConsoleReceiverConfig(ReceiverConfigBase):
    kind: ClassVar[Literal["console"]] = "console"
    console: ConsoleSettings


class ConsoleReceiver:
    """Appends to `path`, or logs at INFO when there is none."""

    kind: Final = "console"

    def __init__(self, name: str, path: Path | None, templates: Templates) -> None:
        self.name = name
        self.path = path
        self._templates = templates
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: ConsoleReceiverConfig, templates: Templates) -> ConsoleReceiver:
        return cls(config.name, config.console.path, templates)

    def send(self, notification: Notification) -> DeliveryResult:
        if self.path is None:
            log.info(
                "notification for %s: %s (%d alerts, dedup_key %s)",
                self.name,
                title(notification),
                len(notification.alerts),
                notification.dedup_key,
            )
            return DeliveryResult.delivered()
        line = json.dumps(webhook_body(notification, self.name, self._templates.external_url), sort_keys=True)
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as inbox:
                    inbox.write(line + "\n")
        except OSError as exc:
            return DeliveryResult.failed(
                FailureReason.WRITE_FAILED, f"cannot append to {self.path}: {exc.strerror or exc}"
            )
        return DeliveryResult.delivered()

    def close(self) -> None:
        """Nothing stays open between sends."""

    def __repr__(self) -> str:
        return f"ConsoleReceiver(name={self.name!r}, path={str(self.path) if self.path else None!r})"
