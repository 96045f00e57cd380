"""Entities the cluster no longer has, on the real cluster with the Spark evaluation and the
alert cycle: a consumer group deleted with the admin API while its lag alerts are open resolves
them with the reason `gone`, its page says it is gone; a group committed beyond the log end is
shown as such (not caught up) and its warning rule matches; a deleted topic's alerts resolve as
gone."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from monitor.core.vocabulary import COMMITTED_BEYOND_END, RESOLVED_GONE
from monitor.expose.web.app import create_app
from tests.fixtures.alerting import alert_cycle
from tests.fixtures.kafka import KafkaTestHelper

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]  # the real `for:` waits, evaluation by evaluation


def _rows(engine: Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(text(sql), params)]


def _page(engine: Engine, path: str) -> str:
    """The web page at `path`, as the daemon's web app serves it over this database."""
    with TestClient(create_app(engine, stale_after=timedelta(minutes=5))) as client:
        answer = client.get(path)
    assert answer.status_code == 200, (path, answer.status_code)
    return unescape(answer.text)


def _group_state(engine: Engine, cluster: str, group: str, table: str) -> list[tuple[str, str, Any]]:
    """(rule, state, resolved_reason) of the group's findings or alerts, resolved ones too."""
    rows = _rows(
        engine,
        f"SELECT rule, state, resolved_reason FROM {table} WHERE cluster = :c AND labels->>'group_id' = :g"
        " ORDER BY id",
        c=cluster,
        g=group,
    )
    return [(r["rule"], r["state"], r["resolved_reason"]) for r in rows]


def test_a_deleted_group_resolves_as_gone_and_one_beyond_the_end_is_not_caught_up(
    kafka: KafkaTestHelper, scenario: Any, engine: Engine
) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic = kafka.create_topic(f"gone-{suffix}")
    # Appended 40 minutes ago but the newest: a group at offset 2 is 40 minutes behind (append lag).
    old = int(time.time() * 1000) - 40 * 60_000
    kafka.produce(topic, [f"m{i}" for i in range(20)], timestamps_ms=[old] * 19 + [old + 40 * 60_000])
    lagging, beyond = f"gone-lagging-{suffix}", f"gone-beyond-{suffix}"
    kafka.commit(lagging, topic, 0, 2)
    kafka.commit(beyond, topic, 0, 1000)  # far above the end (20): an offset restore gone wrong
    cluster = f"gone-{suffix}"
    s = scenario(cluster, [topic])

    def open_for(group: str) -> set[str]:
        s.collect()
        s.evaluate()
        alert_cycle(engine)
        return {
            rule for rule, state, _ in _group_state(engine, cluster, group, "alerts") if state != "resolved"
        }

    kafka.wait_for(lambda: "ConsumerAppendLag" in open_for(lagging), 300, "the lagging group's lag alert")
    # Beyond the end: lag 0, but flagged, and the warning rule matches (pending for its `for`).
    row = _rows(
        engine,
        "SELECT offset_lag, committed_beyond_end FROM derived_group_partition"
        " WHERE cluster = :c AND group_id = :g ORDER BY evaluated_at DESC LIMIT 1",
        c=cluster,
        g=beyond,
    )[0]
    assert (row["offset_lag"], row["committed_beyond_end"]) == (0, True)
    assert s.rules_for(beyond).get("ConsumerCommittedBeyondEnd") == "warning", s.findings()
    assert not [f for f in s.findings() if lagging in f["entity_key"] and "BeyondEnd" in f["rule"]]
    page = _page(engine, f"/clusters/{cluster}/groups/{beyond}")
    assert COMMITTED_BEYOND_END in page and 'data-role="gone"' not in page
    # ... and so do the group lists: the cluster page's, the groups page's and the API's.
    for path in (f"/clusters/{cluster}", f"/clusters/{cluster}/groups"):
        listed = _page(engine, path)
        row = next(r for r in listed.split("<tr") if f"/groups/{beyond}" in r)
        assert 'data-role="beyond-end"' in row and COMMITTED_BEYOND_END in row, (path, row)
        assert not [r for r in listed.split("<tr") if f"/groups/{lagging}" in r and "beyond-end" in r]
    with TestClient(create_app(engine, stale_after=timedelta(minutes=5))) as client:
        items = client.get(f"/api/v1/clusters/{cluster}/groups").json()["items"]
    assert {g["group_id"]: g["partitions_beyond_end"] for g in items} == {beyond: 1, lagging: 0}

    # The lagging group is deleted with the admin API while its alert is open.
    futures = kafka.admin.delete_consumer_groups([lagging], request_timeout=30)
    futures[lagging].result(timeout=30)
    kafka.wait_for(lambda: not open_for(lagging), 60, "the deleted group's alerts to resolve")
    alerts = _group_state(engine, cluster, lagging, "alerts")
    assert alerts and all(state == "resolved" and reason == RESOLVED_GONE for _, state, reason in alerts), (
        alerts
    )
    findings = _group_state(engine, cluster, lagging, "findings")
    assert all(reason == RESOLVED_GONE for _, _, reason in findings), findings
    # ... and it stays so: the next evaluations match nothing on it and open nothing again.
    assert not open_for(lagging)
    assert _group_state(engine, cluster, lagging, "findings") == findings
    gone = _rows(
        engine,
        "SELECT bool_and(gone_at IS NOT NULL) AS gone FROM latest_group_offsets WHERE cluster = :c AND group_id = :g",
        c=cluster,
        g=lagging,
    )
    assert gone == [{"gone": True}]
    page = _page(engine, f"/clusters/{cluster}/groups/{lagging}")
    assert 'data-role="gone"' in page and "Gone: the cluster no longer has this consumer group" in page
    listed = _page(engine, "/alerts")
    assert 'data-section="gone"' in listed and f"{cluster}/{lagging}" in listed
    # The group that is still there keeps its finding.
    assert "ConsumerCommittedBeyondEnd" in s.rules_for(beyond)

    # The topic deleted: the findings on it resolve as gone too.
    kafka.admin.delete_topics([topic], request_timeout=30)[topic].result(timeout=30)
    kafka.wait_for(lambda: not open_for(beyond), 90, "the deleted topic's findings to resolve")
    assert all(reason == RESOLVED_GONE for _, _, reason in _group_state(engine, cluster, beyond, "findings"))
    deleted = _rows(
        engine, "SELECT deleted_at FROM topics WHERE cluster = :c AND topic = :t", c=cluster, t=topic
    )
    assert deleted and deleted[0]["deleted_at"] is not None
    assert "Gone: this topic was deleted" in _page(engine, f"/clusters/{cluster}/topics/{topic}")


