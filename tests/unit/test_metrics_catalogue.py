"""The metric catalogue: well-formed, consistent with the state queries, and equal to the
generated docs/metrics.md; the `metrics:` settings refuse what cannot work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.core.settings import MetricsConfig, Settings
from monitor.expose.metrics.catalogue import CATALOGUE, STATE, VIEWS, render_markdown
from monitor.expose.metrics.state_queries import LABEL_COLUMNS, QUERIES

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def test_names_are_unique_and_valid() -> None:
    names = [spec.name for spec in CATALOGUE]
    assert len(names) == len(set(names))
    assert all(NAME.match(name) for name in names)
    assert all(spec.name.endswith("_total") for spec in CATALOGUE if spec.type == "counter")
    ours = [spec for spec in CATALOGUE if spec.origin == "ours"]
    assert all(spec.name.startswith("kafka_health_") for spec in ours)


def test_every_state_metric_names_a_query_its_labels_can_be_read_from() -> None:
    by_name = {query.name: query for query in QUERIES}
    for spec in STATE:
        assert spec.query in by_name and spec.query in VIEWS, spec.name
        assert spec.column and re.search(rf"\b{spec.column}\b", by_name[spec.query].sql), spec.name
        for label in spec.labels:
            assert re.search(rf"\b{LABEL_COLUMNS[label]}\b", by_name[spec.query].sql), (spec.name, label)


def test_kafka_lag_go_names_keep_their_labels() -> None:
    compatible = {spec.name: spec.labels for spec in CATALOGUE if spec.origin == "kafka-lag-go"}
    assert compatible["kafka_consumer_group_lag_in_offsets"] == (
        "cluster", "clustername", "group", "topic", "partition",
    )  # fmt: skip
    assert all("clustername" in labels for labels in compatible.values())
    assert len(compatible) == 11


def test_docs_are_generated_from_the_catalogue() -> None:
    assert (ROOT / "docs" / "metrics.md").read_text() == render_markdown(), (
        "docs/metrics.md is out of date: python -m monitor.expose.metrics.catalogue > docs/metrics.md"
    )


def test_metrics_settings_are_validated() -> None:
    assert Settings().metrics == MetricsConfig()
    assert Settings(metrics={"max_partition_series": 2}).metrics.max_partition_series == 2
    for bad in (
        {"max_partition_series": 0},
        {"scrape_timeout_seconds": 0},
        {"partition_cap": 5},
        {"snapshot_check_seconds": 0},
    ):
        with pytest.raises(ValidationError):
            MetricsConfig.model_validate(bad)


def test_partition_series_are_switched_off_per_cluster() -> None:
    settings = Settings(clusters=[
        {"name": "huge", "bootstrap_servers": ["k:9092"], "partition_series": False},
        {"name": "small", "bootstrap_servers": ["k2:9092"]},
    ])  # fmt: skip
    assert [c.partition_series for c in settings.clusters] == [False, True]
    with pytest.raises(ValidationError, match="partition_series"):
        Settings(clusters=[{"name": "x", "bootstrap_servers": ["k:9092"], "partition_series": "sometimes"}])
