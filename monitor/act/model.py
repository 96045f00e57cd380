"""The act stage's vocabulary: who acts, what can go wrong, and a request as people see it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from monitor.act.request import Request
from monitor.core.errors import MonitorError
from monitor.core.formatting import bytes_filter, duration_filter

ErrorCode = Literal["refused", "forbidden", "not_found", "conflict", "unavailable", "invalid"]

REFUSALS: frozenset[ErrorCode] = frozenset({"refused", "forbidden", "conflict", "invalid", "not_found"})
"""The codes that turn down what a person asked of a request; each is written to the audit trail,
against the id asked for (`not_found`: an id that names no request, as a refused alert action on
an unknown incident is). `unavailable` is Kafka's answer, not a decision."""


class RetentionError(MonitorError):
    """A retention action that cannot be carried out as asked. `code` is stable (the HTTP API
    answers with it); the message says what is wrong and how to fix it."""

    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}


def show_value(name: str, value: Any) -> str:
    """retention.ms 172800000 -> `2 d`; retention.bytes -> `1.0 GiB`; -1 -> `unlimited`."""
    if value is None:
        return "default"
    number = int(value)
    if number < 0:
        return "unlimited"
    return duration_filter(number / 1000) if name == "retention.ms" else bytes_filter(number)


def describe_change(request: Request) -> str:
    """`retention.ms 1 d -> 2 d` for every changed key."""
    old = request.old_values()
    return ", ".join(
        f"{name} {show_value(name, old.get(name))} -> {show_value(name, new)}"
        for name, new in sorted(request.new_configs.items())
    )


def display_state(request: Request) -> str:
    """The state as the issue's words put it: an instant raise in force awaiting its review is
    `applied-pending-review`."""
    return {"pending_review": "applied-pending-review", "awaiting_approval": "awaiting-approval"}.get(
        request.state, request.state
    )


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def request_json(request: Request) -> dict[str, Any]:
    """A request as JSON values (the API, `retention show --json`)."""
    out: dict[str, Any] = {}
    for key, value in request.as_dict().items():
        out[key] = iso(value) if isinstance(value, datetime) else value
    out["display_state"] = display_state(request)
    out["change"] = describe_change(request)
    return out
