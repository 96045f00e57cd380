"""The snapshot's text format: `text_format.encode` writes the bytes prometheus_client's
`generate_latest` writes (odd label values, every kind of value, and the families it hands over
to it), and the fresh offset lag overlay sums and takes the largest per topic and per group."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from monitor.expose.metrics.fresh import LagSection
from monitor.expose.metrics.text_format import Families, encode, go_int
from monitor.store.fresh_lag import FreshLag

ODD = ["", "plain", 'say "hi"', "back\\slash", "two\nlines", "tab\there", "ünïcødé 漢字", "{}=,", "\\n"]
VALUES = [0.0, 1.0, -3.0, 2.5, 1e21, 1.5e-7, 123456789012.0, math.inf, -math.inf, math.nan]


def _gauges() -> list[Metric]:
    rng = random.Random(7)
    plain = GaugeMetricFamily("kafka_health_plain", "No labels.\nTwo lines \\ of help.", value=3)
    labelled = GaugeMetricFamily("kafka_health_labelled", "Labels.", labels=["topic", "cluster", "group"])
    for n in range(200):
        labelled.add_metric([rng.choice(ODD), f"c{n}", rng.choice(ODD)], rng.choice(VALUES))
    shared = GaugeMetricFamily("kafka_health_shared", "Labels shared by samples.", labels=["a", "b"])
    labels = {"b": 'x"y', "a": "1"}
    shared.samples += [Sample("kafka_health_shared", labels, float(v)) for v in range(3)]
    return [plain, labelled, shared, GaugeMetricFamily("kafka_health_empty", "No samples.", labels=["a"])]


def test_gauges_are_written_as_generate_latest_writes_them() -> None:
    families = _gauges()
    assert encode(families) == generate_latest(Families(families))


@pytest.mark.parametrize(
    "family",
    [
        CounterMetricFamily("kafka_health_sent", "A counter.", value=4),
        GaugeMetricFamily("kafka_health_at", "A timestamp.", labels=["a"]),
        GaugeMetricFamily("kafka_health_odd", "A label name to escape.", labels=["a.b"]),
        GaugeMetricFamily("kafka_health_g", "A _created sample.", labels=[]),
        GaugeMetricFamily("kafka_health_unicode_lätt", "A metric name to escape.", value=1),
    ],
    ids=["counter", "timestamp", "label-name", "created", "metric-name"],
)
def test_what_only_generate_latest_writes_is_handed_to_it(family: Metric) -> None:
    if family.name == "kafka_health_at":
        family.add_metric(["x"], 1.0, timestamp=1_700_000_000.5)
    elif family.name == "kafka_health_odd":
        family.add_metric(["x"], 1.0)
    elif family.name == "kafka_health_g":
        family.samples.append(Sample("kafka_health_g_created", {}, 1_700_000_000.0))
        family.samples.append(Sample("kafka_health_g", {}, 2.0))
    assert encode([family, *_gauges()]) == generate_latest(Families([family, *_gauges()]))


def _lag_families() -> list[GaugeMetricFamily]:
    """One group on two topics (two partitions each) with the evaluation's offset lag 1 everywhere."""
    base = {"cluster": "c", "group": "g"}
    partition = GaugeMetricFamily(
        "kafka_consumer_group_lag_in_offsets", "x", labels=["cluster", "group", "topic", "partition"]
    )
    topic_sum = GaugeMetricFamily(
        "kafka_consumer_group_topic_sum_lag_in_offsets", "x", labels=["cluster", "group", "topic"]
    )
    topic_max = GaugeMetricFamily(
        "kafka_consumer_group_topic_max_lag_in_offsets", "x", labels=["cluster", "group", "topic"]
    )
    group_sum = GaugeMetricFamily("kafka_consumer_group_sum_lag_in_offsets", "x", labels=["cluster", "group"])
    group_max = GaugeMetricFamily("kafka_consumer_group_max_lag_in_offsets", "x", labels=["cluster", "group"])
    for topic in ("a", "b"):
        for p in (0, 1):
            partition.add_metric([base["cluster"], base["group"], topic, str(p)], 1)
        topic_sum.add_metric([base["cluster"], base["group"], topic], 2)
        topic_max.add_metric([base["cluster"], base["group"], topic], 1)
    group_sum.add_metric([base["cluster"], base["group"]], 4)
    group_max.add_metric([base["cluster"], base["group"]], 1)
    return [partition, topic_sum, topic_max, group_sum, group_max]


