"""Alerts on the real 3-node cluster as the daemon makes them: collection, the Spark evaluation
with the default rule pack, and the alert cycle with the shipped routing
(`alert_rules/routing.yaml`: its notifications are the rows of `notification_outbox`).

- Healthy controls next to a fault: a group that keeps up on a topic whose retention.bytes keeps
  about a minute of data, and one that keeps up on a topic whose retention.ms is 3 minutes, are
  never told about (no finding, no alert, no notification of any tier, but for the commit-beyond-
  end race that its rule's `for` absorbs while pending), although the oldest
  message they have not read yet is deleted within minutes; the group that stopped on the
  short-retention topic next to them pages (TimeUntilDataLoss, critical).
- A broker stop neither resolves nor resets unrelated alerts: the broker coordinating a group
  with a firing and a pending alert is killed, so the offsets runs that follow cannot read its
  committed offsets (NotCoordinator, or no answer, until Kafka moves the coordinator); the
  alerts keep their ids, `pending_since` and `starts_at` through the gap and after it.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, text

from monitor.devtools.workload.plan import Behaviour, GroupPlan, Plan, TopicPlan
from monitor.devtools.workload.runner import Workload
from tests.fixtures.alerting import alert_cycle, findings_ever, group_alerts, notifications
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.populated import MINUTE, now_ms
from tests.fixtures.sql import rows

if TYPE_CHECKING:
    pass

pytestmark = pytest.mark.spark

MIB = 1024 * 1024


# -- healthy controls next to a fault -------------------------------------------------------------


def test_groups_that_keep_up_are_never_told_about_next_to_one_that_stopped(
    kafka: KafkaTestHelper, scenario: Any, engine: Engine
) -> None:
    prefix = f"ctl{uuid.uuid4().hex[:6]}-"
    capped, short = f"{prefix}capped", f"{prefix}short"
    controls = {f"{prefix}capped-reader": capped, f"{prefix}short-reader": short}
    stopped = f"{prefix}short-stopped"
    plan = Plan(
        topics=(
            # 20 msg/s of 1.6 kB: 2 MiB of retention.bytes hold about a minute.
            TopicPlan(capped, 1, rate=20, payload_bytes=1600,
                      configs={"retention.bytes": str(2 * MIB), "segment.bytes": str(MIB),
                               "retention.ms": str(3_600_000)}),
            TopicPlan(short, 1, rate=10, configs={"retention.ms": str(3 * MINUTE), "segment.ms": "15000"}),
        ),
        groups=(
            *(GroupPlan(group, topic, Behaviour.HEALTHY) for group, topic in controls.items()),
            GroupPlan(stopped, short, Behaviour.STOPPED, act_after_seconds=3),
        ),
        steps=(),
        web_url="http://kafka-health.test",
        cluster="controls",
    )  # fmt: skip
    cluster = f"controls-{prefix.rstrip('-')}"
    with Workload(plan, kafka.bootstrap_servers, lambda _: None) as workload:
        kafka.wait_for(lambda: workload.group_stats[stopped].closed > 0, 60, "the stopped group to close")
        kafka.wait_for(
            lambda: all(kafka.committed(g, t) for g, t in controls.items()), 60, "the controls' first commits"
        )
        s = scenario(cluster, [capped, short])
        # About half a minute of samples, every job, as the daemon's intervals would take them:
        # long enough for the consume rates of groups that commit every second.
        started = time.monotonic()
        while time.monotonic() - started < 30:
            s.collect(log_dirs=True)
            time.sleep(3)

        def cycle() -> None:
            s.collect(log_dirs=True)
            s.evaluate()
            alert_cycle(engine)

        def told() -> bool:
            cycle()
            pages = [
                n
                for n in notifications(engine)
                if stopped in n["payload"] and n["receiver"] == "oncall-pager"
            ]
            return bool(pages)

        kafka.wait_for(told, 300, "the stopped group's page (group_wait 10 s)")  # a few cycles

        # The controls read within a second of each write, so an evaluation can find one with
        # nothing left to read (no deletion ahead): cycles go on until each was seen behind.
        def controls_seen_behind() -> bool:
            measured = _deletion_ahead(engine, cluster)
            if all(measured.get(group) and measured[group].until is not None for group in controls):
                return True
            cycle()
            return False

        kafka.wait_for(controls_seen_behind, 120, "an evaluation of each control with unread messages")

    # The fault: a stopped group on the short-retention topic pages.
    assert s.rules_for(stopped).get("TimeUntilDataLoss") == "critical", s.findings()
    # The controls: nothing, of any tier, in findings, alerts or notifications. One race is the
    # rule's to absorb: before the commit stream is live, OffsetFetch runs beside the listing of
    # end offsets, and a commit it answers a moment after its partition's end was listed is
    # above that end (on a loaded machine, for a group reading within a second of each write),
    # so ConsumerCommittedBeyondEnd may be pending, which its `for: 2m` lets pass
    # (alert_rules/lag.yaml). It must never fire.
    race = "ConsumerCommittedBeyondEnd"
    for group in controls:
        found = findings_ever(engine, cluster, group)
        assert [f for f in found if f["rule"] != race or f["state"] == "firing"] == [], (group, found)
        alerts = group_alerts(engine, cluster, group)
        assert [a for a in alerts if a["rule"] != race or a["starts_at"] is not None] == [], (group, alerts)
        assert not [n for n in notifications(engine) if group in n["payload"] or group in n["group_key"]], (
            group
        )
    # ... although the oldest message they had not read was always minutes from its deletion
    # (the size limit on the capped topic, the time limit on the other): the margin, not the
    # deletion time, is the risk.
    seen = _deletion_ahead(engine, cluster)
    for group, limit, deleted_within in ((f"{prefix}capped-reader", "size", 120), (f"{prefix}short-reader", "time", 180)):  # fmt: skip
        row = seen[group]
        assert row.evaluations >= 2 and row.margins == 0, dict(row._mapping)
        assert row.until is not None and row.until <= deleted_within and row.limit_ == limit, dict(
            row._mapping
        )


def _deletion_ahead(engine: Engine, cluster: str) -> dict[str, Any]:
    """Per group of `cluster`, over its evaluations: the longest time until data loss and its
    limit, how many margins were given, and how many evaluations there were."""
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT group_id, max(time_until_data_loss_seconds) AS until, max(data_loss_limit) AS limit_,"
                 " count(data_loss_margin_seconds) AS margins, count(*) AS evaluations"
                 " FROM derived_group_partition WHERE cluster = :c GROUP BY group_id"),
            {"c": cluster},
        )  # fmt: skip
        return {r.group_id: r for r in rows}


# -- a broker stop: a gap in the data, not a condition turned false ---------------------------------


def _coordinator(kafka: KafkaTestHelper, group: str) -> int:
    (future,) = kafka.admin.describe_consumer_groups([group]).values()
    return int(future.result(timeout=30).coordinator.id)


def _sampled(engine: Engine, cluster: str, group: str, after: datetime) -> list[bool]:
    """Per evaluation after `after`, oldest first: whether it sampled the group's partitions."""
    found = rows(
        engine,
        "SELECT evaluated_at, bool_and(coalesce(sampled, false)) AS sampled FROM derived_group_partition"
        " WHERE cluster = :c AND group_id = :g AND evaluated_at > :t GROUP BY evaluated_at ORDER BY evaluated_at",
        c=cluster, g=group, t=after,
    )  # fmt: skip
    return [bool(r["sampled"]) for r in found]


