"""Moving leadership off an overloaded broker, on the real 3-node cluster, through the alerts
page's forms and `kafka-health repair`: broker 1 leads 8 of a topic's 12 partitions (its fair
share is 4) and the evaluation opens LeaderImbalance on it. Asked while a broker is down, the
repair is refused (form and command line); asked again once the cluster is whole, it waits with
its reviewable diff (which partitions move from which broker to which, leader counts before and
after), shown on the cluster page beside the brokers' leader counts; an anonymous post, the
requester and someone outside the reviewer teams cannot approve it; another reviewer does, and
the admin client sees the leadership moved: 4 partitions per broker."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import NewTopic
from fastapi.testclient import TestClient
from httpx import Response
from rich.console import Console
from sqlalchemy import Engine, text
from typer.testing import CliRunner, Result

from monitor.act import repair_plan
from monitor.act import repair_request as store
from monitor.act.policy import load_policy
from monitor.act.repairs import RepairService
from monitor.cli import repair as cli_repair
from monitor.cli import retention as cli_retention
from monitor.cli.main import app as cli_app
from monitor.core.clock import SystemClock
from monitor.core.settings import IdentityConfig, NameFilter
from monitor.expose.web.app import create_app
from monitor.expose.web.identity import CSRF_FIELD
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.people import PROXY
from tests.fixtures.retention import POLICY

# Broker 1 first in 8 partitions, brokers 2 and 3 in 2 each: created led by their first replica.
ASSIGNMENT = [[1, 2, 3] if i % 2 == 0 else [1, 3, 2] for i in range(8)] + [[2, 3, 1]] * 2 + [[3, 1, 2]] * 2


def _leaders(kafka: KafkaTestHelper, topic: str) -> dict[int, int]:
    partitions = kafka.admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
    return dict(Counter(int(p.leader) for p in partitions))


def _overloaded_topic(kafka: KafkaTestHelper) -> str:
    topic = f"overloaded-{uuid.uuid4().hex[:8]}"
    new = NewTopic(topic, num_partitions=len(ASSIGNMENT), replica_assignment=ASSIGNMENT)
    kafka.admin.create_topics([new])[topic].result(timeout=60)
    kafka.wait_for(lambda: _leaders(kafka, topic) == {1: 8, 2: 2, 3: 2}, 60, "broker 1 leading 8 of 12")
    return topic


def _imbalance(engine: Engine, cluster: str, broker: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT id, entity_key, severity FROM findings WHERE cluster = :c AND rule = 'LeaderImbalance'"
                 " AND labels->>'broker_id' = :b AND state <> 'resolved'"),
            {"c": cluster, "b": str(broker)},
        ).first()  # fmt: skip


class Web:
    """The web application behind a trusted proxy: `as_user` signs a person in (or nobody)."""

    def __init__(self, engine: Engine, repairs: RepairService) -> None:
        self.app = create_app(engine, stale_after=timedelta(minutes=5), repairs=repairs,
                              identity=IdentityConfig(trusted_proxies=[PROXY[0]]))  # fmt: skip

    def as_user(self, user: str | None) -> TestClient:
        headers = {"X-Forwarded-User": user, "X-Forwarded-Groups": "kafka-platform"} if user else {}
        return TestClient(self.app, client=PROXY, headers=headers)

    @staticmethod
    def post_form(client: TestClient, path: str, fields: dict[str, str]) -> Response:
        """Post a form of the alerts page with the signed-in person's CSRF token in its field (the
        page's forms carry the same token), following the redirect back to the page."""
        token = client.get("/api/v1/csrf-token").json()["token"]
        return client.post(path, data={**fields, CSRF_FIELD: token})


