"""Sliding-window consumer status: Burrow's rules (DOMAIN.md 1) as small pure functions over a
window of commits. They are the specification: status_columns.py computes the same with Spark
column expressions for every group-partition, and is tested against these functions.

The window. We observe commits by sampling committed offsets, so a "commit" is a sample in which
the committed offset changed; its time is the sample time (the observed commit time, late by at
most one interval). The window of a group-partition is, in time order:

- its first sample in the evaluation window, dated at the last observed commit when that is
  older (the offset was committed then; nothing changed since);
- every later sample whose committed offset differs from the sample before it, kept to the last
  `size` commits;
- after the last commit, the last sample at which the consumer was caught up (lag 0), and the
  first sample after that (or after the commit) that saw the end offset move: new data arrived;
- the current (newest) sample.

Each entry carries the lag of its sample; its end offset is offset + lag. The current entry gives
the current lag and end offset.

The rules, in order (the first that holds decides):

1. OK when the current lag is 0.
2. STOP when the consumer has had something to read, without committing, for longer than the
   window spans (Burrow: now - last commit > last commit - first commit). Unlike Burrow, a
   consumer with nothing new to read is not stopped, which removes its false STOPs on
   low-traffic topics: the reference is the last time it had nothing to do (caught up since its
   last commit, which needs no commit, else the last commit itself); it is not stopped when the
   end offset did not move since then, and the clock starts when new data was first seen. A
   consumer that keeps committing the same offset looks like one that stopped committing
   (offsets alone cannot tell them apart): both are STOP.
3. REWIND when a committed offset went backwards and the current one is still below the highest.
4. OK when any entry in the window had lag 0.
5. STALL when the window has at least 2 entries, all at one offset, and the lag is not 0.
6. WARN when the consumer is falling behind: over the window's entries the lag rises, beyond
   the noise of the window (`falling_behind`). Burrow's own rule 6 ("the lag never decreased")
   flickered on groups that keep up: a lag of a few dozen records that bounces rises from entry
   to entry by chance in short windows, and "never decreased" counts an equal lag as rising.
7. Otherwise OK.

Falling behind. The lag's slope over time is the produce rate minus the consume rate, both
measured between the same samples. Its least-squares estimate over the window's n entries, and
that estimate's standard error from the scatter of the lags around the fitted line, say whether
the consumer reads slower than records arrive beyond what the window's noise explains: WARN when
the slope is above zero by more than `T_CRITICAL[n - 2]` standard errors (Student's t, one-sided,
99.9 %), at least 3 entries. A group that keeps up has a flat trend (its lag bounces around a
level) and stays OK; one whose lag grows steadily, however slowly, is WARN once the window shows
it above its noise. Written without division or square root, so that the Python rule and its
Spark expression (status_columns.py) compute the same doubles in the same order:
A = n St2 - St^2, B = n Sty - St Sy, C = n Sy2 - Sy^2 (sums over the entries, time in ms from the
first entry); falling behind when A > 0, B > 0 and B^2 (n - 2 + t^2) > t^2 A C, which is
slope > t * standard error.

The test assumes the scatter is independent from entry to entry, and one kind is not: a consumer
that keeps up and commits about once between two samples has, at each sample, the records that
arrived since its last commit as lag; when its commit moment drifts against the sample clock,
that lag ramps up sample after sample, a rise the test takes for a trend. Such a lag never
exceeds what arrives between two samples, so WARN also needs the current lag above the records
that arrived per entry of the window on average ((n - 1) * lag > end offset now - end offset at
the first entry). A consumer that does fall behind passes that step soon (its lag grows without
bound); one within it is as near caught up as sampling can tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from pyspark.sql import Column
from pyspark.sql import functions as F

from monitor.core.vocabulary import CONSUMER_STATUSES, STATUS_RANK

OK, WARN, ERR, STOP, STALL, REWIND = CONSUMER_STATUSES
DEFAULT_WINDOW_COMMITS = 10


@dataclass(frozen=True, slots=True)
class Commit:
    """One window entry: the committed offset, when it was observed (epoch ms), its lag then."""

    offset: int
    time_ms: int
    lag: int

    @property
    def end(self) -> int:
        """The end offset at that time (exact when lagging; a lower bound when lag was clamped)."""
        return self.offset + self.lag


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Every rule's verdict on one window, and the status they decide."""

    ok_current_lag: bool
    stop: bool
    rewind: bool
    ok_any_zero_lag: bool
    stall: bool
    warn: bool
    final: str