def _notices(engine: Engine, cluster: str, rule: str, kind: str) -> list[dict[str, Any]]:
    """The notification rows of `kind` about `rule` on `cluster`, to the pager."""
    return _rows(
        engine,
        "SELECT receiver, kind, payload::text AS payload FROM notification_outbox"
        " WHERE kind = :k AND receiver = 'oncall-pager' AND payload::text LIKE :rule AND payload::text LIKE :cluster",
        k=kind,
        rule=f"%{rule}%",
        cluster=f"%{cluster}%",
    )


def test_an_unregistered_broker_is_gone_where_a_stopped_one_pages(
    kafka: KafkaTestHelper, scenario: Any, engine: Engine, quick_rules: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic = kafka.create_topic(f"gone-broker-{suffix}", partitions=3, replication_factor=3)
    cluster = f"gone-broker-{suffix}"
    # BrokerDown waits 10 s, not its minute: the pending -> firing step is the same.
    s = scenario(cluster, [topic], rules=quick_rules)
    s.collect()

    def broker_alert(evaluate: bool = True) -> dict[str, Any] | None:
        """The newest BrokerDown alert on broker 3 after an alert cycle (and, first, a collection
        and an evaluation when `evaluate`: the notices need only the alert cycle)."""
        if evaluate:
            s.collect()
            s.evaluate()
        alert_cycle(engine)
        rows = _rows(
            engine,
            "SELECT state, resolved_reason FROM alerts WHERE cluster = :c AND rule = 'BrokerDown'"
            " AND labels->>'broker_id' = '3' ORDER BY id DESC LIMIT 1",
            c=cluster,
        )
        return rows[0] if rows else None

    def broker_row() -> dict[str, Any]:
        return _rows(
            engine,
            "SELECT up, unregistered_at FROM brokers WHERE cluster = :c AND broker_id = 3",
            c=cluster,
        )[0]

    kafka.stop_broker(3)
    try:
        # Stopped, still registered with the controller: down, and it pages.
        kafka.wait_for(lambda: (broker_alert() or {}).get("state") == "firing", 900, "BrokerDown to fire")
        assert broker_row() == {"up": False, "unregistered_at": None}
        kafka.wait_for(
            lambda: broker_alert(evaluate=False) and _notices(engine, cluster, "BrokerDown", "firing"),
            60,
            "the page",
        )
        # Decommissioned: unregistered, it is gone; BrokerDown resolves as gone, told as resolved.
        kafka.unregister_broker(3)
        # The alert as the evaluation that resolved it left it (the check below evaluates again).
        resolved_alert = kafka.wait_for(
            lambda: (found := broker_alert()) is not None and found["state"] == "resolved" and found,
            60,
            "BrokerDown to resolve as gone",
        )
        assert resolved_alert == {"state": "resolved", "resolved_reason": RESOLVED_GONE}
        assert broker_row()["unregistered_at"] is not None
        assert "unregistered" in _page(engine, f"/clusters/{cluster}")
        resolved = kafka.wait_for(
            lambda: broker_alert(evaluate=False) and _notices(engine, cluster, "BrokerDown", "resolved"),
            60,
            "the resolve",
        )
        assert '"resolved_reason": "gone"' in resolved[0]["payload"], resolved
        # No page for ever: a later evaluation and cycle open nothing on it again.
        assert (broker_alert() or {}).get("state") == "resolved"
    finally:
        kafka.start_broker(3)
    # Started again, it registers again: up, not gone.
    kafka.wait_for(
        lambda: (s.collect(), broker_row())[1] == {"up": True, "unregistered_at": None}, 90, "back"
    )
