"""The consumer advice followed on the real cluster (`tests/fixtures/scale_out.py`): two twin
groups, each one consumer short of its producer on a six-partition topic whose retention deletes
unread records within minutes, are evaluated; the advice says how many consumers each needs.
One group is given that many and reads its backlog before the time until data loss the same
evaluation gave; the other, given one fewer, is forecast to catch up only after its data loss (or
not at all), and is still far behind when its twin has caught up."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from monitor.evaluate.job import JobSettings
from monitor.expose.read import lag as read_lag
from monitor.expose.read.lag import GroupSummary
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.postgres import PgServer
from tests.fixtures.scale_out import (
    CAUGHT_UP_RECORDS,
    PARTITIONS,
    PER_CONSUMER,
    PRODUCE,
    ROLES,
    CatchUpWatch,
    ScaleOut,
    scale_out_cluster,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1500)]


def _group(s: ScaleOut, role: str) -> GroupSummary:
    with s.scenario.engine.connect() as conn:
        found = read_lag.group(conn, s.scenario.name, s.groups[role])
    assert found is not None, role
    return found.group


def test_the_advised_consumers_catch_up_before_the_data_loss_and_one_fewer_would_not(
    kafka: KafkaTestHelper, pg_server: PgServer, spark: SparkSession
) -> None:
    with scale_out_cluster(kafka, pg_server, spark) as s:
        # 1. One consumer each, losing ground: the evaluation advises three (the fixture's arithmetic).
        s.sample()
        s.scenario.evaluate()
        advice = {role: _group(s, role) for role in ROLES}
        log.info("the advice: %s", advice)
        for g in advice.values():
            assert g.members == 1 and g.partitions == PARTITIONS and g.catching_up is False, g
            assert g.consume_rate is not None and g.consume_rate <= PER_CONSUMER * 1.1 < PRODUCE, g
            assert g.time_until_data_loss_seconds is not None and g.time_until_data_loss_seconds > 60, g
            assert (g.consumers_needed, g.advice_limited_by) == (3, None), g
        needed = advice["advised"].consumers_needed
        assert needed is not None
        deadline = {
            role: g.evaluated_at.timestamp() + (g.time_until_data_loss_seconds or 0)
            for role, g in advice.items()
        }

        # 2. The advised count for one group, one fewer for its twin.
        s.members["advised"].scale_to(needed)
        s.members["one_fewer"].scale_to(needed - 1)
        watch = CatchUpWatch(s, "advised", "one_fewer")
        try:
            s.wait_for_members("one_fewer", needed - 1)
            s.wait_for_members("advised", needed)

            # 3. The forecast of one fewer, from samples of its new consumers only.
            changed = time.monotonic()
            s.sample()
            s.scenario.evaluate(JobSettings(window=timedelta(seconds=time.monotonic() - changed + 1)))
            fewer = _group(s, "one_fewer")
            log.info("one fewer: %s", fewer)
            assert fewer.members == needed - 1 and fewer.consume_rate is not None, fewer
            assert fewer.consume_rate > PER_CONSUMER * 1.5, fewer  # both read: the window is theirs
            late = (
                fewer.time_to_catch_up_seconds is not None
                and fewer.time_until_data_loss_seconds is not None
                and fewer.time_to_catch_up_seconds > fewer.time_until_data_loss_seconds
            )
            assert fewer.catching_up is False or late, fewer

            # 4. The advised group reads its backlog before the data loss the advice was made for.
            kafka.wait_for(
                lambda: watch.at is not None, max(deadline["advised"] - time.time(), 1) + 30, "the catch-up"
            )
        finally:
            watch.stop()
        log.info("caught up at %s, deadline %s, the twin's lag then %s", watch.at, deadline, watch.other_lag)
        assert watch.at is not None and watch.at < deadline["advised"], (watch.at, deadline, advice)
        # Its twin, one consumer short, is still far behind at that moment.
        assert watch.other_lag is not None and watch.other_lag > 10 * CAUGHT_UP_RECORDS, watch.other_lag
        assert s.members["advised"].stats.lost == 0, s.members["advised"].stats
