"""Interpolated append times: a numbered table of cases, including the ones other tools get wrong."""

from __future__ import annotations

import pytest

from monitor.collect.interpolate import Estimate, estimate_append_time

# (case, history [(end offset, observed ms)], offset, expected)
CASES: list[tuple[int, list[tuple[int, int]], int, Estimate | None]] = [
    # 1. empty history: nothing to say
    (1, [], 5, None),
    # 2. one point, offset already appended before it: a lower bound of the age, no error bound
    (2, [(100, 10_000)], 50, Estimate(10_000, None)),
    # 3. one point, offset not appended yet
    (3, [(100, 10_000)], 100, None),
    # 4. linear producer, 10 records/s: record 14 made end 15, halfway between 10 and 20
    (4, [(10, 0), (20, 1_000), (30, 2_000)], 14, Estimate(500, 500)),
    # 5. exactly on a sample: end reached 20 at t=1000, record 19 appended then (bounded by its interval)
    (5, [(10, 0), (20, 1_000), (30, 2_000)], 19, Estimate(1_000, 1_000)),
    # 6. flat line then a jump: no division by zero, estimate inside the jump's interval
    (6, [(10, 0), (10, 1_000), (10, 2_000), (20, 3_000)], 12, Estimate(2_300, 700)),
    # 7. flat line and the offset is at the end: not appended, no infinite lag
    (7, [(10, 0), (10, 1_000), (10, 2_000)], 10, None),
    # 8. committed below the whole history: extrapolated back at the average rate; error = that
    #    distance plus one sampling interval
    (8, [(100, 10_000), (200, 20_000)], 49, Estimate(5_000, 15_000)),
    # 9. below the history with a flat history: oldest sample as a lower bound, no error bound
    (9, [(100, 10_000), (100, 20_000)], 40, Estimate(10_000, None)),
    # 10. bursty producer: 1000 records land in one interval; error is that interval's width at most
    (10, [(0, 0), (0, 59_000), (1_000, 60_000), (1_000, 120_000)], 499, Estimate(59_500, 500)),
    # 11. unordered input and a stale sample going backwards are ignored
    (11, [(20, 1_000), (10, 0), (15, 1_500), (30, 2_000)], 24, Estimate(1_500, 500)),
    # 12. duplicate observation times keep the first
    (12, [(10, 0), (20, 1_000), (25, 1_000), (30, 2_000)], 24, Estimate(1_500, 500)),
]


@pytest.mark.parametrize(("case", "history", "offset", "expected"), CASES, ids=[f"case{c[0]}" for c in CASES])
def test_estimate(case: int, history: list[tuple[int, int]], offset: int, expected: Estimate | None) -> None:
    assert estimate_append_time(history, offset) == expected


@pytest.mark.parametrize("offset", range(0, 1000, 37))
def test_estimate_is_always_bounded_and_inside_the_history_when_bracketed(offset: int) -> None:
    history = [(0, 0), (0, 1_000), (500, 2_000), (500, 3_000), (1_000, 4_000)]
    result = estimate_append_time(history, offset)
    assert result is not None and result.error_ms is not None
    assert 1_000 <= result.timestamp_ms <= 4_000
    assert result.error_ms <= 1_000
