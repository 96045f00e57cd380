"""Share-group alerts end to end on a real Kafka 4.4.0 node with real Java share consumers: the
share-groups job collects, the evaluation runs on Spark over the stored samples, the alert cycle
routes and the sender delivers to a local PagerDuty server (critical) and a console file (the
rest). A producer keeps producing throughout. The group whose consumer is killed fires
ShareGroupNoMembers at its critical tier and pages, and its alert resolves as gone once the group
is deleted; the group that keeps up is never told about; a group whose member hangs on its first
records, never acknowledging them, is ShareGroupStalled.

The rules are the shipped `alert_rules/share.yaml` with the times scaled down so that the test
waits for conditions, not minutes: every `for:` 5 s, and the backlog tiers at 5 s (warning) and
30 s (critical) of production instead of 5 and 30 minutes. The conditions are the shipped ones.
"""

from __future__ import annotations

import gc
import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from kafka.admin import KafkaAdminClient
from pyspark.sql import SparkSession
from sqlalchemy import Engine

from monitor.alert.config import load_routing
from monitor.alert.cycle import run_cycle
from monitor.alert.notify.sender import Sender
from monitor.alert.render import Templates
from monitor.alert.stage import build_receivers
from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.resources import rules_dir
from monitor.core.vocabulary import RESOLVED_GONE
from monitor.evaluate.job import run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import load_rules
from monitor.evaluate.spark import jdbc_target
from monitor.expose.web.app import create_app
from monitor.store.evaluation import drop_clocks
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.receivers import ROUTING_KEY, FakePagerDuty
from tests.fixtures.share import ShareConsumers, collected, share_collector
from tests.fixtures.sql import rows

URL = "http://kafka-health.test"
SCALED = {
    "for: 2m": "for: 5s",
    "for: 5m": "for: 5s",
    "for: 10m": "for: 5s",
    ">= 1800": ">= 30",
    ">= 300": ">= 5",
    "stalled_seconds >= 120": "stalled_seconds >= 10",
}
"""The shipped share rules' times, scaled down (see the module docstring)."""


@pytest.fixture
def share_rules(tmp_path: Path) -> Path:
    text = (rules_dir() / "share.yaml").read_text()
    for shipped, scaled in SCALED.items():
        assert shipped in text, shipped
        text = text.replace(shipped, scaled)
    path = tmp_path / "share.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def routing(tmp_path: Path, fake_pagerduty: FakePagerDuty, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHARE_E2E_PD_KEY", ROUTING_KEY)
    routing = {
        "receivers": [
            {"name": "console", "console": {"path": str(tmp_path / "console.jsonl")}},
            {
                "name": "pager",
                "pagerduty": {"routing_key_env": "SHARE_E2E_PD_KEY", "url": fake_pagerduty.url, "timeout": 5},
            },
        ],
        "route": {
            "receiver": "console",
            "group_by": ["cluster", "rule", "group_id"],
            "group_wait": "0s",
            "routes": [{"matchers": ["severity=critical"], "receiver": "pager"}],
        },
    }
    path = tmp_path / "routing.yaml"
    path.write_text(yaml.safe_dump(routing))
    return path