@pytest.fixture
def overloaded(
    kafka: KafkaTestHelper, engine: Engine, tmp_path: Path
) -> Iterator[tuple[RepairService, str, str]]:
    """(the repair service, the monitored cluster's name, its one topic: broker 1 leads 8 of 12)."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    topic = _overloaded_topic(kafka)
    name = f"moves-{uuid.uuid4().hex[:8]}"
    config = kafka.cluster_config(name, request_timeout_seconds=10, topics=NameFilter(allow=[topic]))
    repairs = RepairService(
        [config], lambda: engine, SystemClock(), lambda: load_policy(tmp_path / "policy.yaml")
    )
    try:
        yield repairs, name, topic
    finally:
        repairs.stop()


@pytest.fixture
def cli(
    tmp_path: Path, db_url: str, kafka: KafkaTestHelper, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Any]:
    """`cli(name, topic)(*args)`: `kafka-health` with a configuration naming the cluster `name`
    watching `topic`, and the policy of the `overloaded` fixture (its reviewers: kafka-platform)."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    wide = Console(width=250, soft_wrap=True, no_color=True)
    monkeypatch.setattr(cli_repair, "out", wide)
    monkeypatch.setattr(cli_retention, "err", wide)

    def for_cluster(name: str, topic: str) -> Callable[..., Result]:
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump({
            "clusters": [{"name": name, "bootstrap_servers": kafka.bootstrap_servers.split(","),
                          "request_timeout_seconds": 10, "topics": {"allow": [topic]}}],
            "retention": {"policy_file": str(tmp_path / "policy.yaml")},
        }))  # fmt: skip

        def invoke(*args: str) -> Result:
            return CliRunner().invoke(cli_app, [*args, "--config", str(config)])

        return invoke

    return for_cluster


