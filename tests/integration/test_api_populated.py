"""The JSON API and the Burrow endpoints over a database filled by real collection runs, a real
Spark evaluation and an alert cycle (`populated`): what they answer matches what was produced
and committed on the real Kafka cluster."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from monitor.core.clock import SystemClock
from monitor.expose.web.app import create_app
from tests.fixtures.populated import Populated


@pytest.fixture(scope="module")
def client(populated: Populated) -> Iterator[TestClient]:
    app = create_app(populated.engine, stale_after=timedelta(minutes=5), clock=SystemClock())
    with TestClient(app) as test_client:
        yield test_client


def get(client: TestClient, path: str, status: int = 200) -> Any:
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    return answer.json()


def test_every_group_has_the_lag_that_was_committed(client: TestClient, populated: Populated) -> None:
    base = f"/api/v1/clusters/{populated.cluster}"
    listed = {g["group_id"]: g for g in get(client, f"{base}/groups?limit=1000")["items"]}
    for role, facts in populated.groups.items():
        assert listed[facts.name]["offset_lag"] == facts.lag, role
        (partition,) = get(client, f"{base}/groups/{facts.name}/lag")["items"]
        assert (partition["topic"], partition["partition"]) == (facts.topic, 0), role
        assert (partition["committed_offset"], partition["end_offset"]) == (facts.committed, facts.end), role
    lost = populated.groups["lost"].name
    assert get(client, f"{base}/groups/{lost}")["group"]["data_loss_occurred"] is True
    at_risk = get(client, f"{base}/groups/{populated.groups['at_risk'].name}")["group"]
    assert 0 < at_risk["time_until_data_loss_seconds"] < 1800, "retention deletes it in under 25 minutes"
    # It made no progress between the two runs: its margin is the whole time until the deletion,
    # under TimeUntilDataLoss's 30-minute critical tier, and the rule pages.
    assert at_risk["data_loss_margin_seconds"] == at_risk["time_until_data_loss_seconds"]
    risky = {
        (f["labels"].get("group_id"), f["severity"])
        for f in get(client, f"/api/v1/findings?cluster={populated.cluster}&limit=1000")["items"]
        if f["rule"] == "TimeUntilDataLoss"
    }
    assert (populated.groups["at_risk"].name, "critical") in risky, risky
    caught_up = get(client, f"{base}/groups/{populated.groups['caught_up'].name}")["group"]
    assert (caught_up["time_until_data_loss_seconds"], caught_up["data_loss_margin_seconds"]) == (None, None)
    history = get(client, f"{base}/groups/{populated.groups['lagging'].name}/history?window=1h")
    assert [p["offset_lag"] for p in history["points"]][-1] == populated.groups["lagging"].lag


def test_topics_and_the_groups_at_risk_on_them(client: TestClient, populated: Populated) -> None:
    base = f"/api/v1/clusters/{populated.cluster}"
    cluster = get(client, base)
    assert cluster["evaluated_at"] is not None and cluster["consumer_groups"] >= len(populated.groups)
    ledger = get(client, f"{base}/topics/{populated.topics['ledger']}")
    assert ledger["topic"]["retention_ms"] == 7 * 3600_000
    consumers = {c["group_id"] for c in ledger["consumers"]}
    assert {populated.groups["at_risk"].name, populated.groups["at_risk_silenced"].name} <= consumers
    assert ledger["topic"]["min_time_until_data_loss_seconds"] is not None
    assert ledger["topic"]["min_data_loss_margin_seconds"] is not None
    rules = {
        f["rule"] for f in get(client, f"/api/v1/findings?cluster={populated.cluster}&limit=1000")["items"]
    }
    assert "DataLossOccurred" in rules


def test_burrow_reads_the_same_groups(client: TestClient, populated: Populated) -> None:
    base = f"/v3/kafka/{populated.cluster}"
    names = get(client, f"{base}/consumer")["consumers"]
    assert {g.name for g in populated.groups.values()} <= set(names)
    lagging = populated.groups["lagging"]
    status = get(client, f"{base}/consumer/{lagging.name}/lag")["status"]
    assert (status["partition_count"], status["totallag"]) == (1, lagging.lag)
    assert status["partitions"][0]["end"]["offset"] == lagging.committed
    detail = get(client, f"{base}/consumer/{lagging.name}")["topics"][lagging.topic][0]
    assert detail["current-lag"] == lagging.lag
    ends = get(client, f"{base}/topic/{lagging.topic}")["offsets"]
    assert ends == [lagging.end]
