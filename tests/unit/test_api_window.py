"""The `window` query parameter: what the OpenAPI document promises is what the handler takes."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from monitor.expose.web.api.clusters import MAX_WINDOW, WINDOW_DOCUMENTED, parse_window

LIMITS = {"s": 7_776_000, "m": 129_600, "h": 2_160, "d": 90}


@pytest.mark.parametrize("unit", sorted(LIMITS))
def test_the_documented_pattern_accepts_exactly_what_parse_window_accepts(unit: str) -> None:
    limit = LIMITS[unit]
    edges = [*range(0, 1200), *range(limit - 1200, limit + 1200), limit * 10, 10**7 - 1, 10**8]
    for value in edges:
        text = f"{value}{unit}"
        documented = re.match(WINDOW_DOCUMENTED, text) is not None
        try:
            parse_window(text)
            parsed = True
        except ValueError:
            parsed = False
        assert documented == parsed == (1 <= value <= limit), text


def test_windows_parse_to_durations_and_bad_ones_say_why() -> None:
    assert parse_window("90s") == timedelta(seconds=90)
    assert parse_window("90d") == MAX_WINDOW
    with pytest.raises(ValueError, match="longer than 90 days"):
        parse_window("2161h")
    with pytest.raises(ValueError, match="a number and a unit"):
        parse_window("1y")
    assert re.match(WINDOW_DOCUMENTED, "01h") is None
