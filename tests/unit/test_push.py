"""The push section's checks, the series a target selects, the remote-write encoding and the
CloudWatch request sizes; no server (tests/integration/test_push.py talks to the real ones)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from prometheus_client.metrics_core import GaugeMetricFamily
from pydantic import ValidationError

from monitor.core.errors import ConfigError
from monitor.core.settings import PushConfig, Settings
from monitor.expose.metrics.push.cloudwatch import MAX_DATUMS, batches, datum, unit_of
from monitor.expose.metrics.push.remote_write import decode, encode
from monitor.expose.metrics.push.series import Series, select
from monitor.expose.metrics.push.stage import check_push

LAG = "kafka_consumer_group_sum_lag_in_offsets"


def _family() -> GaugeMetricFamily:
    family = GaugeMetricFamily(LAG, "lag", labels=["cluster", "clustername", "group"])
    family.add_metric(["east", "east", "a"], 5)
    family.add_metric(["west", "west", "b"], 6)
    family.add_metric(["east", "east", "nan"], math.nan)
    return family


def test_push_is_off_unless_configured() -> None:
    assert Settings().push.targets() == []


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"remote_write": [{"name": "p", "url": "prometheus:9090"}]}, "should match pattern"),
        ({"remote_write": [{"name": "p", "url": "http://a/w"}, {"name": "p", "url": "http://b/w"}]},
         "push target name 'p' is used twice"),
        ({"remote_write": [{"name": "p", "url": "http://a/w", "external_labels": {"__x": "y"}}]},
         "not a Prometheus label name"),
        ({"cloudwatch": [{"name": "cw", "storage_resolution": 5}]}, "storage_resolution"),
        ({"cloudwatch": [{"name": "cw", "metrics": []}]}, "at least 1 item"),
        ({"cloudwatch": [{"name": "has space"}]}, "should match pattern"),
    ],
)  # fmt: skip
def test_a_bad_push_section_names_what_is_wrong(section: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PushConfig.model_validate(section)


def test_an_unknown_metric_is_refused_with_the_closest_name() -> None:
    config = PushConfig.model_validate(
        {"cloudwatch": [{"name": "cw", "metrics": ["kafka_consumer_group_sum_lag_in_offset"]}]}
    )
    with pytest.raises(
        ConfigError, match=r"push.cloudwatch\[cw\].metrics: .* did you mean 'kafka_consumer_group_sum"
    ):
        check_push(config)


def test_a_target_selects_its_metrics_and_clusters_and_skips_values_no_receiver_takes() -> None:
    picked = select([_family()], [LAG], ["east"])
    assert picked == [Series(LAG, (("cluster", "east"), ("clustername", "east"), ("group", "a")), 5.0)]
    assert len(select([_family()], [LAG], [])) == 2
    assert select([_family()], ["other"], []) == []


def test_remote_write_labels_are_sorted_with_the_name_and_the_external_labels() -> None:
    series = [Series(LAG, (("group", "a"), ("cluster", "east")), 5.0)]
    ((labels, samples),) = decode(encode(series, 1234, {"monitor": "eu", "group": "not-over-ours"}))
    assert list(labels) == ["__name__", "cluster", "group", "monitor"]
    assert labels["group"] == "a"  # a series' own label wins over an external one
    assert samples == [(5.0, 1234)]


def test_cloudwatch_requests_stay_within_the_api_limits() -> None:
    now = datetime.now(UTC)
    data = [datum(Series(LAG, (("cluster", "c"), ("group", f"g{n}")), n), now, 60) for n in range(2_345)]
    sizes = [len(batch) for batch in batches(data)]
    assert sizes == [MAX_DATUMS, MAX_DATUMS, 345]
    wide = [datum(Series(LAG, (("group", "g" * 1000 + str(n)),), 1), now, 60) for n in range(1_500)]
    assert all(len(batch) < MAX_DATUMS for batch in batches(wide))  # ~1 kB each: cut by size
    assert sum(len(batch) for batch in batches(wide)) == 1_500
    assert datum(Series(LAG, (("clustername", "c"), ("group", "")), 1), now, 60)["Dimensions"] == []
    assert [unit_of("x_seconds"), unit_of("x_bytes"), unit_of(LAG)] == ["Seconds", "Bytes", "Count"]


def test_the_demo_pushes_to_its_prometheus_beside_what_is_configured() -> None:
    from monitor.devtools.demo import with_prometheus_push

    configured = Settings(push={"remote_write": [{"name": "mine", "url": "http://a:9090/api/v1/write"}]})
    settings = with_prometheus_push(configured, "http://127.0.0.1:9090/api/v1/write")
    assert [t.name for t in settings.push.remote_write] == ["mine", "demo-prometheus"]
    assert settings.push.remote_write[1].external_labels == {"source": "remote_write"}
    check_push(settings.push)