def commit_window(
    samples: Sequence[Commit], last_commit_ms: int | None, size: int = DEFAULT_WINDOW_COMMITS
) -> list[Commit]:
    """The window (see the module docstring) from a group-partition's samples in any order (one
    per time: the latest row repeats the newest sample). Returns [] for no samples; the last entry
    is always the current sample."""
    ordered = sorted({s.time_ms: s for s in samples}.values(), key=lambda s: s.time_ms)
    if not ordered:
        return []
    if last_commit_ms is not None and last_commit_ms < ordered[0].time_ms:
        ordered[0] = replace(ordered[0], time_ms=last_commit_ms)
    changes = [0] + [i for i in range(1, len(ordered)) if ordered[i].offset != ordered[i - 1].offset]
    caught_up = [i for i in range(changes[-1], len(ordered)) if ordered[i].lag <= 0][-1:]
    reference = caught_up[0] if caught_up else changes[-1]
    after = range(reference + 1, len(ordered))
    new_data = [i for i in after if ordered[i].end > ordered[reference].end][:1]
    picked = sorted({*changes[-size:], *caught_up, *new_data, len(ordered) - 1})
    return [ordered[i] for i in picked]


def last_commit_index(window: Sequence[Commit]) -> int:
    """Index of the entry at which the current committed offset was first seen in the window."""
    index = len(window) - 1
    while index > 0 and window[index - 1].offset == window[index].offset:
        index -= 1
    return index


def current_lag_ok(window: Sequence[Commit]) -> bool:
    """Rule 1: the current lag is 0."""
    return window[-1].lag <= 0


def idle_reference(window: Sequence[Commit]) -> int:
    """Index of the last entry at which the consumer had nothing left to do: the last caught-up
    entry since its last commit (a caught-up consumer needs no commit), else the last commit."""
    start = last_commit_index(window)
    caught_up = [i for i in range(start, len(window)) if window[i].lag <= 0]
    return caught_up[-1] if caught_up else start


def waiting_since(window: Sequence[Commit]) -> int | None:
    """Since when (ms) the consumer has had something to read without committing: the idle
    reference if it was lagging then, else the first later entry that saw new data. None when it
    has nothing to read (caught up, or the end offset did not move since the reference)."""
    index = idle_reference(window)
    reference, current = window[index], window[-1]
    if current.lag <= 0 or current.end <= reference.end:
        return None
    if reference.lag > 0:
        return reference.time_ms
    return next(c.time_ms for c in window[index:] if c.end > reference.end)


def stopped(window: Sequence[Commit], now_ms: int) -> bool:
    """Rule 2: something to read, and no commit (nor a caught-up moment) for longer than the
    window spans up to the idle reference."""
    since = waiting_since(window)
    span = window[idle_reference(window)].time_ms - window[0].time_ms
    return since is not None and now_ms - since > span


def rewound(window: Sequence[Commit]) -> bool:
    """Rule 3: an offset went backwards and the current offset is still below the highest."""
    went_back = any(b.offset < a.offset for a, b in pairwise(window))
    return went_back and window[-1].offset < max(c.offset for c in window)


def any_lag_zero(window: Sequence[Commit]) -> bool:
    """Rule 4: some entry in the window had lag 0."""
    return any(c.lag <= 0 for c in window)


def stalled(window: Sequence[Commit]) -> bool:
    """Rule 5: at least 2 entries, all at one offset, while lagging."""
    return len(window) >= 2 and len({c.offset for c in window}) == 1 and window[-1].lag > 0


