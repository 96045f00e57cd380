"""The pages and API lists keep their read models until their cluster changes (`read.cache`),
over bench/web.py's read model of 100 topics: a page shows the numbers of the newest evaluation
and new numbers after the next one (not before), a finding or a collection makes it read again,
what changes between evaluations (alerts silenced) shows at once, and PostgreSQL away is a
503 that says so, never a 500 nor a kept page with stale live parts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from bench.web import CLUSTER, EVALUATION_SECONDS, Shape, fill, write_evaluation
from monitor.alert import actions
from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.cycle import run_cycle
from monitor.core.identity import Identity
from monitor.expose.web.app import create_app
from monitor.expose.web.context import attach
from monitor.store.engine import make_engine

SHAPE = Shape(100)
EVALUATIONS = 2
NOW = datetime.now(UTC).replace(microsecond=0)
GROUPS = f"/api/v1/clusters/{CLUSTER}/groups"


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[TestClient]:
    fill(engine, SHAPE, evaluations=EVALUATIONS, now=NOW)
    app = create_app(engine, stale_after=timedelta(minutes=10))
    with TestClient(app) as test_client:
        yield test_client


def _lag(client: TestClient, group: str = "group-0000") -> int:
    found = client.get(GROUPS, params={"search": group}).json()["items"]
    assert [g["group_id"] for g in found] == [group]
    return int(found[0]["offset_lag"])


def _evaluate(engine: Engine, index: int) -> datetime:
    """One more evaluation as bench/web.py writes them (lag grows by 100 per evaluation)."""
    at = NOW + timedelta(seconds=EVALUATION_SECONDS * (index - EVALUATIONS + 1))
    with engine.begin() as conn:
        write_evaluation(conn, SHAPE, NOW, index, at)
    return at


def test_a_page_shows_the_next_evaluation_and_not_a_change_before_it(
    client: TestClient, engine: Engine
) -> None:
    before = _lag(client)
    assert before == 5000 + 100 * (EVALUATIONS - 1), "group-0000 lags on one partition"
    page = client.get(f"/clusters/{CLUSTER}/groups", params={"q": "group-0000"})
    assert page.status_code == 200 and "5,100" in page.text
    with engine.begin() as conn:  # a row changed behind the evaluation's back: not a new evaluation
        conn.execute(text("UPDATE derived_group SET offset_lag = 1 WHERE group_id = 'group-0000'"))
    assert _lag(client) == before, "kept until the cluster's next evaluation"
    at = _evaluate(engine, EVALUATIONS)
    assert _lag(client) == before + 100, "the next evaluation's numbers at once"
    page = client.get(f"/clusters/{CLUSTER}/groups", params={"q": "group-0000"})
    assert "5,200" in page.text and "5,100" not in page.text
    api = client.get(f"/api/v1/clusters/{CLUSTER}/topics").json()
    assert datetime.fromisoformat(api["evaluated_at"]) == at


def test_a_collection_or_a_finding_reads_again(client: TestClient, engine: Engine) -> None:
    before = _lag(client, "group-0001")
    with engine.begin() as conn:
        conn.execute(text("UPDATE derived_group SET offset_lag = 7 WHERE group_id = 'group-0001'"))
    assert _lag(client, "group-0001") == before
    with engine.begin() as conn:  # the metadata collection ran
        conn.execute(text("UPDATE clusters SET last_seen = last_seen + interval '1 second'"))
    assert _lag(client, "group-0001") == 7
    with engine.begin() as conn:
        conn.execute(text("UPDATE derived_group SET offset_lag = 8 WHERE group_id = 'group-0001'"))
        conn.execute(  # the findings merged after the evaluation's rows changed
            text(
                "UPDATE findings SET evaluated_at = evaluated_at + interval '1 hour' WHERE id = (SELECT min(id) FROM findings)"
            )
        )
    assert _lag(client, "group-0001") == 8


def test_the_cluster_page_and_the_api_share_the_worst_rows(client: TestClient) -> None:
    app: Any = client.app
    reads = app.state.web_context.reads
    assert client.get(f"/clusters/{CLUSTER}").status_code == 200
    misses = reads.misses
    for kind in ("topics", "groups"):
        listing = client.get(f"/api/v1/clusters/{CLUSTER}/{kind}", params={"sort": "worst", "limit": 100})
        assert (
            listing.status_code == 200 and len(listing.json()["items"]) == {"topics": 100, "groups": 10}[kind]
        )
    assert reads.misses == misses, "the page's worst 100 are the API's first page, read once"


def _alert_rows(client: TestClient, path: str) -> int:
    """Rows of the page's table of alerts firing (none: no table)."""
    page = client.get(path)
    assert page.status_code == 200
    if 'data-role="alerts"' not in page.text:
        return 0
    table = page.text[page.text.index('data-role="alerts"') :]
    return int(table[: table.index("</table>")].count('<tr class="row-'))


def test_a_silence_shows_on_the_kept_pages_at_once(client: TestClient, engine: Engine) -> None:
    topic, cluster = f"/clusters/{CLUSTER}/topics/topic-00000", f"/clusters/{CLUSTER}"
    on_topic, on_cluster = _alert_rows(client, topic), _alert_rows(client, cluster)
    assert on_topic > 0 and on_cluster >= on_topic
    now = datetime.now(UTC)
    with engine.begin() as conn:
        actions.create_silence(
            conn,
            Identity("bob", frozenset({"kafka-platform"}), "cli"),
            matchers=[f"cluster={CLUSTER}", "topic=topic-00000"],
            platform_teams={"kafka-platform"},
            comment="known",
            now=now,
            duration=timedelta(hours=1),
            max_duration=timedelta(days=7),
        )
        run_cycle(conn, load_routing(*default_routing_paths()), now, "http://kafka-health.test")
    assert _alert_rows(client, topic) == 0, "the topic's alerts are silenced: none firing"
    assert _alert_rows(client, cluster) < on_cluster or on_cluster == 50  # the page shows 50 at most


def test_postgresql_away_is_a_503_that_says_so(client: TestClient) -> None:
    app: Any = client.app
    ctx = app.state.web_context
    for path in (f"/clusters/{CLUSTER}", f"/api/v1/clusters/{CLUSTER}/topics"):
        assert client.get(path).status_code == 200  # kept
    away = make_engine("postgresql+psycopg://kafka_health@127.0.0.1:9/gone", check=False, connect_timeout=2)
    attach(app, replace(ctx, engine=away))
    try:
        for path in (
            f"/clusters/{CLUSTER}",
            f"/clusters/{CLUSTER}/groups",
            f"/api/v1/clusters/{CLUSTER}/topics",
        ):
            answer = client.get(path)
            assert answer.status_code == 503, path
            assert answer.json()["error"]["code"] == "database_unavailable"
    finally:
        attach(app, ctx)
        away.dispose()
    assert client.get(f"/clusters/{CLUSTER}").status_code == 200, "and the pages again once it is back"
