"""The Burrow v3-compatible endpoints: every answer has Burrow's documented shape (keys, types,
nesting: the `SHAPES` below are written from Burrow's HTTP endpoint documentation and its
response structs), and the values come from the evaluation, over synthetic rows."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from monitor.core.clock import FakeClock
from monitor.expose.web.app import create_app
from tests.fixtures.read_model import T0, T1, fill, insert


class Map:
    """A JSON object with arbitrary keys whose values all have shape `value`."""

    def __init__(self, value: Any) -> None:
        self.value = value


REQUEST = {"url": str, "host": str}


def envelope(**payload: Any) -> dict[str, Any]:
    """Every Burrow answer: error, message and request, beside its payload."""
    return {"error": bool, "message": str, "request": REQUEST, **payload}


OFFSET = {"offset": int, "timestamp": int, "lag": (int, None)}
PARTITION_STATUS = {
    "topic": str, "partition": int, "owner": str, "client_id": str, "status": str,
    "start": (OFFSET, None), "end": (OFFSET, None), "current_lag": int, "complete": float,
    "committed_beyond_end": bool,
}  # fmt: skip
GROUP_STATUS = {
    "cluster": str, "group": str, "status": str, "complete": float, "partitions": [PARTITION_STATUS],
    "partition_count": int, "maxlag": (PARTITION_STATUS, None), "totallag": int, "partitions_beyond_end": int,
}  # fmt: skip
"""Burrow's shapes, plus `committed_beyond_end` and `partitions_beyond_end` (ours: a Burrow client
ignores keys it does not know, and the status it reads is at least WARN there)."""
CLUSTER_MODULE = {
    "class-name": str, "servers": [str], "topic-refresh": int, "offset-refresh": int,
    "client-profile": {"name": str, "client-id": str, "kafka-version": str, "tls": None, "sasl": None},
}  # fmt: skip
CONSUMER_PARTITION = {"offsets": [(OFFSET, None)], "owner": str, "client_id": str, "current-lag": int}
SHAPES: dict[str, dict[str, Any]] = {
    "error": envelope(),
    "cluster list": envelope(clusters=[str]),
    "cluster detail": envelope(module=CLUSTER_MODULE),
    "topic list": envelope(topics=[str]),
    "topic detail": envelope(offsets=[int]),
    "topic consumers": envelope(consumers=[str]),
    "consumer list": envelope(consumers=[str]),
    "consumer detail": envelope(topics=Map([CONSUMER_PARTITION])),
    "consumer status": envelope(status=GROUP_STATUS),
}


def conforms(value: Any, shape: Any, where: str = "$") -> list[str]:
    """Where `value` departs from `shape`: exact key sets, JSON types (a bool is not a number).
    A tuple is a choice of shapes, `None` is null, a one-element list an array of that shape."""
    if isinstance(shape, tuple):
        if any(not conforms(value, option, where) for option in shape):
            return []
        return [f"{where}: {value!r} is none of {shape!r}"]
    if shape is None:
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if isinstance(shape, Map):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [p for k, v in value.items() for p in conforms(v, shape.value, f"{where}.{k}")]
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        if set(value) != set(shape):
            return [f"{where}: keys {sorted(value)} are not {sorted(shape)}"]
        return [p for k, s in shape.items() for p in conforms(value[k], s, f"{where}.{k}")]
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        return [p for i, v in enumerate(value) for p in conforms(v, shape[0], f"{where}[{i}]")]
    if shape is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, shape) and not (shape is int and isinstance(value, bool))
    return [] if ok else [f"{where}: {value!r} is not {shape.__name__}"]


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[TestClient]:
    with engine.begin() as conn:
        fill(conn)
        insert(conn, "collection_runs", [
            {"cluster": "prod", "job": job, "instance": "i", "started_at": T1 - timedelta(seconds=s),
             "status": "ok"}
            for job, s in (("metadata", 0), ("metadata", 60), ("metadata", 120), ("offsets", 0), ("offsets", 15))
        ])  # fmt: skip
    with TestClient(create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(T1))) as test_client:
        yield test_client


def burrow(client: TestClient, path: str, shape: str, status: int = 200) -> Any:
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert conforms(body, SHAPES[shape]) == []
    assert body["request"] == {"url": path, "host": socket.gethostname()}
    return body


def test_clusters_and_a_cluster(client: TestClient) -> None:
    listed = burrow(client, "/v3/kafka", "cluster list")
    assert (listed["error"], listed["message"], listed["clusters"]) == (
        False,
        "cluster list returned",
        ["idle", "prod"],
    )
    module = burrow(client, "/v3/kafka/prod", "cluster detail")["module"]
    assert (module["class-name"], module["servers"]) == ("kafka", ["k1:9092", "k2:9092"])
    assert (module["topic-refresh"], module["offset-refresh"]) == (60, 15)
    assert burrow(client, "/v3/kafka/idle", "cluster detail")["module"]["topic-refresh"] == 0
    missing = burrow(client, "/v3/kafka/nope", "error", 404)
    assert (missing["error"], missing["message"]) == (True, "cluster module not found")


def test_topics(client: TestClient) -> None:
    assert burrow(client, "/v3/kafka/prod/topic", "topic list")["topics"] == ["orders", "payments"]
    assert burrow(client, "/v3/kafka/prod/topic/orders", "topic detail")["offsets"] == [200, 120, 80]
    assert burrow(client, "/v3/kafka/prod/topic/orders/consumers", "topic consumers")["consumers"] == [
        "audit",
        "billing",
    ]
    for path, message in (
        ("/v3/kafka/nope/topic", "cluster not found"),
        ("/v3/kafka/prod/topic/nope", "cluster or topic not found"),
        ("/v3/kafka/nope/topic/orders", "cluster or topic not found"),
        ("/v3/kafka/nope/topic/orders/consumers", "cluster not found"),
    ):
        assert burrow(client, path, "error", 404)["message"] == message, path


def test_consumers_and_their_offsets(client: TestClient) -> None:
    assert burrow(client, "/v3/kafka/prod/consumer", "consumer list")["consumers"] == ["audit", "billing"]
    assert burrow(client, "/v3/kafka/idle/consumer", "consumer list")["consumers"] == []
    topics = burrow(client, "/v3/kafka/prod/consumer/billing", "consumer detail")["topics"]
    assert sorted(topics) == ["orders", "payments"] and len(topics["orders"]) == 3
    assert topics["orders"][0] == {
        "offsets": [None] * 8 + [{"offset": 100, "timestamp": ms(T0), "lag": 80},
                                 {"offset": 150, "timestamp": ms(T1), "lag": 50}],
        "owner": "/10.0.0.1", "client_id": "c-m1", "current-lag": 50,
    }  # fmt: skip
    assert topics["payments"][0]["offsets"][-1] == {"offset": 40, "timestamp": ms(T0), "lag": 0}
    for path in (
        "/v3/kafka/prod/consumer/nope",
        "/v3/kafka/prod/consumer/ghost",
        "/v3/kafka/nope/consumer/billing",
    ):
        assert burrow(client, path, "error", 404)["message"] == "cluster or consumer not found", path
    assert burrow(client, "/v3/kafka/nope/consumer", "error", 404)["message"] == "cluster not found"


def test_status_lists_the_partitions_not_ok_and_lag_lists_all(client: TestClient) -> None:
    status = burrow(client, "/v3/kafka/prod/consumer/billing/status", "consumer status")
    assert status["message"] == "consumer status returned"
    worst = {
        "topic": "orders", "partition": 0, "owner": "/10.0.0.1", "client_id": "c-m1", "status": "WARN",
        "start": {"offset": 100, "timestamp": ms(T0), "lag": 80},
        "end": {"offset": 150, "timestamp": ms(T1), "lag": 50}, "current_lag": 50, "complete": 0.2,
        "committed_beyond_end": False,
    }  # fmt: skip
    assert status["status"] == {
        "cluster": "prod", "group": "billing", "status": "WARN", "complete": 0.0, "partitions": [worst],
        "partition_count": 4, "maxlag": worst, "totallag": 50, "partitions_beyond_end": 0,
    }  # fmt: skip
    lag = burrow(client, "/v3/kafka/prod/consumer/billing/lag", "consumer status")["status"]
    assert [(p["topic"], p["partition"], p["status"], p["complete"]) for p in lag["partitions"]] == [
        ("orders", 0, "WARN", 0.2), ("orders", 1, "OK", 0.1), ("orders", 2, "OK", 0.1), ("payments", 0, "OK", 0.1),
    ]  # fmt: skip
    audit = burrow(client, "/v3/kafka/prod/consumer/audit/status", "consumer status")["status"]
    assert (audit["status"], audit["partitions"], audit["totallag"], audit["maxlag"]["partition"]) == (
        "OK",
        [],
        0,
        0,
    )


@pytest.mark.parametrize(
    ("group", "beyond", "status", "listed"),
    [
        ("audit", [("orders", 0)], "WARN", [("orders", 0, "WARN", True)]),
        ("billing", [("orders", 1)], "WARN", [("orders", 0, "WARN", False), ("orders", 1, "WARN", True)]),
        ("billing", [("orders", 0), ("payments", 0)], "WARN",
         [("orders", 0, "WARN", True), ("payments", 0, "WARN", True)]),
        ("audit", [], "OK", []),
    ],
)  # fmt: skip
def test_a_partition_committed_beyond_the_end_is_never_ok(
    client: TestClient,
    engine: Engine,
    group: str,
    beyond: list[tuple[str, int]],
    status: str,
    listed: list[tuple[str, int, str, bool]],
) -> None:
    """Its lag reads 0, but it is not caught up: the partition and the group are at least WARN,
    the partition says `committed_beyond_end` and the group counts them (`partitions_beyond_end`)."""
    flag = text(
        "UPDATE derived_group_partition SET committed_beyond_end = :b"
        " WHERE cluster = 'prod' AND group_id = :g AND evaluated_at = :at AND topic = :t AND partition = :p"
    )
    with engine.begin() as conn:
        for topic, partition in beyond:
            conn.execute(flag, {"b": True, "g": group, "at": T1, "t": topic, "p": partition})
    try:
        body = burrow(client, f"/v3/kafka/prod/consumer/{group}/status", "consumer status")["status"]
    finally:
        with engine.begin() as conn:
            for topic, partition in beyond:
                conn.execute(flag, {"b": False, "g": group, "at": T1, "t": topic, "p": partition})
    assert body["status"] == status and body["partitions_beyond_end"] == len(beyond)
    shown = [(p["topic"], p["partition"], p["status"], p["committed_beyond_end"]) for p in body["partitions"]]
    assert shown == listed


@pytest.mark.parametrize("endpoint", ["status", "lag"])
@pytest.mark.parametrize(
    "where", ["prod/consumer/nope", "prod/consumer/ghost", "nope/consumer/billing", "idle/consumer/x"]
)
def test_an_unknown_group_has_status_notfound(client: TestClient, endpoint: str, where: str) -> None:
    body = burrow(client, f"/v3/kafka/{where}/{endpoint}", "consumer status", 404)
    cluster, _, group = where.split("/")
    assert body["error"] is False
    assert body["status"] == {
        "cluster": cluster, "group": group, "status": "NOTFOUND", "complete": 1.0, "partitions": [],
        "partition_count": 0, "maxlag": None, "totallag": 0, "partitions_beyond_end": 0,
    }  # fmt: skip


def test_the_openapi_document_describes_the_burrow_shapes(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    paths = [p for p in document["paths"] if p.startswith("/v3/kafka")]
    assert len(paths) == 9
    detail = document["components"]["schemas"]["ConsumerPartition"]["properties"]
    assert set(detail) == {"offsets", "owner", "client_id", "current-lag"}
    assert "burrow" in {t["name"] for t in document["tags"]}
