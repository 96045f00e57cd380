"""The JSON API (`/api/v1/...`) over synthetic rows with known values: every endpoint's answer,
the stable error codes, paging, and an OpenAPI document that describes every field."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from monitor.core.clock import FakeClock
from monitor.expose.web.app import create_app
from tests.fixtures.read_model import T0, T1, fill

ISO_T0, ISO_T1 = T0.isoformat().replace("+00:00", "Z"), T1.isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[TestClient]:
    with engine.begin() as conn:
        fill(conn)
    app = create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(T1 + timedelta(minutes=1)))
    with TestClient(app) as test_client:
        yield test_client


def get(client: TestClient, path: str, status: int = 200) -> Any:
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    return answer.json()


def test_clusters_and_one_cluster(client: TestClient) -> None:
    names = [c["cluster"] for c in get(client, "/api/v1/clusters")]
    assert names == ["idle", "prod"]
    prod = get(client, "/api/v1/clusters/prod")
    assert {k: prod[k] for k in ("brokers", "brokers_up", "brokers_down", "topics", "consumer_groups")} == {
        "brokers": 3, "brokers_up": 2, "brokers_down": 1, "topics": 2, "consumer_groups": 2,
    }  # fmt: skip
    assert prod["groups_by_status"] == {"OK": 1, "WARN": 1}
    assert prod["findings_by_severity"] == {"critical": 1, "warning": 2}
    assert prod["evaluated_at"] == ISO_T1
    assert prod["kafka_version"] == "3.9"
    assert prod["unavailable"][0] == {
        "feature": "kip848_groups",
        "text": "KIP-848 consumer groups: not available on Kafka 3.9 (from 4.0)",
        "from_version": "4.0",
    }
    assert [u["feature"] for u in prod["unavailable"]] == [
        "kip848_groups",
        "simple_group_tombstone",
        "share_groups",
    ]
    listed = {c["cluster"]: c for c in get(client, "/api/v1/clusters")}
    assert listed["prod"]["unavailable"] == prod["unavailable"]
    assert (listed["idle"]["kafka_version"], listed["idle"]["unavailable"]) == (None, [])
    assert get(client, "/api/v1/clusters/idle")["evaluated_at"] is None


def test_brokers(client: TestClient) -> None:
    brokers = get(client, "/api/v1/clusters/prod/brokers")
    assert [(b["broker_id"], b["up"], b["leaders"], b["disk_used_ratio"]) for b in brokers] == [
        (1, True, 2, 0.75), (2, True, 2, 0.75), (3, False, 0, 0.75),
    ]  # fmt: skip


def test_topics_page_and_filter(client: TestClient) -> None:
    listing = get(client, "/api/v1/clusters/prod/topics?limit=1")
    assert (listing["total"], listing["limit"], listing["offset"], listing["evaluated_at"]) == (
        2,
        1,
        0,
        ISO_T1,
    )
    orders = listing["items"][0]
    assert (orders["topic"], orders["retention_ms"], orders["size_bytes"], orders["lagging_groups"]) == (
        "orders", 604800000, 3000, 1,
    )  # fmt: skip
    second = get(client, "/api/v1/clusters/prod/topics?limit=1&offset=1")["items"]
    assert [t["topic"] for t in second] == ["payments"]
    assert [t["topic"] for t in get(client, "/api/v1/clusters/prod/topics?problems=true")["items"]] == [
        "orders"
    ]
    by_size = get(client, "/api/v1/clusters/prod/topics?sort=size_bytes")["items"]
    assert [t["topic"] for t in by_size] == ["orders", "payments"]


def test_one_topic(client: TestClient) -> None:
    topic = get(client, "/api/v1/clusters/prod/topics/orders?limit=2&offset=1")
    assert topic["topic"]["topic"] == "orders" and topic["configs"]["cleanup.policy"] == "delete"
    assert [p["partition"] for p in topic["partitions"]["items"]] == [1, 2]
    assert topic["partitions"]["total"] == 3
    second = topic["partitions"]["items"][1]
    assert (second["leader"], second["replicas"], second["isr"], second["non_preferred_leader"]) == (
        1, [3, 1, 2], [1, 2], True,
    )  # fmt: skip
    assert [(c["group_id"], c["time_until_data_loss_seconds"]) for c in topic["consumers"]] == [
        ("billing", 1800.0), ("audit", None),
    ]  # fmt: skip


def test_groups_and_one_group(client: TestClient) -> None:
    listing = get(client, "/api/v1/clusters/prod/groups")
    assert [(g["group_id"], g["status"], g["offset_lag"]) for g in listing["items"]] == [
        ("billing", "WARN", 50), ("audit", "OK", 0),
    ]  # fmt: skip
    assert get(client, "/api/v1/clusters/prod/groups?status=OK&status=ERR")["total"] == 1
    assert (
        get(client, "/api/v1/clusters/prod/groups?lagging=true&sort=group_id")["items"][0]["group_id"]
        == "billing"
    )
    billing = get(client, "/api/v1/clusters/prod/groups/billing")
    assert billing["group"]["time_until_data_loss_seconds"] == 1800.0
    assert [m["member_id"] for m in billing["members"]] == ["m1", "m2"]
    assert billing["members"][1]["assignment"] == ["orders:2", "payments:0"]
    assert [(t["topic"], t["offset_lag"]) for t in billing["topics"]] == [("orders", 50), ("payments", 0)]


def test_partition_lag(client: TestClient) -> None:
    listing = get(client, "/api/v1/clusters/prod/groups/billing/lag?topic=orders&limit=2")
    assert listing["total"] == 3
    first = listing["items"][0]
    assert {k: first[k] for k in ("topic", "partition", "committed_offset", "end_offset", "offset_lag", "lag_seconds",
                                  "lag_seconds_method", "status", "owner", "client_id")} == {
        "topic": "orders", "partition": 0, "committed_offset": 150, "end_offset": 200, "offset_lag": 50,
        "lag_seconds": 600.0, "lag_seconds_method": "exact", "status": "WARN", "owner": "/10.0.0.1",
        "client_id": "c-m1",
    }  # fmt: skip
    assert get(client, "/api/v1/clusters/prod/groups/billing/lag?lagging=true")["total"] == 1


def test_history(client: TestClient) -> None:
    history = get(client, "/api/v1/clusters/prod/groups/billing/history?window=1h")
    assert (history["since"], history["until"], history["step_seconds"]) == (
        (T1 - timedelta(hours=1)).isoformat().replace("+00:00", "Z"), ISO_T1, 8,
    )  # fmt: skip
    assert [(p["evaluated_at"], p["offset_lag"]) for p in history["points"]] == [(ISO_T0, 80), (ISO_T1, 50)]
    short = get(client, f"/api/v1/clusters/prod/groups/billing/history?window=10s&until={ISO_T1}")
    assert [p["offset_lag"] for p in short["points"]] == [50]
    gone = get(client, "/api/v1/clusters/prod/groups/ghost/history?window=15m")
    assert [p["status"] for p in gone["points"]] == ["ERR"], "history outlives the group"
    partition = get(
        client, "/api/v1/clusters/prod/groups/billing/lag/orders/0/history?window=1h&max_points=1000"
    )
    assert [(p["committed_offset"], p["offset_lag"]) for p in partition["points"]] == [(100, 80), (150, 50)]
    merged = get(client, "/api/v1/clusters/prod/groups/billing/lag/orders/0/history?window=1h&max_points=10")
    assert [(p["committed_offset"], p["offset_lag"]) for p in merged["points"]] == [(150, 80)], (
        "newest offset, worst lag"
    )


def test_findings(client: TestClient) -> None:
    listing = get(client, "/api/v1/findings")
    assert [(f["rule"], f["severity"]) for f in listing["items"]] == [
        ("BrokerDown", "critical"), ("TimeUntilDataLoss", "warning"), ("PartitionReplicaLost", "warning"),
        ("CollectionStale", "info"),
    ]  # fmt: skip
    warnings = get(client, "/api/v1/findings?cluster=prod&severity=warning&rule=TimeUntilDataLoss")
    assert [(f["entity_key"], f["labels"]["group_id"]) for f in warnings["items"]] == [
        ("prod/billing/orders/0", "billing")
    ]
    assert warnings["evaluated_at"] == ISO_T1


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/v1/clusters/nope", "cluster_not_found"),
        ("/api/v1/clusters/nope/brokers", "cluster_not_found"),
        ("/api/v1/clusters/nope/topics", "cluster_not_found"),
        ("/api/v1/clusters/prod/topics/nope", "topic_not_found"),
        ("/api/v1/clusters/prod/topics/old", "topic_not_found"),
        ("/api/v1/clusters/nope/groups", "cluster_not_found"),
        ("/api/v1/clusters/prod/groups/nope", "group_not_found"),
        ("/api/v1/clusters/prod/groups/ghost", "group_not_found"),
        ("/api/v1/clusters/prod/groups/nope/lag", "group_not_found"),
        ("/api/v1/clusters/prod/groups/nope/history", "group_not_found"),
        ("/api/v1/clusters/nope/groups/billing/history", "cluster_not_found"),
        ("/api/v1/findings?cluster=nope", "cluster_not_found"),
    ],
)
def test_unknown_names_are_404_with_a_stable_code(client: TestClient, path: str, code: str) -> None:
    error = get(client, path, 404)["error"]
    assert error["code"] == code and error["message"].startswith("no ")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/clusters/prod/topics?limit=0",
        "/api/v1/clusters/prod/topics?limit=1001",
        "/api/v1/clusters/prod/topics?offset=-1",
        "/api/v1/clusters/prod/topics?sort=colour",
        "/api/v1/clusters/prod/groups?status=BAD",
        "/api/v1/clusters/prod/groups/billing/history?window=1y",
        "/api/v1/clusters/prod/groups/billing/history?window=91d",
        "/api/v1/clusters/prod/groups/billing/history?until=yesterday",
        "/api/v1/clusters/prod/groups/billing/history?until=2026-06-01T12:00:00",
        "/api/v1/clusters/prod/groups/billing/lag/orders/-1/history",
        "/api/v1/findings?severity=urgent",
    ],
)
def test_bad_parameters_are_422_invalid_parameter(client: TestClient, path: str) -> None:
    assert get(client, path, 422)["error"]["code"] == "invalid_parameter"


def test_the_openapi_document_describes_every_field(client: TestClient) -> None:
    document = get(client, "/openapi.json")
    assert document["info"]["title"] == "kafka-health" and document["info"]["description"]
    tags = {t["name"] for t in document["tags"]}
    assert {"clusters", "topics", "consumer groups", "findings"} <= tags
    ours = {
        p: ops
        for p, ops in document["paths"].items()
        if p.startswith(("/api/v1/clusters", "/api/v1/findings"))
    }
    assert len(ours) == 13  # with the two share-group routes
    for path, operations in ours.items():
        for operation in operations.values():
            assert operation.get("summary") and operation.get("description"), path
            assert operation.get("tags"), path
            assert {"200", "404", "422"} <= set(operation["responses"]), path
    undescribed = [
        f"{name}.{field}"
        for name, schema in document["components"]["schemas"].items()
        if not name.startswith(("HTTPValidationError", "ValidationError", "Body_"))
        for field, prop in schema.get("properties", {}).items()
        if not prop.get("description") and "$ref" not in prop and name.split("_")[0] not in _ALERT_MODELS
    ]
    assert undescribed == [], undescribed


_ALERT_MODELS = {"AckRequest", "SilenceRequest"}