def _runs(engine: Engine, cluster: str, after: datetime) -> list[tuple[str, str | None]]:
    """(status, error) of the cluster's offsets runs started after `after`, oldest first."""
    found = rows(
        engine,
        "SELECT status, error FROM collection_runs WHERE cluster = :c AND job = 'offsets' AND started_at >= :t"
        " ORDER BY started_at",
        c=cluster, t=after,
    )  # fmt: skip
    return [(str(r["status"]), r["error"]) for r in found]


def test_a_broker_stop_neither_resolves_nor_resets_the_alerts_of_a_group(
    kafka: KafkaTestHelper, scenario: Any, engine: Engine
) -> None:
    kafka.elect_preferred_leaders("__consumer_offsets")  # coordinators spread over the brokers
    retention_ms = 7 * 3600_000
    topic = kafka.create_topic(partitions=1, replication_factor=3, config={"retention.ms": str(retention_ms)})
    old = now_ms() - retention_ms + 25 * MINUTE  # deleted in about 25 minutes, 6 h 35 min old
    kafka.produce(topic, [b"g"] * 20, timestamps_ms=[old + i for i in range(20)])
    group = f"gap-{topic}"
    kafka.consume_and_commit(group, topic, 2)
    cluster = f"gap-{topic}"
    # OffsetFetch only: with the commit stream live, the group's committed offsets keep coming from
    # __consumer_offsets through a coordinator's death and there may be no gap to test.
    s = scenario(cluster, [topic], commit_stream=False)
    s.collect()
    time.sleep(1)
    s.collect()  # two samples: it made no progress between them
    s.evaluate()
    alert_cycle(engine)
    before = {a["rule"]: a for a in group_alerts(engine, cluster, group)}
    # TimeUntilDataLoss has no `for`: firing; ConsumerLagSeconds waits 5 minutes: pending.
    assert (before["TimeUntilDataLoss"]["state"], before["TimeUntilDataLoss"]["severity"]) == (
        "firing",
        "critical",
    )
    assert before["ConsumerLagSeconds"]["state"] == "pending", before

    victim = _coordinator(kafka, group)
    killed_at = datetime.now(UTC)
    kafka.kill_broker(victim)  # no controlled shutdown: the coordinator is gone until Kafka notices

    def through_the_gap() -> bool:
        s.collect()
        s.evaluate()
        alert_cycle(engine)
        now = {a["rule"]: a for a in group_alerts(engine, cluster, group)}
        assert now == before, "an alert of the group was resolved, re-opened or its timer reset"
        sampled = _sampled(engine, cluster, group, killed_at)
        runs = _runs(engine, cluster, killed_at)
        # A gap: an evaluation that did not sample the group (a partial run), or an offsets run
        # that failed as a whole (every coordinator request timing out while Kafka notices the
        # kill); then its end: the newest run complete and the group sampled again.
        gap = False in sampled or any(status != "ok" for status, _ in runs)
        return gap and bool(sampled) and sampled[-1] and runs[-1][0] == "ok"

    try:
        kafka.wait_for(
            through_the_gap, 180, f"a gap in the group's offsets (coordinator {victim} killed) and its end"
        )
    except AssertionError as exc:
        seen = _sampled(engine, cluster, group, killed_at)
        runs = _runs(engine, cluster, killed_at)
        raise AssertionError(f"{exc}; sampled per evaluation: {seen}; offsets runs: {runs}") from None
    assert any(status != "ok" for status, _ in _runs(engine, cluster, killed_at)), (
        "the offsets run after the kill was complete: there was no gap to show"
    )
    assert {a["state"] for a in group_alerts(engine, cluster, group)} == {"firing", "pending"}
