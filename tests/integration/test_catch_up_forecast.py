"""The catch-up forecast on the real cluster (`lag_workload`'s catch-up cluster): a group made to
lag at controlled rates catches up when the evaluation said it would (within 25 %), and one that
reads slower than its producer writes is "not catching up"; both as the read layer (the API's
group resource) and the lag notifications' summaries say it. The consumer advice beside it: the
gaining group's one consumer is enough; the slow one's single partition needs more than one
consumer reads, so even one consumer per partition cannot catch up (it needs more partitions)."""

from __future__ import annotations

import pytest

from monitor.expose.read import lag as read_lag
from tests.fixtures.lag_workload import LagWorkload
from tests.fixtures.sql import rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]


def test_a_lagging_group_catches_up_when_forecast_and_a_slow_one_is_not_catching_up(
    lag_workload: LagWorkload,
) -> None:
    w = lag_workload
    cluster, gaining, losing = w.catch_up.name, w.readers["gaining"], w.readers["losing"]
    observed = w.caught_up_after_seconds
    with w.engine.connect() as conn:
        found = read_lag.group(conn, cluster, gaining)
        slow = read_lag.group(conn, cluster, losing)
    assert found is not None and slow is not None
    g = found.group
    forecast = g.time_to_catch_up_seconds
    assert forecast is not None and g.catching_up is True, g
    assert abs(forecast - observed) <= 0.25 * observed, (forecast, observed, g)
    assert g.catch_up_low_seconds is not None and g.catch_up_low_seconds <= forecast, g
    assert g.catch_up_high_seconds is None or g.catch_up_high_seconds >= forecast, g
    (topic_row,) = found.topics
    assert topic_row.catching_up is True and topic_row.catch_up_low_seconds == g.catch_up_low_seconds

    # The slow group: consume <= produce, no catch-up time, said so with both rates.
    assert slow.group.catching_up is False and slow.group.time_to_catch_up_seconds is None, slow.group
    # The advice: one consumer reading 40/s of 2/s arriving is enough; one partition written at
    # 4/s and read at 2/s by its one consumer cannot be helped by more consumers of the group.
    assert (g.consumers_needed, g.advice_limited_by) == (1, None), g
    assert slow.group.members == 1 and slow.group.partitions == 1, slow.group
    assert (slow.group.consumers_needed, slow.group.advice_limited_by) == (1, "partitions"), slow.group

    # The lag notifications say the same (ConsumerAppendLag's summary: the backlog is minutes old).
    def summaries(group: str) -> set[str]:
        return {
            f["summary"]
            for f in w.catch_up.findings()
            if f["rule"] == "ConsumerAppendLag" and group in f["entity_key"]
        }

    told = summaries(gaining)
    found_rules = [(f["rule"], f["entity_key"], f["state"]) for f in w.catch_up.findings()]
    assert any("catches up in ~" in text and "at the current rate" in text for text in told), (
        told,
        found_rules,
    )
    told = summaries(losing)
    assert any("not catching up: reads " in text and "/s arrive" in text for text in told), told
    assert any(
        "even 1 consumer (one per partition; now 1) cannot read the backlog" in text for text in told
    ), told
    partitions = rows(
        w.engine,
        "SELECT catching_up, catch_up_low_seconds FROM derived_group_partition WHERE cluster = :c"
        " AND group_id = :g",
        c=cluster,
        g=losing,
    )
    assert [r["catching_up"] for r in partitions] == [False] and partitions[0]["catch_up_low_seconds"] is None
