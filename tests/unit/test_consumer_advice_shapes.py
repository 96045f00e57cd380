"""The consumer advice as `/metrics` and the API serve it: `kafka_health_group_consumers_needed`
per (cluster, group), read from the group query, absent where the evaluation gives no advice; the
group resource's advice fields and their documented meanings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client.metrics_core import GaugeMetricFamily
from pydantic import TypeAdapter

from monitor.core.derived import columns_of
from monitor.expose.metrics.catalogue import STATE
from monitor.expose.metrics.prometheus import _add, _Budget
from monitor.expose.metrics.state_queries import LABEL_COLUMNS, QUERIES
from monitor.expose.read.lag import GroupDetail, GroupSummary

NAME = "kafka_health_group_consumers_needed"
ADVICE = ("consumers_needed", "advice_limited_by", "hot_topic", "hot_partition")


def test_the_metric_is_a_per_group_gauge_of_the_group_query() -> None:
    spec = next(spec for spec in STATE if spec.name == NAME)
    assert (spec.type, spec.labels, spec.query, spec.column) == (
        "gauge",
        ("cluster", "group"),
        "group",
        "consumers_needed",
    )
    group_query = next(query for query in QUERIES if query.name == "group")
    assert "consumers_needed" in group_query.statement()


def _group_row(group: str, **values: Any) -> dict[str, Any]:
    query = next(query for query in QUERIES if query.name == "group")
    row: dict[str, Any] = dict.fromkeys((spec.column for spec in query.specs if spec.column), None)
    row |= {LABEL_COLUMNS["cluster"]: "c1", LABEL_COLUMNS["group"]: group, **values}
    return row


@pytest.mark.parametrize(
    ("needed", "series"),
    [
        (3, [({"cluster": "c1", "group": "billing"}, 3.0)]),
        (None, []),
        (0, [({"cluster": "c1", "group": "billing"}, 0.0)]),
    ],
    ids=["advice", "no-advice-no-series", "zero-is-a-value"],
)
def test_a_group_row_gives_the_series_only_with_advice(
    needed: int | None, series: list[tuple[dict[str, str], float]]
) -> None:
    families = {spec.name: GaugeMetricFamily(spec.name, spec.meaning, labels=spec.labels) for spec in STATE}
    query = next(query for query in QUERIES if query.name == "group")
    _add(families, query, [_group_row("billing", consumers_needed=needed, members=1)], _Budget(10))
    assert [(s.labels, s.value) for s in families[NAME].samples] == series


def test_the_group_resource_has_the_advice_with_its_meanings() -> None:
    schema = TypeAdapter(GroupDetail).json_schema()
    summary = schema["$defs"]["GroupSummary"]["properties"]
    meanings = columns_of("group")
    for field in ADVICE:
        assert summary[field]["description"] == meanings[field].meaning, field
    assert {"type": "integer"} in summary["consumers_needed"]["anyOf"]


def test_the_group_resource_serializes_the_advice() -> None:
    values: dict[str, Any] = dict.fromkeys(GroupSummary.__dataclass_fields__)
    values |= {"group_id": "billing", "evaluated_at": datetime(2026, 11, 29, tzinfo=UTC)}
    values |= {
        "consumers_needed": 3,
        "advice_limited_by": "hot_partition",
        "hot_topic": "orders",
        "hot_partition": 7,
    }
    dumped = TypeAdapter(GroupSummary).dump_python(GroupSummary(**values), mode="json")
    assert {k: dumped[k] for k in ADVICE} == {
        "consumers_needed": 3, "advice_limited_by": "hot_partition", "hot_topic": "orders", "hot_partition": 7,
    }  # fmt: skip