def test_the_overlay_sums_and_takes_the_largest_per_topic_and_group() -> None:
    at = datetime(2026, 6, 1, tzinfo=UTC)
    fresh = {("c", "g"): {("a", 0): FreshLag(1, 8, 7, at, at, at), ("a", 1): FreshLag(1, 4, 3, at, at, at)}}
    section = LagSection(_lag_families()).overlaid(fresh)
    values = {
        (f.name, s.labels.get("topic"), s.labels.get("partition")): s.value
        for f in text_string_to_metric_families(section.text().decode())
        for s in f.samples
    }
    assert values == {
        ("kafka_consumer_group_lag_in_offsets", "a", "0"): 7,
        ("kafka_consumer_group_lag_in_offsets", "a", "1"): 3,
        ("kafka_consumer_group_lag_in_offsets", "b", "0"): 1,  # no fresh lag: the evaluation's
        ("kafka_consumer_group_lag_in_offsets", "b", "1"): 1,
        ("kafka_consumer_group_topic_sum_lag_in_offsets", "a", None): 10,
        ("kafka_consumer_group_topic_max_lag_in_offsets", "a", None): 7,
        ("kafka_consumer_group_topic_sum_lag_in_offsets", "b", None): 2,
        ("kafka_consumer_group_topic_max_lag_in_offsets", "b", None): 1,
        ("kafka_consumer_group_sum_lag_in_offsets", None, None): 10,  # of the partitions read fresh
        ("kafka_consumer_group_max_lag_in_offsets", None, None): 7,
    }


@pytest.mark.parametrize(
    "value",
    [0, 7, -1, 999_999, 1_000_000, 1_000_001, 10_000_001, 1_234_567, 99_999_999_999_999,
     10**15 - 1, 10**15, -(10**15) + 1, -(10**17), 2**53 + 1, 10**20]
    + [random.Random(3).randrange(-(10**16), 10**16) for _ in range(300)],
)  # fmt: skip
def test_a_whole_number_is_written_as_prometheus_client_writes_its_float(value: int) -> None:
    assert go_int(value) == floatToGoString(float(value))


def test_the_overlay_rewrites_only_the_values_that_changed() -> None:
    """A group's lines keep their names and labels, odd ones too; a value that stays keeps its
    line (and sample) as it was, and a group whose values all stay is the same section's."""
    at = datetime(2026, 6, 1, tzinfo=UTC)
    family = GaugeMetricFamily(
        "kafka_consumer_group_lag_in_offsets", "x", labels=["cluster", "group", "topic", "partition"]
    )
    for partition, lag in enumerate((5, 2_500_000, 9)):
        family.add_metric(["c", 'g "odd" \n one', "t w", str(partition)], lag)
    section = LagSection([family])
    same = {("c", 'g "odd" \n one'): {("t w", 0): FreshLag(1, 6, 5, at, at, at)}}
    assert section.overlaid(same).text() == section.text()
    moved = {
        ("c", 'g "odd" \n one'): {
            ("t w", 0): FreshLag(1, 6, 5, at, at, at),
            ("t w", 1): FreshLag(1, 3_000_001, 3_000_000, at, at, at),
        }
    }
    overlaid = section.overlaid(moved)
    before, after = section.text().splitlines(), overlaid.text().splitlines()
    line = b'kafka_consumer_group_lag_in_offsets{cluster="c",group="g \\"odd\\" \\n one",partition="1",topic="t w"}'
    assert [(a, b) for a, b in zip(before, after, strict=True) if a != b] == [
        (line + b" 2.5e+06", line + b" 3e+06")
    ]
    assert overlaid.text() == generate_latest(Families(overlaid.families({family.name})))
    assert [s.value for s in overlaid.families({family.name})[0].samples] == [5, 3_000_000, 9]
