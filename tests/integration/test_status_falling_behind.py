"""The sliding-window status on the real cluster (`lag_workload`'s falling-behind cluster): groups
that keep up, steadily or under bursts of writes, stay OK evaluation after evaluation (no WARN),
next to a group that reads slower than its producer writes, which is WARN (falling behind:
status.py, rule 6)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from tests.fixtures.lag_workload import EVALUATIONS, LagWorkload
from tests.fixtures.sql import rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]


def statuses(engine: Engine, cluster: str) -> dict[str, list[tuple[str, int]]]:
    """group -> (status, offset lag) of its partition per evaluation, oldest first."""
    found = rows(
        engine,
        "SELECT group_id, status, offset_lag FROM derived_group_partition WHERE cluster = :c"
        " ORDER BY evaluated_at",
        c=cluster,
    )
    by_group: dict[str, list[tuple[str, int]]] = {}
    for r in found:
        by_group.setdefault(str(r["group_id"]), []).append((str(r["status"]), int(r["offset_lag"])))
    return by_group


def test_groups_that_keep_up_stay_ok_and_one_falling_behind_is_warn(lag_workload: LagWorkload) -> None:
    w = lag_workload
    seen = statuses(w.engine, w.falling_behind.name)
    for role in ("steady", "bursty"):
        group = seen[w.readers[role]]
        assert len(group) == EVALUATIONS and all(status == "OK" for status, _ in group), (role, seen)
    # The bursty group was behind by a burst at some evaluations: OK is not "caught up" alone.
    assert any(lag > 0 for _, lag in seen[w.readers["bursty"]] + seen[w.readers["steady"]]), seen
    slow_group = seen[w.readers["slow"]]
    assert len(slow_group) == EVALUATIONS and all(status == "WARN" for status, _ in slow_group), seen
    assert slow_group[-1][1] > slow_group[0][1], seen  # and its lag grew from one to the next