def test_moving_leadership_off_an_overloaded_broker_through_the_forms_and_the_cli(
    kafka: KafkaTestHelper,
    engine: Engine,
    scenario: Any,
    overloaded: tuple[RepairService, str, str],
    cli: Callable[..., Any],
) -> None:
    repairs, name, topic = overloaded
    run = scenario(name, [topic])
    run.collect()
    run.evaluate()
    finding = _imbalance(engine, name, 1)
    assert finding is not None, run.findings()
    web = Web(engine, repairs)
    carol, bob = web.as_user("carol"), web.as_user("bob")
    kafka_health = cli(name, topic)
    ask = {"rule": "LeaderImbalance", "entity_key": finding.entity_key, "kind": "move_leadership",
           "reason": "broker 1 leads twice its share"}  # fmt: skip

    # 1. Broker 3 down: refused on the command line and through the form, recorded as refused.
    kafka.stop_broker(3)
    kafka.wait_for(
        lambda: repair_plan.refusals(repairs.snapshot(name)), 60, "broker 3 seen down", (Exception,)
    )
    refused = kafka_health("repair", "request", str(finding.id), "--kind", "move_leadership",
                           "-m", "even out", "--as", "carol", "--team", "kafka-platform")  # fmt: skip
    assert refused.exit_code == 1, refused.output
    assert "refused" in refused.output and "broker_down: broker 3" in refused.output
    page = Web.post_form(carol, "/alerts/repairs", ask)
    assert page.status_code == 200 and "Not done:" in page.text and "broker_down: broker 3" in page.text
    with engine.connect() as conn:
        assert [r.state for r in store.list_repairs(conn, cluster=name)] == ["refused", "refused"]

    # 2. The cluster whole again, with broker 1 leading its 8.
    kafka.start_broker(3)
    kafka.wait_for(lambda: not repair_plan.refusals(repairs.snapshot(name)), 180, "every replica in sync")

    def elected() -> bool:  # asked again until every preferred leader has taken its partitions,
        kafka.elect_preferred_leaders(topic)  # as the repairs' own client sees them too
        expected = {1: 8, 2: 2, 3: 2}
        return _leaders(kafka, topic) == expected and repairs.snapshot(name).leaders() == expected

    kafka.wait_for(elected, 60, "broker 1 leading 8 again", (Exception,))

    # 3. Nobody signed in cannot ask; carol asks through the form of the alerts page.
    anonymous = web.as_user(None).post("/alerts/repairs", data=ask)
    assert anonymous.status_code == 401

    def asked_once() -> Response | None:  # refused (and recorded so) while a guardrail still sees a gap
        page = Web.post_form(carol, "/alerts/repairs", ask)
        assert page.status_code == 200
        return page if "awaits a reviewer other than carol" in page.text else None

    kafka.wait_for(asked_once, 60, "the repair to be asked once the monitor sees the cluster whole")
    with engine.connect() as conn:
        (repair,) = store.list_repairs(conn, cluster=name, states=["awaiting_approval"])
    moves = {m["partition"]: (m["leader"], m["new_leader"]) for m in repair.plan["partitions"]}
    assert len(moves) == 4 and all(old == 1 and new in (2, 3) for old, new in moves.values()), moves
    assert repair.plan["leaders_before"] == {"1": 8, "2": 2, "3": 2}
    assert repair.plan["leaders_after"] == {"1": 4, "2": 4, "3": 4}

    # 4. The diff on the cluster page, where the brokers' leader counts show the imbalance.
    cluster_page = bob.get(f"/clusters/{name}").text
    shown = cluster_page[cluster_page.index('id="cluster-repairs"') :]
    assert f'data-repair="{repair.id}" data-state="awaiting_approval"' in shown
    for partition, (old, new) in moves.items():
        assert f"<code>{topic}:{partition}</code> {old} -&gt; {new}" in shown
    assert "broker 1: 8 -&gt; 4" in shown and "broker 2: 2 -&gt; 4" in shown
    assert "replicas " in shown, "a move shows the replica order it sets"

    # 5. The requester (form and command line) and someone in no reviewer team cannot approve.
    own = Web.post_form(carol, f"/alerts/repairs/{repair.id}/approve", {"comment": "mine"})
    assert f"carol asked for repair {repair.id} and cannot approve it" in own.text
    own_cli = kafka_health("repair", "approve", str(repair.id), "--as", "carol", "--team", "kafka-platform")
    assert own_cli.exit_code == 1 and f"carol asked for repair {repair.id}" in own_cli.output
    outsider = kafka_health("repair", "approve", str(repair.id), "--as", "dave")
    assert outsider.exit_code == 1 and "only members of kafka-platform may approve" in outsider.output
    assert _leaders(kafka, topic) == {1: 8, 2: 2, 3: 2}, "nothing changed"

    # 6. Bob approves on the command line: applied, and the admin client sees 4 leaders each.
    approved = kafka_health("repair", "approve", str(repair.id), "--as", "bob", "--team", "kafka-platform")
    assert approved.exit_code == 0, approved.output
    assert f"repair {repair.id}: applied move_leadership" in approved.output
    kafka.wait_for(lambda: _leaders(kafka, topic) == {1: 4, 2: 4, 3: 4}, 60, "4 leaders per broker")
    described = kafka.admin.list_topics(topic, timeout=30).topics[topic].partitions
    for partition, (_, new) in moves.items():
        assert described[partition].leader == new
        assert described[partition].replicas[0] == new, "the new leader is the preferred one"
        assert sorted(described[partition].replicas) == sorted(ASSIGNMENT[partition]), "no data moved"

    # 7. Recorded and audited, on the command line and the cluster page.
    shown_cli = kafka_health("repair", "show", str(repair.id))
    assert shown_cli.exit_code == 0, shown_cli.output
    with engine.connect() as conn:
        actions = [(a["actor"], a["action"]) for a in store.audit_of(conn, repair.id)]
    assert actions == [
        ("carol", "requested"), ("kafka-health", "awaiting_approval"),
        ("carol", "refused"), ("carol", "refused"), ("dave", "refused"),  # step 5, each refusal recorded
        ("bob", "approved"), ("kafka-health", "applied"),
    ]  # fmt: skip
    assert f'data-repair="{repair.id}" data-state="applied"' in bob.get(f"/clusters/{name}").text
