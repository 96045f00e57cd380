"""How numbers read in messages: the jinja2 filters that rule summaries and notifications share.

A root module, like `types.py`: the evaluate and alert stages may not import each other, and both
render the same quantities for the same on-call engineer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final


def duration_filter(seconds: float | None) -> str:
    """42 min, 2 h 5 min, 3 d 4 h, 45 s; `unknown` for null."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "unknown"
    if math.isinf(seconds):
        return "forever"
    total = max(round(float(seconds)), 0)
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{round(total / 60)} min"
    if total < 86400:
        hours, minutes = divmod(round(total / 60), 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(round(total / 3600), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def percent_filter(ratio: float | None, digits: int = 0) -> str:
    """0.913 -> 91%."""
    return "unknown" if ratio is None else f"{float(ratio) * 100:.{digits}f}%"


def bytes_filter(size: float | None) -> str:
    """1288490188 -> 1.2 GiB."""
    if size is None:
        return "unknown"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def number_filter(number: float | None, digits: int = 0) -> str:
    """1234567 -> 1,234,567; with digits=1: 1,234.5."""
    return "unknown" if number is None else f"{float(number):,.{digits}f}"


NUMBER_FILTERS: Final[dict[str, Callable[..., str]]] = {
    "duration": duration_filter,
    "percent": percent_filter,
    "bytes": bytes_filter,
    "number": number_filter,
}
"""The filters by the names templates use."""
