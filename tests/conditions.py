"""Waiting for a condition, not a clock: poll until something holds, fail naming what never did."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """Call `probe` until it returns something truthy and return that; AssertionError naming
    `what` (and the last value, or the last exception) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = probe()
        except Exception as exc:  # the condition may be unreadable for a while (a server starting)
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}; last seen: {last!r}")
        time.sleep(interval)
