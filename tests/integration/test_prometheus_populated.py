"""`/metrics` over a database filled by real collection runs and a real evaluation: every family
served is catalogued with its labels, and the kafka-lag-go names carry the known lag of each
group."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from monitor.devtools.servers import PrometheusServer
from monitor.expose.web.app import create_app
from tests.fixtures.populated import Populated
from tests.fixtures.scrapes import assert_catalogued


def test_a_scrape_of_real_data_matches_the_catalogue(populated: Populated) -> None:
    client = TestClient(create_app(populated.engine, stale_after=timedelta(minutes=5)))
    response = client.get("/metrics")
    assert response.status_code == 200
    served = assert_catalogued(response.text)
    families = {family.name: family for family in text_string_to_metric_families(response.text)}

    def values(name: str) -> dict[tuple[str, ...], float]:
        return {
            (s.labels["group"], s.labels["topic"], s.labels["partition"]): s.value
            for s in families[name].samples
            if s.labels["cluster"] == populated.cluster
        }

    offsets = values("kafka_consumer_group_lag_in_offsets")
    seconds = values("kafka_consumer_group_lag_in_seconds")
    for role, group in populated.groups.items():
        assert offsets[group.name, group.topic, "0"] == group.lag, role
    lagging = populated.groups["lagging"]
    # Committed 10 of 50 records appended 24 s apart from 20 minutes before the fixture started.
    assert 15 * 60 < seconds[lagging.name, lagging.topic, "0"] < 30 * 60
    caught_up = populated.groups["caught_up"]
    assert seconds[caught_up.name, caught_up.topic, "0"] == 0

    assert families["kafka_health_up"].samples[0].value == 1
    for expected in ("kafka_consumer_group_max_lag_in_seconds", "kafka_health_group_topic_append_lag_seconds",
                     "kafka_health_topic_time_until_data_loss_seconds", "kafka_health_broker_leaders",
                     "kafka_health_broker_disk_usable_bytes", "kafka_health_cluster_evaluation_timestamp_seconds",
                     "kafka_health_collection_runs_total"):  # fmt: skip
        assert expected in served, expected


def test_a_real_prometheus_scrapes_the_lag_of_each_group(
    populated: Populated, scraping_prometheus: PrometheusServer
) -> None:
    """Debian's Prometheus scrapes the served app's /metrics; PromQL returns the known lags."""
    for role, group in populated.groups.items():
        promql = (
            f'sum by (group) (kafka_consumer_group_lag_in_offsets{{cluster="{populated.cluster}",'
            f'group="{group.name}"}})'
        )
        (answer,) = scraping_prometheus.query(promql)
        assert float(answer["value"][1]) == group.lag, role
    (health,) = scraping_prometheus.query("kafka_health_up")
    assert health["value"][1] == "1"
