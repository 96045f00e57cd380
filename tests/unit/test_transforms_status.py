"""Burrow's rules as a numbered table: every rule's verdict per window, not only the final status.

Windows are written as (offset, time in s, lag) entries, oldest first; the last is the current
sample. `now` is in seconds. No Spark here: test_transforms_status_columns.py checks the Spark
expressions the job runs against these functions.

The tables live in `tests/fixtures/status_cases.py`: the Spark test of the same rules reads them.
"""

from __future__ import annotations

import math

import pytest

from monitor.evaluate.transforms.status import (
    STOP,
    T_CRITICAL,
    behind_by_more_than_a_step,
    commit_window,
    evaluate,
    partition_status,
    significant_rise,
)
from tests.fixtures.status_cases import CASES, WINDOWS, Case, window

Entry = tuple[int, int, int]


@pytest.mark.parametrize("c", CASES, ids=[f"{c.number}-{c.name}" for c in CASES])
def test_rule_verdicts(c: Case) -> None:
    assert evaluate(window(*c.entries), c.now * 1000) == c.expected


def test_case_numbers_are_unique_and_ordered() -> None:
    assert [c.number for c in CASES] == list(range(1, len(CASES) + 1))


@pytest.mark.parametrize(
    ("name", "samples", "last_commit_s", "size", "expected"), WINDOWS, ids=[w[0] for w in WINDOWS]
)
def test_commit_window(
    name: str, samples: list[Entry], last_commit_s: int | None, size: int, expected: list[Entry]
) -> None:
    last_ms = None if last_commit_s is None else last_commit_s * 1000
    assert commit_window(window(*samples), last_ms, size) == window(*expected)


def test_partition_status_from_samples() -> None:
    # Stopped consumer: committed 100..130 every minute, then nothing while the producers write.
    samples = window(
        (100, 0, 100), (110, 60, 100), (120, 120, 100), (130, 180, 100),
        *[(130, t, 100 + (t - 180) // 6) for t in range(240, 660, 60)],
    )  # fmt: skip
    assert partition_status(samples, None, 600_000) == STOP
    assert partition_status([], None, 600_000) is None


def test_a_keeping_up_ramp_rises_significantly_and_only_the_step_keeps_it_ok() -> None:
    # Case 22: the slope test alone would say WARN; the lag stays within one step.
    ramp = window(*next(c for c in CASES if c.number == 22).entries)
    assert significant_rise(ramp) and not behind_by_more_than_a_step(ramp)
    # The same ramp a step further behind (every lag + 40) is falling behind.
    further = window(*[(c.offset, c.time_ms // 1000, c.lag + 40) for c in ramp])
    assert evaluate(further, 19_000).warn


def _t_tail(t: float, degrees: int, steps: int = 20_000) -> float:
    """P(T > t) for Student's t with `degrees` degrees of freedom: Simpson's rule on the density
    after x = t / u (u in (0, 1]), which maps (t, infinity) onto a finite interval."""
    norm = math.exp(math.lgamma((degrees + 1) / 2) - math.lgamma(degrees / 2)) / math.sqrt(degrees * math.pi)

    def f(u: float) -> float:
        if u == 0:
            return 0.0
        x = t / u
        return norm * (1 + x * x / degrees) ** (-(degrees + 1) / 2) * t / (u * u)

    h = 1 / steps
    total = f(0) + f(1) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, steps))
    return total * h / 3


@pytest.mark.parametrize("degrees", range(1, len(T_CRITICAL) + 1))
def test_t_critical_values_are_the_99_9_percent_quantiles(degrees: int) -> None:
    # Three significant decimals: the tail beyond the value is 0.1 % to within the rounding.
    tail = _t_tail(T_CRITICAL[degrees - 1], degrees)
    assert tail == pytest.approx(0.001, rel=0.01), tail
