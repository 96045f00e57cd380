"""bench/web.py's synthetic read model: it fills a migrated database, the counts match its shape,
and every endpoint the benchmark measures answers 200 with the rows it wrote (a benchmark of
404s would measure nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from bench.web import CLUSTER, Shape, endpoints, fill
from monitor.core.clock import SystemClock
from monitor.expose.web.app import create_app

SHAPE = Shape(30)


@pytest.fixture(scope="module")
def counts(engine: Engine) -> dict[str, int]:
    return fill(engine, SHAPE, evaluations=3, now=datetime.now(UTC))


@pytest.fixture(scope="module")
def client(engine: Engine, counts: dict[str, int]) -> Iterator[TestClient]:
    app = create_app(engine, stale_after=timedelta(minutes=10), clock=SystemClock())
    with TestClient(app) as test_client:
        yield test_client


def test_the_fill_has_the_shape_it_promises(counts: dict[str, int]) -> None:
    assert SHAPE.partitions == 300
    assert SHAPE.groups == 3
    assert SHAPE.group_partitions == 300
    assert counts["topics"] == 30
    assert counts["partitions"] == 300
    assert counts["group_members"] == 3 * SHAPE.groups
    assert counts["derived_partition"] == 3 * 300
    assert counts["derived_group_partition"] == 3 * 300
    assert counts["derived_group"] == 3 * SHAPE.groups
    assert counts["findings"] > 0
    assert counts["alerts"] == counts["findings"]


@pytest.mark.parametrize(("kind", "path"), endpoints("topic-00000", "group-0000"))
def test_every_measured_endpoint_answers(client: TestClient, kind: str, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text[:500]
    if path == f"/api/v1/clusters/{CLUSTER}/groups/group-0000/lag":
        assert answer.json()["total"] == 100  # 10 topics of 10 partitions
    if kind == "page":
        assert "text/html" in answer.headers["content-type"]


def test_the_group_has_history_and_the_cluster_its_topics(client: TestClient) -> None:
    history = client.get(f"/api/v1/clusters/{CLUSTER}/groups/group-0000/history").json()
    assert len(history["points"]) == 3
    topics = client.get(f"/api/v1/clusters/{CLUSTER}/topics").json()
    assert topics["total"] == 30
    lagging = client.get(f"/api/v1/clusters/{CLUSTER}/groups", params={"lagging": "true"}).json()
    assert lagging["total"] > 0
