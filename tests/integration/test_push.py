"""Pushing the state metrics: Prometheus remote write into Debian's real Prometheus (its
remote-write receiver, series queried back through its HTTP API), and CloudWatch PutMetricData
into moto's server (read back with boto3). The failure policy is driven through a real HTTP
server answering what a remote-write receiver answers when it is unwell."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from pytest_httpserver import HTTPServer

from monitor.core.settings import CloudWatchTarget, MetricsConfig, RemoteWriteTarget
from monitor.devtools.servers import MotoServer, PrometheusServer
from monitor.expose.metrics.push.cloudwatch import CloudWatchPusher
from monitor.expose.metrics.push.remote_write import RemoteWriter, decode
from monitor.expose.metrics.push.series import select
from monitor.expose.metrics.push.stage import push_once
from monitor.expose.metrics.snapshot import MetricsSnapshot
from tests.fixtures.populated import Populated
from tests.fixtures.receivers import free_port

GROUP_LAG = "kafka_consumer_group_sum_lag_in_offsets"
TOPIC_LAG = "kafka_consumer_group_topic_max_lag_in_seconds"


def _families(lags: dict[str, float], cluster: str = "east") -> list[Metric]:
    group = GaugeMetricFamily(GROUP_LAG, "lag", labels=["cluster", "clustername", "group"])
    topic = GaugeMetricFamily(TOPIC_LAG, "lag", labels=["cluster", "clustername", "group", "topic"])
    for name, lag in lags.items():
        group.add_metric([cluster, cluster, name], lag)
        topic.add_metric([cluster, cluster, name, "orders"], lag / 10)
    return [group, topic]


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _remote(url: str, **extra: Any) -> RemoteWriteTarget:
    return RemoteWriteTarget(name="test", url=url, metrics=[GROUP_LAG, TOPIC_LAG], **extra)


def _values(server: PrometheusServer, promql: str) -> dict[str, float]:
    return {r["metric"].get("group", ""): float(r["value"][1]) for r in server.query(promql)}


def test_remote_write_lands_in_prometheus_with_names_labels_and_values(
    prometheus_server: PrometheusServer,
) -> None:
    writer = RemoteWriter(_remote(prometheus_server.remote_write_url, external_labels={"monitor": "eu-1"}))
    try:
        taken = writer.push(
            select(_families({"billing": 42, "search": 7}), [GROUP_LAG, TOPIC_LAG], []), _now_ms()
        )
    finally:
        writer.close()
    assert taken == 4
    assert _values(prometheus_server, GROUP_LAG) == {"billing": 42.0, "search": 7.0}
    (series,) = prometheus_server.query(f'{TOPIC_LAG}{{group="billing"}}')
    assert series["metric"] == {
        "__name__": TOPIC_LAG, "cluster": "east", "clustername": "east", "group": "billing",
        "topic": "orders", "monitor": "eu-1",
    }  # fmt: skip
    assert float(series["value"][1]) == 4.2


def test_a_push_while_prometheus_is_away_is_sent_first_when_it_is_back(
    prometheus_server: PrometheusServer,
) -> None:
    writer = RemoteWriter(_remote(prometheus_server.remote_write_url, timeout_seconds=1))
    try:
        prometheus_server.stop()
        first = _now_ms() - 2000
        assert writer.push(select(_families({"billing": 1}), [GROUP_LAG], []), first) == 0
        assert writer.queued == 1
        prometheus_server.start()
        assert writer.push(select(_families({"billing": 2}), [GROUP_LAG], []), _now_ms()) == 2
        assert writer.queued == 0
    finally:
        writer.close()
    # both samples are stored, in order: the queued one first
    assert _values(prometheus_server, f"count_over_time({GROUP_LAG}[5m])") == {"billing": 2.0}
    assert _values(prometheus_server, GROUP_LAG) == {"billing": 2.0}


def test_the_state_of_a_real_evaluation_reaches_prometheus(
    populated: Populated, prometheus_server: PrometheusServer
) -> None:
    metric = "kafka_consumer_group_lag_in_offsets"
    target = RemoteWriteTarget(
        name="state", url=prometheus_server.remote_write_url, metrics=[metric], clusters=[populated.cluster]
    )
    writer = RemoteWriter(target)
    try:
        families = MetricsSnapshot(lambda: populated.engine, MetricsConfig(), keep=[metric]).families()
        assert push_once(writer, families, datetime.now(UTC)) > 0
    finally:
        writer.close()
    for role, group in populated.groups.items():
        got = prometheus_server.query(f'{metric}{{group="{group.name}",topic="{group.topic}",partition="0"}}')
        assert [float(r["value"][1]) for r in got] == [group.lag], role
    clusters = {r["metric"]["cluster"] for r in prometheus_server.query(metric)}
    assert clusters == {populated.cluster}  # the unreachable second cluster is not selected


def test_remote_write_retries_server_errors_and_drops_what_the_receiver_refuses(
    httpserver: HTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    bodies: list[bytes] = []

    def record(status: int) -> Any:
        from werkzeug import Response

        def handler(request: Any) -> Response:
            bodies.append(request.get_data())
            assert request.headers["Content-Encoding"] == "snappy"
            assert request.headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
            return Response("out of order sample" if status == 400 else "", status=status)

        return handler

    httpserver.expect_ordered_request("/write").respond_with_handler(record(503))
    httpserver.expect_ordered_request("/write").respond_with_handler(record(429))
    httpserver.expect_ordered_request("/write").respond_with_handler(record(204))
    httpserver.expect_ordered_request("/write").respond_with_handler(record(400))
    writer = RemoteWriter(_remote(httpserver.url_for("/write"), timeout_seconds=2))
    try:
        assert writer.push(select(_families({"a": 1}), [GROUP_LAG], []), 1000) == 1  # 503, 429, then 204
        with caplog.at_level(logging.ERROR):
            assert writer.push(select(_families({"a": 2}), [GROUP_LAG], []), 2000) == 0  # 400: dropped
    finally:
        writer.close()
    assert writer.queued == 0
    assert "refused 1 samples with 400: out of order sample" in caplog.text
    assert len(bodies) == 4
    (labels, samples), = decode(bodies[2])  # fmt: skip
    assert labels == {"__name__": GROUP_LAG, "cluster": "east", "clustername": "east", "group": "a"}
    assert samples == [(1.0, 1000)]


def test_the_queue_of_an_unreachable_endpoint_is_bounded_and_keeps_the_newest() -> None:
    url = f"http://127.0.0.1:{free_port()}/api/v1/write"
    writer = RemoteWriter(_remote(url, queue_max_batches=3, timeout_seconds=0.2))
    try:
        for n in range(5):
            writer.push(select(_families({"a": n}), [GROUP_LAG], []), 1000 + n)
        assert writer.queued == 3
        kept = [decode(batch.payload)[0][1][0] for batch in writer._queue]
    finally:
        writer.close()
    assert kept == [(2.0, 1002), (3.0, 1003), (4.0, 1004)]


def _cloudwatch(moto: MotoServer) -> Any:
    return boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=moto.url)


def test_cloudwatch_gets_the_lag_of_every_group_with_its_dimensions(
    populated: Populated, moto_server: MotoServer
) -> None:
    target = CloudWatchTarget(
        name="cw", namespace="KafkaHealthTest", endpoint_url=moto_server.url, clusters=[populated.cluster],
        metrics=["kafka_consumer_group_sum_lag_in_offsets", "kafka_consumer_group_max_lag_in_seconds"],
    )  # fmt: skip
    pusher = CloudWatchPusher(target)
    now = datetime.now(UTC)
    try:
        snapshot = MetricsSnapshot(lambda: populated.engine, MetricsConfig(), keep=target.metrics)
        assert push_once(pusher, snapshot.families(), now) > 0
    finally:
        pusher.close()
    client = _cloudwatch(moto_server)
    for role, group in populated.groups.items():
        answer = client.get_metric_statistics(
            Namespace="KafkaHealthTest", MetricName="kafka_consumer_group_sum_lag_in_offsets",
            Dimensions=[{"Name": "cluster", "Value": populated.cluster}, {"Name": "group", "Value": group.name}],
            StartTime=now - timedelta(minutes=5), EndTime=now + timedelta(minutes=5), Period=60,
            Statistics=["Maximum"], Unit="Count",
        )  # fmt: skip
        assert [p["Maximum"] for p in answer["Datapoints"]] == [group.lag], role
    listed = client.list_metrics(
        Namespace="KafkaHealthTest", MetricName="kafka_consumer_group_max_lag_in_seconds"
    )
    names = {tuple(sorted(d["Name"] for d in m["Dimensions"])) for m in listed["Metrics"]}
    assert names == {("cluster", "group")}  # kafka-lag-go's duplicate clustername is left out


def test_cloudwatch_takes_a_push_larger_than_one_request(moto_server: MotoServer) -> None:
    lags = {f"group-{n:04d}": float(n) for n in range(2_500)}
    target = CloudWatchTarget(name="cw", namespace="Big", endpoint_url=moto_server.url, metrics=[GROUP_LAG])
    pusher = CloudWatchPusher(target)
    try:
        assert push_once(pusher, _families(lags), datetime.now(UTC)) == 2_500
    finally:
        pusher.close()
    paginator = _cloudwatch(moto_server).get_paginator("list_metrics")
    listed = [m for page in paginator.paginate(Namespace="Big") for m in page["Metrics"]]
    assert len(listed) == 2_500


@pytest.mark.parametrize("credentials", [True, False], ids=["away", "no-credentials"])
def test_cloudwatch_trouble_is_logged_with_what_to_do(
    credentials: bool, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    if credentials:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    target = CloudWatchTarget(
        name="cw-away",
        endpoint_url=f"http://127.0.0.1:{free_port()}",
        metrics=[GROUP_LAG],
        timeout_seconds=0.5,
    )
    pusher = CloudWatchPusher(target)
    try:
        with caplog.at_level(logging.WARNING):
            assert push_once(pusher, _families({"a": 1}), datetime.now(UTC)) == 0
    finally:
        pusher.close()
    if credentials:
        assert "cw-away: CloudWatch did not answer (EndpointConnectionError)" in caplog.text
        assert "testing-secret" not in caplog.text
    else:
        assert "cw-away: no AWS credentials found: set AWS_ACCESS_KEY_ID" in caplog.text
