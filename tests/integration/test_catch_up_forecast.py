"""The catch-up forecast on the real cluster: a group made to lag at controlled rates catches up
when the evaluation said it would (within 25 %), and one that reads slower than its producer
writes is "not catching up"; both as the read layer (the API's group resource) and the lag
notifications' summaries say it. The consumer advice beside it: the gaining group's one consumer
is enough; the slow one's single partition needs more than one consumer reads, so even one
consumer per partition cannot catch up (it needs more partitions)."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from sqlalchemy import Engine

from monitor.devtools.workload.plan import Behaviour, GroupPlan, Plan, TopicPlan
from monitor.devtools.workload.runner import Workload
from monitor.expose.read import lag as read_lag
from tests.fixtures.kafka import KafkaTestHelper
from tests.integration.test_collectors import rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

PRODUCE, CONSUME = 10, 40  # records/s: the lagging group gains 30/s on its backlog
BACKLOG_SECONDS = 600  # of backdated history at PRODUCE/s: 6,000 records, about 200 s to read


def lag_now(kafka: KafkaTestHelper, group: str, topic: str) -> int:
    """The group's lag on partition 0 as the cluster says it now."""
    probe = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"{group}-probe"})
    try:
        _, end = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        probe.close()
    return int(end) - (kafka.committed(group, topic) or 0)


def test_a_lagging_group_catches_up_when_forecast_and_a_slow_one_is_not_catching_up(
    kafka: KafkaTestHelper, scenario: Any, engine: Engine
) -> None:
    prefix = f"cu{uuid.uuid4().hex[:6]}-"
    gaining, losing = f"{prefix}gaining", f"{prefix}losing"
    readers = {gaining: f"{prefix}gaining-reader", losing: f"{prefix}losing-reader"}
    plan = Plan(
        topics=(
            TopicPlan(gaining, 1, rate=PRODUCE, history_seconds=BACKLOG_SECONDS),
            # Backdated too, so that its append lag is minutes and ConsumerAppendLag tells of it.
            TopicPlan(losing, 1, rate=2 * PRODUCE, history_seconds=BACKLOG_SECONDS),
        ),
        groups=(
            GroupPlan(readers[gaining], gaining, Behaviour.HEALTHY, rate=CONSUME, from_beginning=True),
            GroupPlan(readers[losing], losing, Behaviour.SLOW, rate=PRODUCE, from_beginning=True),
        ),
        steps=(),
        web_url="http://kafka-health.test",
        cluster="catch-up",
    )
    cluster = f"catch-up-{prefix.rstrip('-')}"
    with Workload(plan, kafka.bootstrap_servers, lambda _: None):
        kafka.wait_for(
            lambda: all(kafka.committed(g, t) for t, g in readers.items()), 60, "the groups' first commits"
        )
        s = scenario(cluster, list(readers))
        started = time.monotonic()
        while time.monotonic() - started < 30:  # rates over half a minute of samples
            s.collect(log_dirs=True)
            time.sleep(2)
        (sample,) = rows(
            engine,
            "SELECT sampled_at FROM latest_group_offsets WHERE cluster = :c AND group_id = :g",
            c=cluster,
            g=readers[gaining],
        )
        sampled_at: datetime = sample["sampled_at"]
        # The evaluation may take longer than the catch-up on a busy machine: the moment the group
        # catches up (no more than a commit interval's worth of records left) is watched apart.
        caught_up: list[float] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.5) and not caught_up:
                if lag_now(kafka, readers[gaining], gaining) <= 2 * PRODUCE:
                    caught_up.append(time.time())

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            s.evaluate()
            kafka.wait_for(lambda: caught_up, 600, "the group to catch up")
        finally:
            stop.set()
            watcher.join(30)
        observed = caught_up[0] - sampled_at.timestamp()

    with engine.connect() as conn:
        found = read_lag.group(conn, cluster, readers[gaining])
        slow = read_lag.group(conn, cluster, readers[losing])
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
    # The advice: one consumer reading 40/s of 10/s arriving is enough; one partition written at
    # 20/s and read at 10/s by its one consumer cannot be helped by more consumers of the group.
    assert (g.consumers_needed, g.advice_limited_by) == (1, None), g
    assert slow.group.members == 1 and slow.group.partitions == 1, slow.group
    assert (slow.group.consumers_needed, slow.group.advice_limited_by) == (1, "partitions"), slow.group

    # The lag notifications say the same (ConsumerAppendLag's summary: the backlog is minutes old).
    def summaries(group: str) -> set[str]:
        return {
            f["summary"]
            for f in s.findings()
            if f["rule"] == "ConsumerAppendLag" and group in f["entity_key"]
        }

    told = summaries(readers[gaining])
    found_rules = [(f["rule"], f["entity_key"], f["state"]) for f in s.findings()]
    assert any("catches up in ~" in text and "at the current rate" in text for text in told), (
        told,
        found_rules,
    )
    told = summaries(readers[losing])
    assert any("not catching up: reads " in text and "/s arrive" in text for text in told), told
    assert any(
        "even 1 consumer (one per partition; now 1) cannot read the backlog" in text for text in told
    ), told
    partitions = rows(
        engine,
        "SELECT catching_up, catch_up_low_seconds FROM derived_group_partition WHERE cluster = :c"
        " AND group_id = :g",
        c=cluster,
        g=readers[losing],
    )
    assert [r["catching_up"] for r in partitions] == [False] and partitions[0]["catch_up_low_seconds"] is None
