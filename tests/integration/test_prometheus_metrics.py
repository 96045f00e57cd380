"""`/metrics` over the views: kafka-lag-go's names and ours with exact values from a known latest
evaluation (an older evaluation must not show), the catalogue against a real scrape, the cap on
partition-level series, and a database that is down or too slow (still 200, `kafka_health_up 0`
and the process metrics)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Connection, Engine, text

from monitor.alert.notify.outbox import NOTIFICATION_FAILURES, NOTIFICATIONS
from monitor.collect import probe_metrics
from monitor.core.records import ProbeResult
from monitor.core.settings import MetricsConfig
from monitor.expose.metrics.catalogue import BY_NAME, CATALOGUE, PARTITIONS
from monitor.expose.metrics.push.metrics import PUSH_FAILURES, PUSH_QUEUE, PUSH_SAMPLES
from monitor.expose.web.app import create_app
from monitor.store.engine import make_engine
from monitor.store.partitions import ensure_partitions
from monitor.store.runs import RUN_SECONDS, RUNS
from tests.fixtures.postgres import table_locked
from tests.fixtures.scrapes import assert_catalogued

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=30)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _insert(conn: Connection, table: str, at: datetime, rows: list[dict[str, object]]) -> None:
    for row in rows:
        row = {"cluster": "prod", "evaluated_at": at, **row}
        columns = ", ".join(row)
        values = ", ".join(f":{c}" for c in row)
        conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({values})"), row)


def _gp(
    group: str, topic: str, partition: int, lag: int, seconds: float | None, tudl: float | None
) -> dict[str, object]:
    return {"group_id": group, "topic": topic, "partition": partition, "offset_lag": lag,
            "lag_seconds": seconds, "time_until_data_loss_seconds": tudl}  # fmt: skip


def _objective(group: str, objective: str, **values: object) -> dict[str, object]:
    return {"group_id": group, "objective": objective, "lag_threshold_seconds": 60.0, "target": 99.5,
            "window_days": 28, "bad_minutes": 0, "recorded_minutes": 0, **values}  # fmt: skip


@pytest.fixture(scope="module")
def filled(engine: Engine) -> Engine:
    with engine.begin() as conn:
        ensure_partitions(conn, T0, ahead_days=1)
        conn.execute(
            text(
                "INSERT INTO clusters (name, bootstrap, controller_id, first_seen, last_seen)"
                " VALUES ('prod', 'k:9092', 1, :t, :t), ('stage', 'k2:9092', 1, :t, :t)"
            ),
            {"t": T0},
        )
        conn.execute(
            text(
                "INSERT INTO brokers (cluster, broker_id, host, port, first_seen, last_seen, up)"
                " VALUES ('prod', 1, 'b1', 9092, :t, :t, true), ('prod', 2, 'b2', 9092, :t, :t, true),"
                "        ('prod', 3, 'b3', 9092, :t, :t, false)"
            ),
            {"t": T0},
        )
        conn.execute(
            text(
                "INSERT INTO partitions (cluster, topic, partition, leader, replicas, isr, updated_at)"
                " VALUES ('prod', 'orders', 0, 1, '{1,2,3}', '{1,2}', :t),"
                "        ('prod', 'orders', 1, 2, '{2,3,1}', '{2}', :t),"
                "        ('prod', 'payments', 0, NULL, '{3}', '{3}', :t)"
            ),
            {"t": T1},
        )
        # An older evaluation: nothing of it may show.
        _insert(conn, "derived_cluster", T0, [{"brokers": 9}])
        _insert(conn, "derived_group_partition", T0, [_gp("billing", "orders", 0, 100, 99.0, None)])
        _insert(conn, "derived_group", T0, [{"group_id": "gone", "offset_lag": 5, "max_offset_lag": 5}])
        _insert(
            conn, "derived_lag_objective", T0, [_objective("billing", "ledger-fresh", budget_remaining=0.1)]
        )

        _insert(conn, "derived_cluster", T1, [{
            "brokers": 3, "brokers_down": 1, "partitions": 3, "offline_partitions": 1,
            "under_replicated_partitions": 2, "under_min_isr_partitions": 1, "max_leader_imbalance": 1.5,
            "collection_age_seconds": 12.5, "unreachable": False,
        }])  # fmt: skip
        _insert(conn, "derived_group_partition", T1, [
            _gp("billing", "orders", 0, 250, 40.0, 3600.0),
            _gp("billing", "orders", 1, 50, 10.0, 7200.0),
            _gp("billing", "payments", 0, 0, 0.0, None),
            _gp("audit", "orders", 0, 7, None, None),
        ])  # fmt: skip
        _insert(conn, "derived_group_topic", T1, [
            {"group_id": "billing", "topic": "orders", "offset_lag": 300, "max_offset_lag": 250,
             "max_lag_seconds": 40.0, "append_lag_seconds": 35.5, "commit_lag_seconds": 3.25,
             "time_since_last_commit_seconds": 5.0, "time_until_data_loss_seconds": 3600.0,
             "data_loss_occurred": False},
            {"group_id": "billing", "topic": "payments", "offset_lag": 0, "max_offset_lag": 0,
             "max_lag_seconds": 0.0, "append_lag_seconds": 0.0, "time_since_last_commit_seconds": 20.0,
             "data_loss_occurred": False},
            {"group_id": "audit", "topic": "orders", "offset_lag": 7, "max_offset_lag": 7,
             "data_loss_occurred": True},
        ])  # fmt: skip
        _insert(conn, "derived_group", T1, [
            {"group_id": "billing", "offset_lag": 300, "max_offset_lag": 250, "max_lag_seconds": 40.0,
             "members": 2, "status": "WARN", "group_state": "Stable", "consumers_needed": 3,
             "time_to_catch_up_seconds": 750.0, "catching_up": True},
            {"group_id": "audit", "offset_lag": 7, "max_offset_lag": 7, "members": 0, "status": "ERR",
             "group_state": "Empty", "catching_up": False},
        ])  # fmt: skip
        _insert(conn, "derived_lag_objective", T1, [
            _objective("billing", "ledger-fresh", burn_rate_5m=20.0, burn_rate_30m=4.0, burn_rate_1h=2.5,
                       burn_rate_6h=0.5, bad_minutes=12, recorded_minutes=1200, budget_remaining=0.9405,
                       compliance=99.0),
            # Its first minute not recorded yet: a budget, no compliance and no burn rate.
            _objective("audit", "ledger-fresh", budget_remaining=1.0),
        ])  # fmt: skip
        _insert(conn, "derived_partition", T1, [
            {"topic": "orders", "partition": 0, "size_bytes": 900, "retention_bytes": 1000,
             "retention_shortfall_seconds": 120.0, "replicas_lost": 1, "under_min_isr": False,
             "offline": False},
            {"topic": "orders", "partition": 1, "size_bytes": 100, "retention_bytes": 1000,
             "retention_shortfall_seconds": 0.0, "replicas_lost": 2, "under_min_isr": True,
             "offline": False},
            {"topic": "payments", "partition": 0, "size_bytes": 50, "retention_shortfall_seconds": 0.0,
             "replicas_lost": 0, "under_min_isr": False, "offline": True},
        ])  # fmt: skip
        _insert(conn, "derived_topic", T1, [
            {"topic": "orders", "partitions": 2, "size_bytes": 1000, "max_size_ratio": 0.9,
             "min_time_coverage_seconds": 500.0, "retention_shortfall_seconds": 120.0,
             "max_replicas_lost": 2, "under_replicated_partitions": 2, "under_min_isr_partitions": 1,
             "offline_partitions": 0, "min_time_until_data_loss_seconds": 3600.0},
            {"topic": "payments", "partitions": 1, "size_bytes": 50, "min_time_coverage_seconds": 60.0,
             "retention_shortfall_seconds": 0.0, "max_replicas_lost": 0, "under_replicated_partitions": 0,
             "under_min_isr_partitions": 0, "offline_partitions": 1},
        ])  # fmt: skip
        _insert(conn, "derived_broker", T1, [
            {"broker_id": 1, "up": True, "leaders": 2, "fair_share_leaders": 1.5, "leader_imbalance": 1.5,
             "non_preferred_leaders": 1, "disk_total_bytes": 1000, "disk_usable_bytes": 400,
             "disk_used_ratio": 0.6, "probe_successes": 90, "probe_failures": 0, "probe_failing": False,
             "probe_produce_latency_seconds": 0.004, "probe_end_to_end_latency_seconds": 0.02,
             "probe_commit_latency_seconds": 0.003},
            {"broker_id": 2, "up": True, "leaders": 1, "fair_share_leaders": 1.5, "leader_imbalance": 0.5,
             "non_preferred_leaders": 0, "probe_successes": 80, "probe_failures": 10, "probe_failing": True},
        ])  # fmt: skip
        # A share group (Kafka 4.1+), as the share_groups job writes it: two partitions, one member.
        conn.execute(
            text(
                "INSERT INTO share_group_support (cluster, available, sampled_at) VALUES ('prod', true, :t)"
            ),
            {"t": T1},
        )
        conn.execute(
            text("INSERT INTO share_group_states (cluster, group_id, sampled_at, state, members)"
                 " VALUES ('prod', 'workers', :t, 'Stable', 1)"),
            {"t": T1},
        )  # fmt: skip
        conn.execute(
            text("INSERT INTO share_group_offsets (cluster, sampled_at, group_id, topic, partition,"
                 " start_offset, end_offset, lag, lag_method)"
                 " VALUES ('prod', :t, 'workers', 'orders', 0, 10, 40, 30, 'broker'),"
                 "        ('prod', :t, 'workers', 'orders', 1, 5, 9, 4, 'broker')"),
            {"t": T1},
        )  # fmt: skip
    return engine


def _client(engine: Engine, **metrics: object) -> TestClient:
    settings = MetricsConfig.model_validate(metrics)
    return TestClient(create_app(engine, stale_after=timedelta(minutes=5), metrics=settings))


def scrape(client: TestClient) -> tuple[str, Samples]:
    response = client.get("/metrics")
    assert response.status_code == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return response.text, samples


def of(samples: Samples, name: str) -> dict[tuple[str, ...], float]:
    """The samples of `name` keyed by their label values in catalogue order."""
    labels = BY_NAME[name].labels
    return {
        tuple(dict(key)[label] for label in labels): value for (n, key), value in samples.items() if n == name
    }


def klg(*values: str) -> tuple[str, ...]:
    """Label values of a kafka-lag-go series in cluster 'prod': cluster, clustername, then the rest."""
    return ("prod", "prod", *values)


def test_kafka_lag_go_names_serve_the_latest_evaluation(filled: Engine) -> None:
    _, samples = scrape(_client(filled))

    assert of(samples, "kafka_consumer_group_lag_in_offsets") == {
        klg("billing", "orders", "0"): 250, klg("billing", "orders", "1"): 50,
        klg("billing", "payments", "0"): 0, klg("audit", "orders", "0"): 7,
    }  # fmt: skip
    assert of(samples, "kafka_consumer_group_lag_in_seconds") == {
        klg("billing", "orders", "0"): 40.0, klg("billing", "orders", "1"): 10.0,
        klg("billing", "payments", "0"): 0.0,
    }  # fmt: skip
    assert of(samples, "kafka_consumer_group_max_lag_in_offsets") == {klg("billing"): 250, klg("audit"): 7}
    assert of(samples, "kafka_consumer_group_max_lag_in_seconds") == {klg("billing"): 40.0}
    assert of(samples, "kafka_consumer_group_sum_lag_in_offsets") == {klg("billing"): 300, klg("audit"): 7}
    assert of(samples, "kafka_consumer_group_sum_lag_in_seconds") == {klg("billing"): 50.0}
    assert of(samples, "kafka_consumer_group_topic_max_lag_in_offsets") == {
        klg("billing", "orders"): 250, klg("billing", "payments"): 0, klg("audit", "orders"): 7,
    }  # fmt: skip
    assert of(samples, "kafka_consumer_group_topic_max_lag_in_seconds") == {
        klg("billing", "orders"): 40.0, klg("billing", "payments"): 0.0,
    }  # fmt: skip
    assert of(samples, "kafka_consumer_group_topic_sum_lag_in_offsets") == {
        klg("billing", "orders"): 300, klg("billing", "payments"): 0, klg("audit", "orders"): 7,
    }  # fmt: skip
    assert of(samples, "kafka_consumer_group_topic_sum_lag_in_seconds") == {
        klg("billing", "orders"): 50.0, klg("billing", "payments"): 0.0,
    }  # fmt: skip
    assert of(samples, "kafka_total_groups_checked") == {klg(): 2}, "'stage' has no evaluation: no series"


def test_our_metrics_serve_the_latest_evaluation(filled: Engine) -> None:
    _, samples = scrape(_client(filled))

    billing_orders = ("prod", "billing", "orders")
    assert of(samples, "kafka_health_group_topic_append_lag_seconds") == {
        billing_orders: 35.5, ("prod", "billing", "payments"): 0.0,
    }  # fmt: skip
    assert of(samples, "kafka_health_group_topic_commit_lag_seconds") == {billing_orders: 3.25}
    assert of(samples, "kafka_health_group_topic_time_until_data_loss_seconds") == {billing_orders: 3600.0}
    assert of(samples, "kafka_health_group_topic_data_loss_occurred") == {
        billing_orders: 0, ("prod", "billing", "payments"): 0, ("prod", "audit", "orders"): 1,
    }  # fmt: skip
    assert of(samples, "kafka_health_group_status") == {
        ("prod", "billing", "WARN"): 1,
        ("prod", "audit", "ERR"): 1,
    }
    assert of(samples, "kafka_health_group_members") == {("prod", "billing"): 2, ("prod", "audit"): 0}
    # The advice: billing's; audit, with no member, has none (no series, not a 0).
    assert of(samples, "kafka_health_group_consumers_needed") == {("prod", "billing"): 3}
    # The forecast: billing catches up in 12.5 min; audit does not gain (no time, not a 0).
    assert of(samples, "kafka_health_group_time_to_catch_up_seconds") == {("prod", "billing"): 750.0}
    assert of(samples, "kafka_health_group_catching_up") == {("prod", "billing"): 1, ("prod", "audit"): 0}

    # The lag objectives of the latest evaluation (the older one's budget of 0.1 must not show).
    ledger = ("prod", "billing", "ledger-fresh")
    fresh_audit = ("prod", "audit", "ledger-fresh")
    assert of(samples, "kafka_health_lag_objective_budget_remaining") == {ledger: 0.9405, fresh_audit: 1.0}
    assert of(samples, "kafka_health_lag_objective_compliance_ratio") == {ledger: pytest.approx(0.99)}
    assert of(samples, "kafka_health_lag_objective_target_ratio") == {
        ledger: pytest.approx(0.995), fresh_audit: pytest.approx(0.995),
    }  # fmt: skip
    assert of(samples, "kafka_health_lag_objective_bad_minutes") == {ledger: 12, fresh_audit: 0}
    assert of(samples, "kafka_health_lag_objective_burn_rate") == {
        (*ledger, "5m"): 20.0, (*ledger, "30m"): 4.0, (*ledger, "1h"): 2.5, (*ledger, "6h"): 0.5,
    }  # fmt: skip

    assert of(samples, "kafka_health_partition_retention_headroom_bytes") == {
        ("prod", "orders", "0"): 100, ("prod", "orders", "1"): 900,
    }  # fmt: skip
    assert of(samples, "kafka_health_partition_time_until_data_loss_seconds") == {
        ("prod", "orders", "0"): 3600.0, ("prod", "orders", "1"): 7200.0,
    }  # fmt: skip
    assert of(samples, "kafka_health_partition_replicas_lost") == {
        ("prod", "orders", "0"): 1, ("prod", "orders", "1"): 2, ("prod", "payments", "0"): 0,
    }  # fmt: skip
    assert of(samples, "kafka_health_partition_under_min_isr")[("prod", "orders", "1")] == 1
    assert of(samples, "kafka_health_partition_offline")[("prod", "payments", "0")] == 1

    assert of(samples, "kafka_health_topic_retention_headroom_bytes") == {("prod", "orders"): 100}
    assert of(samples, "kafka_health_topic_retention_shortfall_seconds") == {
        ("prod", "orders"): 120.0, ("prod", "payments"): 0.0,
    }  # fmt: skip
    assert of(samples, "kafka_health_topic_under_min_isr_partitions")[("prod", "orders")] == 1

    assert of(samples, "kafka_health_broker_up") == {("prod", "1"): 1, ("prod", "2"): 1, ("prod", "3"): 0}
    assert of(samples, "kafka_health_broker_leaders") == {("prod", "1"): 2, ("prod", "2"): 1}
    assert of(samples, "kafka_health_broker_disk_usable_bytes") == {("prod", "1"): 400}
    assert of(samples, "kafka_health_broker_probe_roundtrip_latency_seconds") == {("prod", "1"): 0.02}
    assert of(samples, "kafka_health_broker_probe_produce_latency_seconds") == {("prod", "1"): 0.004}
    assert of(samples, "kafka_health_broker_probe_commit_latency_seconds") == {("prod", "1"): 0.003}
    assert of(samples, "kafka_health_broker_probe_failing") == {("prod", "1"): 0, ("prod", "2"): 1}
    assert of(samples, "kafka_health_broker_probe_failures") == {("prod", "1"): 0, ("prod", "2"): 10}

    assert of(samples, "kafka_health_cluster_brokers_down") == {("prod",): 1}
    assert of(samples, "kafka_health_cluster_offline_partitions") == {("prod",): 1}
    assert of(samples, "kafka_health_cluster_evaluation_timestamp_seconds") == {("prod",): T1.timestamp()}

    assert samples["kafka_health_up", frozenset()] == 1
    assert samples["kafka_health_partition_series", frozenset()] == 7 + 16
    assert samples["kafka_health_partition_series_dropped", frozenset()] == 0


def test_every_family_served_is_catalogued_with_its_labels(filled: Engine) -> None:
    # A run and a delivery of this process, so that the process counters have series.
    RUNS.labels("prod", "offsets", "ok").inc()
    RUN_SECONDS.labels("prod", "offsets").observe(0.5)
    NOTIFICATIONS.labels("ops-slack", "failed").inc()
    NOTIFICATION_FAILURES.labels("ops-slack", "timeout").inc()
    PUSH_SAMPLES.labels("central", "sent").inc(3)
    PUSH_FAILURES.labels("central", "http_503").inc()
    PUSH_QUEUE.labels("central").set(1)
    # A probe round: one message made the round trip, one was produced and lost, one not produced.
    probe_metrics.observe("prod", [
        ProbeResult(0, 1, 0.004, 0.02, 0.003, None),
        ProbeResult(1, 2, 0.005, None, None, "consume failed: the message did not come back"),
        ProbeResult(2, 3, None, None, None, "produce failed: no acknowledgement"),
    ])  # fmt: skip
    body, _ = scrape(_client(filled))

    served = assert_catalogued(body)
    assert {spec.name for spec in CATALOGUE} - served == set(), (
        "catalogued, not served though the data exists"
    )
    assert "kafka_health_collection_runs_created{" in body, "the creation times are served and checked too"


def test_the_cap_keeps_the_most_lagging_series_counts_the_rest_and_warns_once(
    filled: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client(filled, max_partition_series=2)
    with caplog.at_level(logging.WARNING, logger="monitor.expose.metrics.prometheus"):
        _, samples = scrape(client)
        scrape(client)

    partition_level = {"kafka_consumer_group_lag_in_offsets", "kafka_consumer_group_lag_in_seconds"}
    partition_level |= {spec.name for spec in PARTITIONS}
    served = {key: value for key, value in samples.items() if key[0] in partition_level}
    assert {(name, dict(labels)["partition"]) for name, labels in served} == {
        ("kafka_consumer_group_lag_in_offsets", "0"),
        ("kafka_consumer_group_lag_in_seconds", "0"),
    }
    assert of(samples, "kafka_consumer_group_lag_in_offsets") == {klg("billing", "orders", "0"): 250}
    assert samples["kafka_health_partition_series", frozenset()] == 2
    assert samples["kafka_health_partition_series_dropped", frozenset()] == 7 + 16 - 2
    assert of(samples, "kafka_consumer_group_max_lag_in_offsets") == {klg("billing"): 250, klg("audit"): 7}
    warnings = [r for r in caplog.records if "max_partition_series" in r.getMessage()]
    assert len(warnings) == 1, "one warning when the cap starts cutting, not one per scrape"
    assert "(2) left out 21 partition-level series" in warnings[0].getMessage()


def test_partition_series_can_be_switched_off(filled: Engine) -> None:
    _, samples = scrape(_client(filled, partition_series=False))
    names = {name for name, _ in samples}
    assert "kafka_consumer_group_lag_in_offsets" not in names
    assert not names & {spec.name for spec in PARTITIONS}
    assert "kafka_health_partition_series_dropped" not in names
    assert of(samples, "kafka_consumer_group_topic_max_lag_in_offsets")[klg("billing", "orders")] == 250
    assert samples["kafka_health_up", frozenset()] == 1


def _assert_state_missing_and_process_served(samples: Samples) -> None:
    names = {name for name, _ in samples}
    assert samples["kafka_health_up", frozenset()] == 0
    assert set(of(samples, "kafka_health_scrape_error").values()) == {1}
    assert not names & {spec.name for spec in CATALOGUE if spec.query}
    assert "python_info" in names and "process_start_time_seconds" in names


def test_a_database_that_is_down_gives_up_0_and_the_process_metrics() -> None:
    closed = make_engine("postgresql+psycopg://nobody@127.0.0.1:9/none", check=False, connect_timeout=2)
    try:
        body, samples = scrape(_client(closed))
    finally:
        closed.dispose()
    _assert_state_missing_and_process_served(samples)
    assert "kafka_health_notifications_total" in body or "# TYPE kafka_health_notifications_total" in body


@pytest.fixture
def locked(filled: Engine) -> Iterator[None]:
    """derived_cluster locked by another transaction: every view waits on it."""
    with table_locked(filled, "derived_cluster"):
        yield


def test_a_slow_database_cannot_hang_a_scrape(filled: Engine, locked: None) -> None:
    started = time.monotonic()
    _, samples = scrape(_client(filled, scrape_timeout_seconds=1))
    assert time.monotonic() - started < 5
    _assert_state_missing_and_process_served(samples)
