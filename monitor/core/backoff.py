"""Exponential backoff: the one definition of how long to wait before attempt n, used by the
notification outbox (with jitter) and the commit stream asking again for a refused topic."""

from __future__ import annotations

import random


def backoff_seconds(
    attempt: int, base_seconds: float, max_seconds: float, rng: random.Random | None = None
) -> float:
    """`base_seconds * 2 ** (attempt - 1)` for attempt 1, 2, ..., at most `max_seconds`. With
    `rng`, a full jitter over the upper half of that: never a thundering herd, never 0."""
    ceiling = min(max_seconds, base_seconds * 2 ** max(0, attempt - 1))
    if rng is None:
        return float(ceiling)
    return float(ceiling * (0.5 + rng.random() / 2))
