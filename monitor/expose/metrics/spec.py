"""The shape of a catalogued metric (`catalogue.py` lists them): its name, type, labels, meaning,
origin and the state query column its value comes from, and the label sets the catalogue uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter", "histogram"]
Origin = Literal["kafka-lag-go", "kminion", "ours", "prometheus_client"]

KLG_GROUP_PARTITION = ("cluster", "clustername", "group", "topic", "partition")
KLG_GROUP_TOPIC = ("cluster", "clustername", "group", "topic")
KLG_GROUP = ("cluster", "clustername", "group")
GROUP_TOPIC = ("cluster", "group", "topic")
GROUP = ("cluster", "group")
OBJECTIVE = ("cluster", "group", "objective")
PARTITION = ("cluster", "topic", "partition")
TOPIC = ("cluster", "topic")
BROKER = ("cluster", "broker")
CLUSTER = ("cluster",)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    """As queried in PromQL (counters end in `_total`)."""
    type: MetricType
    labels: tuple[str, ...]
    meaning: str
    origin: Origin
    query: str | None = None
    """The state query the value comes from; None for process metrics."""
    column: str | None = None

    @property
    def family(self) -> str:
        """The family name in the exposition's TYPE line parsed back (counters lose `_total`)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name


def klg(name: str, labels: tuple[str, ...], query: str, column: str, meaning: str) -> MetricSpec:
    """A gauge of kafka-lag-go's, under its own name."""
    return MetricSpec(name, "gauge", labels, meaning, "kafka-lag-go", query, column)


def ours(name: str, labels: tuple[str, ...], query: str, column: str, meaning: str) -> MetricSpec:
    """A gauge of kafka-health's own, named `kafka_health_<name>`."""
    return MetricSpec(f"kafka_health_{name}", "gauge", labels, meaning, "ours", query, column)
