"""The sliding-window status on the real cluster: groups that keep up, steadily or under bursts of
writes, stay OK evaluation after evaluation (no WARN), next to a group that reads slower than its
producer writes, which is WARN (falling behind: status.py, rule 6)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from sqlalchemy import Engine

from monitor.devtools.workload.plan import Behaviour, GroupPlan, Plan, TopicPlan
from monitor.devtools.workload.runner import Workload
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.sql import rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

EVALUATIONS = 3


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


def test_groups_that_keep_up_stay_ok_and_one_falling_behind_is_warn(
    kafka: KafkaTestHelper, scenario: Any, engine: Engine
) -> None:
    prefix = f"fb{uuid.uuid4().hex[:6]}-"
    steady, bursty, slow = f"{prefix}steady", f"{prefix}bursty", f"{prefix}slow"
    readers = {
        steady: f"{prefix}steady-reader",
        bursty: f"{prefix}bursty-reader",
        slow: f"{prefix}slow-reader",
    }
    plan = Plan(
        topics=(
            TopicPlan(steady, 1, rate=20),
            # 120 records at once every 6 s: the lag jumps and falls back.
            TopicPlan(bursty, 1, rate=20, burst_seconds=6),
            TopicPlan(slow, 1, rate=20),
        ),
        groups=(
            GroupPlan(readers[steady], steady, Behaviour.HEALTHY),
            GroupPlan(readers[bursty], bursty, Behaviour.HEALTHY),
            # Reads 15 of the 20 records a second: 5/s behind, with the lag's bounce on top.
            GroupPlan(readers[slow], slow, Behaviour.SLOW, rate=15),
        ),
        steps=(),
        web_url="http://kafka-health.test",
        cluster="falling-behind",
    )
    cluster = f"falling-behind-{prefix.rstrip('-')}"
    with Workload(plan, kafka.bootstrap_servers, lambda _: None):
        kafka.wait_for(
            lambda: all(kafka.committed(g, t) for t, g in readers.items()), 60, "the groups' first commits"
        )
        s = scenario(cluster, list(readers))
        # Samples every 2 s for 40 s: more commits than the status window holds (10), so that
        # the slow group's first samples, caught up, have left it.
        started = time.monotonic()
        while time.monotonic() - started < 40:
            s.collect()
            time.sleep(2)
        for _ in range(EVALUATIONS):
            for _ in range(3):
                s.collect()
                time.sleep(2)
            s.evaluate()

    seen = statuses(engine, cluster)
    for topic in (steady, bursty):
        group = seen[readers[topic]]
        assert len(group) == EVALUATIONS and all(status == "OK" for status, _ in group), (topic, seen)
    # The bursty group was behind by a burst at some evaluations: OK is not "caught up" alone.
    assert any(lag > 0 for _, lag in seen[readers[bursty]] + seen[readers[steady]]), seen
    slow_group = seen[readers[slow]]
    assert len(slow_group) == EVALUATIONS and all(status == "WARN" for status, _ in slow_group), seen
    assert slow_group[-1][1] > slow_group[0][1], seen  # and its lag grew from one to the next
