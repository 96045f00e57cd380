"""The catch-up forecast as one sentence (monitor.core.formatting.catch_up_filter), as lag
notifications, the CLI and the API's readers say it: a table of derived rows."""

from __future__ import annotations

import pytest

from monitor.core.formatting import catch_up_filter

# offset_lag, consume, produce, catch-up, low, high, data loss -> sentence
CASES = [
    ((0, 20.0, 20.0, 0.0, 0.0, 0.0, None), "caught up"),
    ((None, None, None, None, None, None, None), "lag unknown"),
    ((500, None, 20.0, None, None, None, None), "no catch-up forecast yet (no rates over the window)"),
    ((8400, 30.0, 20.0, 840.0, 600.0, 1500.0, None), "catches up in ~14 min at the current rate (10 min to 25 min)"),
    ((8400, 30.0, 20.0, 840.0, 830.0, 850.0, None), "catches up in ~14 min at the current rate"),
    ((8400, 30.0, 20.0, 840.0, 600.0, None, None),
     "catches up in ~14 min at the current rate (at least 10 min; the rates vary too much to rule out not catching up)"),
    ((90_000, 80.0, 120.0, None, None, None, 2520.0),
     "not catching up: reads 80/s, 120/s arrive; retention deletes unread data in 42 min"),
    ((12, 2.5, 2.5, None, None, None, None), "not catching up: reads as fast as records arrive (2.5/s); the backlog of 12 stays"),
    ((12, 19.96, 20.04, None, None, None, 600.0),
     "not catching up: reads as fast as records arrive (20/s); the backlog of 12 stays; retention deletes unread data in 10 min"),
    ((12, 1.9, 2.0, None, None, None, None), "not catching up: reads 1.9/s, 2.0/s arrive"),
    ((8400, 30.0, 20.0, 840.0, 600.0, 1500.0, 7200.0),
     "catches up in ~14 min at the current rate (10 min to 25 min); retention deletes unread data in 2 h"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "sentence"), CASES, ids=[c[1][:40] for c in CASES])
def test_the_forecast_reads_as_one_sentence(row: tuple[float | None, ...], sentence: str) -> None:
    assert catch_up_filter(*row) == sentence