T_CRITICAL: tuple[float, ...] = (
    318.309, 22.327, 10.215, 7.173, 5.893, 5.208, 4.785, 4.501, 4.297, 4.144,
    4.025, 3.930, 3.852, 3.787, 3.733, 3.686, 3.646, 3.610, 3.579, 3.552,
    3.527, 3.505, 3.485, 3.467, 3.450, 3.435, 3.421, 3.408, 3.396, 3.385,
)  # fmt: skip
"""Student's t one-sided 99.9 % quantiles for 1, 2, ... 30 degrees of freedom (n - 2 for a line
fitted to n entries); beyond 30, the last (a little stricter than the true value)."""


def t_critical(degrees: int) -> float:
    """The T_CRITICAL value for `degrees` (>= 1) degrees of freedom."""
    return T_CRITICAL[min(degrees, len(T_CRITICAL)) - 1]


def behind_by_more_than_a_step(window: Sequence[Commit]) -> bool:
    """The current lag is more than the records that arrived per entry of the window on average:
    (n - 1) * lag > end offset now - end offset at the first entry (the module docstring)."""
    return (len(window) - 1) * window[-1].lag > window[-1].end - window[0].end


def falling_behind(window: Sequence[Commit]) -> bool:
    """Rule 6: at least 3 entries, behind by more than a step, and a significant rise."""
    return len(window) >= 3 and behind_by_more_than_a_step(window) and significant_rise(window)


def significant_rise(window: Sequence[Commit]) -> bool:
    """The least-squares slope of the lag over time is above zero by more than t_critical(n - 2)
    standard errors (the module docstring); at least 3 entries."""
    n = len(window)
    if n < 3:
        return False
    st = sy = st2 = sty = sy2 = 0.0
    for c in window:
        t, y = float(c.time_ms - window[0].time_ms), float(c.lag)
        st, sy, st2, sty, sy2 = st + t, sy + y, st2 + t * t, sty + t * y, sy2 + y * y
    a, b, c_ = n * st2 - st * st, n * sty - st * sy, n * sy2 - sy * sy
    t = t_critical(n - 2)
    t2 = t * t
    return a > 0 and b > 0 and b * b * (n - 2 + t2) > t2 * a * c_


def evaluate(window: Sequence[Commit], now_ms: int) -> Verdicts:
    """Every rule's verdict on a non-empty window, and the status of the first rule that holds."""
    verdicts = Verdicts(
        ok_current_lag=current_lag_ok(window),
        stop=stopped(window, now_ms),
        rewind=rewound(window),
        ok_any_zero_lag=any_lag_zero(window),
        stall=stalled(window),
        warn=falling_behind(window),
        final=OK,
    )
    return replace(verdicts, final=decide(verdicts))


def decide(verdicts: Verdicts) -> str:
    """The status of the first rule that holds, in Burrow's order; OK when none does."""
    ordered = (
        (verdicts.ok_current_lag, OK),
        (verdicts.stop, STOP),
        (verdicts.rewind, REWIND),
        (verdicts.ok_any_zero_lag, OK),
        (verdicts.stall, STALL),
        (verdicts.warn, WARN),
    )
    return next((status for holds, status in ordered if holds), OK)


def partition_status(
    samples: Sequence[Commit], last_commit_ms: int | None, now_ms: int, size: int = DEFAULT_WINDOW_COMMITS
) -> str | None:
    """The status of one group-partition from its samples; None when there are none."""
    window = commit_window(samples, last_commit_ms, size)
    return evaluate(window, now_ms).final if window else None


def severity(status: Column) -> Column:
    """The severity rank of a status column (null for null)."""
    ranks = F.create_map(*[F.lit(x) for pair in STATUS_RANK.items() for x in pair])
    return F.try_element_at(ranks, status)


def worst(status: Column) -> Column:
    """Aggregate: the most severe status of a group of rows."""
    return F.max_by(status, severity(status))


def as_group_status(status: Column) -> Column:
    """A partition status as a group status: STOP, STALL and REWIND count as ERR."""
    return F.when(severity(status) > STATUS_RANK[WARN], F.lit(ERR)).otherwise(status)