class Producer:
    """Produces to one partition at about `rate` records/s in a thread until stopped."""

    def __init__(self, kafka: KafkaTestHelper, topic: str, rate: int = 10) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(kafka, topic, rate), daemon=True)

    def _run(self, kafka: KafkaTestHelper, topic: str, rate: int) -> None:
        while not self._stop.wait(0.5):
            kafka.produce(topic, [b"r"] * max(1, rate // 2))

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)


CLUSTER = "share-alerts"


class AlertLoop:
    """One collect, evaluate, alert and deliver round at a time, as the daemon's stages run them."""

    def __init__(
        self,
        collector: ClusterCollector,
        engine: Engine,
        spark: SparkSession,
        db_url: str,
        rules: Path,
        routing: Path,
        plans: Plans,
    ) -> None:
        ruleset = load_rules([rules])
        assert ruleset.ok, ruleset.errors
        self._rules = ruleset.rules
        self._routing = load_routing(routing)
        receivers = build_receivers(self._routing, Templates(URL))
        self._sender = Sender(lambda: engine, lambda: receivers, SystemClock(), "share-e2e")
        self._plans = plans
        self._collector, self._engine, self._spark, self._db_url = collector, engine, spark, db_url

    def cycle(self) -> None:
        self._collector.run("share_groups")
        now = datetime.now(UTC)
        run_evaluation(
            self._spark,
            jdbc_target(self._db_url),
            self._engine,
            self._rules,
            [CLUSTER],
            now,
            plans=self._plans,
        )
        with self._engine.begin() as conn:
            run_cycle(conn, self._routing, now, URL)
        self._sender.drain()

    def __enter__(self) -> AlertLoop:
        return self

    def __exit__(self, *_: object) -> None:
        self._sender.close()


@pytest.fixture(scope="module")
def plans(engine: Engine) -> Iterator[Plans]:
    """The plan of this module's evaluations, kept from one loop and test to the next as the
    daemon keeps it (built once: seconds of driver time and a full first run, not one per loop)."""
    kept = Plans()
    yield kept
    dropped = kept.clear()
    if dropped:
        with engine.begin() as conn:
            drop_clocks(conn, [plan.plan_id for plan in dropped])
    gc.collect()  # the plans' DataFrames hold the JVM's plans until collected


@pytest.fixture
def collector(share_kafka: KafkaTestHelper, engine: Engine) -> Iterator[ClusterCollector]:
    """This module's groups (`sga-`) under a cluster name of its own."""
    with share_collector(share_kafka, engine, CLUSTER, "sga-.*") as made:
        yield made


@pytest.fixture
def producing(share_kafka: KafkaTestHelper) -> Iterator[tuple[str, Producer]]:
    topic = share_kafka.create_topic(partitions=1)
    with Producer(share_kafka, topic) as producer:
        yield topic, producer


def test_a_stopped_share_group_pages_and_one_that_keeps_up_is_never_told(
    share_kafka: KafkaTestHelper,
    share_consumers: ShareConsumers,
    collector: ClusterCollector,
    engine: Engine,
    spark: SparkSession,
    db_url: str,
    fake_pagerduty: FakePagerDuty,
    share_rules: Path,
    routing: Path,
    producing: tuple[str, Producer],
    tmp_path: Path,
    plans: Plans,
) -> None:
    topic, _ = producing
    keeping, stopping = f"sga-keeps-{topic}", f"sga-stops-{topic}"
    for group in (keeping, stopping):
        share_consumers.from_earliest(group)
    collector.run("metadata")
    share_consumers.start(keeping, topic)
    stopped = share_consumers.start(stopping, topic)
    share_kafka.wait_for(
        lambda: all(collected(collector, engine, g).get(0, {}).get("lag") == 0 for g in (keeping, stopping)),
        90,
        "both groups to keep up with the producer",
    )

    with AlertLoop(collector, engine, spark, db_url, share_rules, routing, plans) as loop:
        share_consumers.stop(stopped)  # killed: it leaves when its session times out (10 s here)

        def paged() -> list[dict[str, Any]] | None:
            loop.cycle()
            events = [e for e in fake_pagerduty.events if e["event_action"] == "trigger"]
            return [e for e in events if "has no consumer" in e["payload"]["summary"]] or None

        (page,) = share_kafka.wait_for(paged, 240, "the stopped share group's page")

    assert stopping in page["payload"]["summary"] and page["payload"]["severity"] == "critical"
    # The page names the share partition, its start offset standing still (or not yet) and its lag.
    listed = rf"\[{re.escape(topic)}/0 (STALL since [^,]+|OK), lag [\d,]+ messages[];]"
    assert re.search(listed, page["payload"]["summary"]), page["payload"]["summary"]
    found = rows(
        engine,
        "SELECT rule, severity, state, labels->>'group_id' AS group_id FROM findings WHERE cluster = :c",
        c=CLUSTER,
    )
    assert {
        "rule": "ShareGroupNoMembers",
        "severity": "critical",
        "state": "firing",
        "group_id": stopping,
    } in (found)
    # The one that kept up: nothing in findings, alerts or any receiver, although it was
    # evaluated every cycle (its rows are there, sampled, with records arriving).
    assert [f for f in found if f["group_id"] == keeping] == []
    assert rows(engine, "SELECT 1 FROM alerts WHERE labels->>'group_id' = :g", g=keeping) == []
    told = [e["payload"]["summary"] for e in fake_pagerduty.events]
    console = tmp_path / "console.jsonl"
    if console.exists():
        told += [json.dumps(json.loads(line)) for line in console.read_text().splitlines() if line.strip()]
    assert [t for t in told if keeping in t] == []
    # Shown where consumer-group alerts are (the cluster's alerts and the alerts page), and on the
    # share group's own page; its row is red in the cluster's share groups, the other's green.
    app = create_app(engine, stale_after=timedelta(minutes=5))
    with TestClient(app) as client:
        for path in (f"/clusters/{CLUSTER}", "/alerts", f"/clusters/{CLUSTER}/share-groups/{stopping}"):
            shown = client.get(path)
            assert shown.status_code == 200 and "ShareGroupNoMembers" in shown.text, path
            assert stopping in shown.text, path
        assert keeping not in client.get("/alerts").text
        calm = client.get(f"/clusters/{CLUSTER}/share-groups/{keeping}").text
        assert "ShareGroupNoMembers" not in calm and 'data-role="alerts"' not in calm
        listed = client.get(f"/clusters/{CLUSTER}/share-groups").text
        coloured = re.findall(r'<tr class="row-(\w+)">\s*<td><a href="[^"]*/share-groups/([^"]+)"', listed)
        assert {group: colour for colour, group in coloured} == {stopping: "bad", keeping: "ok"}
    evaluated = rows(
        engine,
        "SELECT count(*) AS n, bool_and(sampled) AS sampled, max(produce_rate) AS rate, max(members) AS members "
        "FROM derived_share_group WHERE cluster = :c AND group_id = :g",
        c=CLUSTER,
        g=keeping,
    )[0]
    assert (
        evaluated["n"] >= 2 and evaluated["sampled"] and evaluated["rate"] > 0 and evaluated["members"] == 1
    )
    # Deleted from the cluster (it has no member left), the stopped group's alert resolves as gone
    # (the cluster no longer has it), not as fixed. Share groups go through DeleteGroups too.
    admin = KafkaAdminClient(bootstrap_servers=share_kafka.bootstrap_servers)
    try:
        admin.delete_groups([stopping])
    finally:
        admin.close()
    state = "SELECT state, resolved_reason FROM alerts WHERE cluster = :c AND labels->>'group_id' = :g"
    with AlertLoop(collector, engine, spark, db_url, share_rules, routing, plans) as loop:

        def resolved() -> list[dict[str, Any]] | None:
            loop.cycle()
            found = rows(engine, state, c=CLUSTER, g=stopping)
            return found if found and all(a["state"] == "resolved" for a in found) else None

        gone = share_kafka.wait_for(resolved, 120, "the deleted share group's alert to resolve")
    assert {a["resolved_reason"] for a in gone} == {RESOLVED_GONE}, gone


def test_a_share_group_whose_member_stops_acknowledging_is_stalled_and_says_which_partition(
    share_kafka: KafkaTestHelper,
    share_consumers: ShareConsumers,
    collector: ClusterCollector,
    engine: Engine,
    spark: SparkSession,
    db_url: str,
    fake_pagerduty: FakePagerDuty,
    share_rules: Path,
    routing: Path,
    producing: tuple[str, Producer],
    tmp_path: Path,
    plans: Plans,
) -> None:
    topic, _ = producing
    stuck = f"sga-stuck-{topic}"
    share_consumers.from_earliest(stuck)
    collector.run("metadata")
    share_consumers.start(stuck, topic, stuck=True)
    console = tmp_path / "console.jsonl"

    def told() -> set[tuple[str, str]] | None:
        """(receiver, listed share partition) of the ShareGroupStalled notices so far: to the
        console (warning) or the pager (critical, once the backlog passes its tier)."""
        loop.cycle()
        lines = console.read_text().splitlines() if console.exists() else []
        alerts = [a for line in lines if line.strip() for a in json.loads(line)["alerts"]]
        listed = {
            ("console", f"{p['topic']}/{p['partition']} {p['status']}")
            for a in alerts
            if a["rule"] == "ShareGroupStalled"
            for p in a["partitions"]
        }
        pages = [
            e["payload"]["summary"]
            for e in fake_pagerduty.events
            if "is stalled on" in e["payload"]["summary"]
        ]
        named = rf"\[({re.escape(topic)}/\d+ \w+)"
        listed |= {("pager", m) for page in pages for m in re.findall(named, page)}
        return listed or None

    with AlertLoop(collector, engine, spark, db_url, share_rules, routing, plans) as loop:
        listed = share_kafka.wait_for(told, 300, "the stuck share group's ShareGroupStalled notice")

    found = "SELECT rule, state FROM findings WHERE cluster = :c AND labels->>'group_id' = :g"
    findings = {(f["rule"], f["state"]) for f in rows(engine, found, c=CLUSTER, g=stuck)}
    assert ("ShareGroupStalled", "firing") in findings, findings
    assert "ShareGroupNoMembers" not in {rule for rule, _ in findings}, "a member all along"
    # The notice names the share partition whose start offset stands still.
    assert {item for _, item in listed} == {f"{topic}/0 STALL"}, listed
    evaluated = rows(
        engine,
        "SELECT members, stalled_seconds FROM derived_share_group WHERE cluster = :c AND group_id = :g"
        " ORDER BY evaluated_at DESC LIMIT 1",
        c=CLUSTER,
        g=stuck,
    )[0]
    assert evaluated["members"] == 1 and evaluated["stalled_seconds"] >= 10
