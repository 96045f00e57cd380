"""Estimating when a record was appended from the end-offset history, when it cannot be read.

The history is the persisted list of (end offset, observed at) samples of a partition. The record
at offset `o` was appended when the end offset went past `o`, i.e. between the last sample with
end <= o and the first with end > o. Known failures of this method elsewhere, and what we do:

- a flat line (end did not move between samples) never brackets `o`, so there is no division by
  zero and no infinite lag;
- bursty producers: the estimate is linear inside one interval and its error bound is the
  interval's width, so a burst can only move it within the interval it is reported with;
- `o` older than the whole history: extrapolated backwards at the history's average rate, with
  the extrapolated distance as its error; with no rate, the oldest sample time is returned as a
  stated lower bound of the lag (error None), never silently capped;
- the history is persisted in PostgreSQL (`partition_offsets`), so a restart loses nothing.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Estimate:
    """Estimated append time of a record, in epoch ms.

    `error_ms` bounds |estimate - truth|. None means the estimate is only an upper bound of the
    append time (the record is at least that old), because the history starts after it.
    """

    timestamp_ms: int
    error_ms: int | None


def estimate_append_time(history: Sequence[tuple[int, int]], offset: int) -> Estimate | None:
    """When did the end offset pass `offset`? `history` is (end offset, observed ms), ascending in
    time. Returns None when the history is empty or never reached past `offset` (not appended yet,
    as far as the history knows)."""
    points = _monotone(history)
    if not points:
        return None
    target = offset + 1  # the record at `offset` makes the end offset `offset + 1`
    ends = [end for end, _ in points]
    if ends[-1] < target:
        return None
    first_after = bisect_right(ends, offset)  # first sample with end > offset
    if first_after == 0:
        return _before_history(points, target)
    (end0, t0), (end1, t1) = points[first_after - 1], points[first_after]
    fraction = (target - end0) / (end1 - end0)  # end1 > offset >= end0, so end1 > end0
    estimate = t0 + fraction * (t1 - t0)
    return Estimate(timestamp_ms=round(estimate), error_ms=round(max(estimate - t0, t1 - estimate)))


def _before_history(points: list[tuple[int, int]], target: int) -> Estimate:
    end0, t0 = points[0]
    end_n, t_n = points[-1]
    if len(points) < 2 or end_n <= end0 or t_n <= t0:
        return Estimate(timestamp_ms=t0, error_ms=None)
    rate = (end_n - end0) / (t_n - t0)  # records per ms over the whole history
    back = (end0 - target) / rate
    # The record came before the first sample by `back` at the average rate; the truth can be
    # off by that distance plus one sampling interval.
    return Estimate(timestamp_ms=round(t0 - back), error_ms=round(back) + (points[1][1] - t0))


def _monotone(history: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted by time, with end offsets made non-decreasing (an end offset can only move backwards
    through a stale read or a truncation; such samples say nothing about appends)."""
    points: list[tuple[int, int]] = []
    for end, observed in sorted(history, key=lambda p: p[1]):
        if points and (end < points[-1][0] or observed == points[-1][1]):
            continue
        points.append((end, observed))
    return points
