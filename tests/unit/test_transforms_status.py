"""Burrow's rules as a numbered table: every rule's verdict per window, not only the final status.

Windows are written as (offset, time in s, lag) entries, oldest first; the last is the current
sample. `now` is in seconds. No Spark here: test_transforms_status_columns.py checks the Spark
expressions the job runs against these functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from monitor.evaluate.transforms.status import (
    OK,
    REWIND,
    STALL,
    STOP,
    T_CRITICAL,
    WARN,
    Commit,
    Verdicts,
    commit_window,
    evaluate,
    partition_status,
)

T, F = True, False
Entry = tuple[int, int, int]


def window(*entries: Entry) -> list[Commit]:
    return [Commit(offset, seconds * 1000, lag) for offset, seconds, lag in entries]


@dataclass(frozen=True)
class Case:
    number: int
    name: str
    entries: tuple[Entry, ...]
    now: int
    expected: Verdicts


def case(number: int, name: str, entries: list[Entry], now: int, *verdicts: bool, final: str) -> Case:
    ok_current_lag, stop, rewind, ok_any_zero_lag, stall, warn = verdicts
    expected = Verdicts(ok_current_lag, stop, rewind, ok_any_zero_lag, stall, warn, final)
    return Case(number, name, tuple(entries), now, expected)


# Columns of the verdicts: 1 ok_current_lag, 2 stop, 3 rewind, 4 ok_any_zero_lag, 5 stall, 6 warn.
CASES = [
    #    n  name                                        window                                                        now   1  2  3  4  5  6
    case(1, "caught up now", [(100, 0, 5), (110, 60, 0)], 120, T, F, F, T, F, F, final=OK),
    case(2, "stopped on a busy topic", [(100, 0, 10), (110, 60, 10), (120, 120, 10), (120, 600, 400)], 600, F, T, F, F, F, F, final=STOP),
    # Burrow says STOP: no commit for 540 s > 60 s; but nothing arrived since the last commit.
    case(3, "idle topic, static lag, nothing new", [(90, 0, 10), (99, 60, 1), (99, 600, 1)], 600, F, F, F, F, F, F, final=OK),
    # Burrow says STOP: caught up until 540 s, one message seen at 600 s, not committed yet.
    case(4, "low traffic, message just arrived", [(100, 0, 0), (100, 540, 0), (100, 600, 1)], 605, F, F, F, T, T, F, final=OK),
    case(5, "low traffic, consumer died", [(100, 0, 0), (100, 540, 0), (100, 600, 1), (100, 1200, 3)], 1205, F, T, F, T, T, F, final=STOP),
    case(6, "rewound and still below", [(100, 0, 5), (200, 60, 5), (150, 120, 60)], 130, F, F, T, F, F, F, final=REWIND),
    case(7, "rewound and recovered", [(100, 0, 5), (200, 60, 5), (150, 120, 60), (210, 180, 5)], 190, F, F, F, F, F, F, final=OK),
    case(8, "lag 0 earlier in the window", [(100, 0, 0), (105, 60, 3), (110, 120, 5)], 130, F, F, F, T, F, F, final=OK),
    case(9, "stuck with unread messages, nothing new", [(100, 0, 50), (100, 600, 50)], 600, F, F, F, F, T, F, final=STALL),
    case(10, "lag growing while committing", [(100, 0, 10), (110, 60, 20), (120, 120, 30)], 125, F, F, F, F, F, T, final=WARN),
    case(11, "one sample: nothing to judge", [(100, 0, 50)], 60, F, F, F, F, F, F, final=OK),
    case(12, "no commit in the window (dated at the last observed one)", [(100, -600, 50), (100, 0, 80)], 10, F, T, F, F, T, F, final=STOP),
    case(13, "progressing normally", [(100, 0, 10), (110, 60, 12), (125, 120, 8)], 130, F, F, F, F, F, F, final=OK),
    case(14, "stop wins over rewind", [(200, 0, 5), (100, 60, 110), (100, 600, 200)], 600, F, T, T, F, F, F, final=STOP),
    # Three entries cannot tell a rise from noise (one degree of freedom): OK until STOP applies.
    case(15, "stopped, window not yet longer than the span", [(100, 0, 10), (110, 300, 10), (110, 500, 200)], 600, F, F, F, F, F, F, final=OK),
    # Falling behind (rule 6): the lag's trend over the window, beyond the window's noise.
    case(16, "keeps up, lag bouncing", [(1300, 0, 42), (1624, 15, 18), (1887, 30, 55), (2211, 45, 31), (2516, 60, 26), (2782, 75, 60), (3120, 90, 22), (3395, 105, 47), (3707, 120, 35), (4013, 135, 29), (4291, 150, 51)], 160, F, F, F, F, F, F, final=OK),
    # Burrow says WARN: the lag never decreased.
    case(17, "keeps up at a steady lag", [(1300, 0, 30), (1600, 15, 30), (1900, 30, 30), (2200, 45, 30)], 50, F, F, F, F, F, F, final=OK),
    # Burrow says WARN: the lag rose from entry to entry, by chance.
    case(18, "keeps up, three entries rising by chance", [(1300, 0, 20), (1615, 15, 35), (1909, 30, 41)], 35, F, F, F, F, F, F, final=OK),
    case(19, "keeps up with bursts", [(1300, 0, 5), (1425, 15, 180), (1893, 30, 12), (2035, 45, 170), (2497, 60, 8), (2615, 75, 190), (3090, 90, 15), (3245, 105, 160), (3696, 120, 9), (3820, 135, 185), (4294, 150, 11)], 160, F, F, F, F, F, F, final=OK),
    # Burrow says OK: the lag went down now and then.
    case(20, "falling behind slowly, lag bouncing", [(1300, 0, 30), (1578, 15, 52), (1889, 30, 41), (2160, 45, 70), (2464, 60, 66), (2735, 75, 95), (3047, 90, 83), (3318, 105, 112), (3626, 120, 104), (3899, 135, 131), (4204, 150, 126)], 160, F, F, F, F, F, T, final=WARN),
    case(21, "falling behind by one record a commit", [(1300, 0, 30), (1599, 15, 31), (1898, 30, 32), (2197, 45, 33), (2496, 60, 34), (2795, 75, 35)], 80, F, F, F, F, F, T, final=WARN),
]  # fmt: skip


@pytest.mark.parametrize("c", CASES, ids=[f"{c.number}-{c.name}" for c in CASES])
def test_rule_verdicts(c: Case) -> None:
    assert evaluate(window(*c.entries), c.now * 1000) == c.expected


def test_case_numbers_are_unique_and_ordered() -> None:
    assert [c.number for c in CASES] == list(range(1, len(CASES) + 1))


# The window taken from samples: (samples, last observed commit in s or None, size, expected).
WINDOWS = [
    (
        "commits plus the current sample",
        [(100, 0, 10), (100, 60, 15), (110, 120, 10), (110, 180, 20)],
        None,
        10,
        [(100, 0, 10), (110, 120, 10), (110, 180, 20)],
    ),
    (
        "first sample dated at an older observed commit",
        [(100, 0, 50), (100, 60, 60)],
        -600,
        10,
        [(100, -600, 50), (100, 60, 60)],
    ),
    (
        "observed commit inside the window does not move the first sample",
        [(100, 0, 50), (110, 60, 60)],
        60,
        10,
        [(100, 0, 50), (110, 60, 60)],
    ),
    (
        "only the last N commits",
        [(100, 0, 9), (110, 60, 9), (120, 120, 9), (130, 180, 9), (130, 240, 9)],
        None,
        2,
        [(120, 120, 9), (130, 180, 9), (130, 240, 9)],
    ),
    (
        "last caught-up sample and the first that saw new data",
        [(100, 0, 0), (100, 60, 0), (100, 120, 0), (100, 180, 1), (100, 240, 1), (100, 300, 2)],
        None,
        10,
        [(100, 0, 0), (100, 120, 0), (100, 180, 1), (100, 300, 2)],
    ),
    (
        "lagging at the last commit: the first sample after it with a higher end",
        [(100, 0, 5), (100, 60, 5), (100, 120, 7), (100, 180, 9)],
        None,
        10,
        [(100, 0, 5), (100, 120, 7), (100, 180, 9)],
    ),
    ("a sample given twice counts once", [(100, 0, 5), (100, 0, 5)], None, 10, [(100, 0, 5)]),
    ("unordered samples are sorted", [(110, 60, 1), (100, 0, 2)], None, 10, [(100, 0, 2), (110, 60, 1)]),
    ("no samples", [], None, 10, []),
]


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
