"""The snapshot's encoding without a database: the cached gzip head continued by each scrape's
tail is one valid gzip member equal to the plain text, and which Accept-Encoding headers get it."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest
from prometheus_client.metrics_core import GaugeMetricFamily

from monitor.expose.metrics.prometheus import StateRead
from monitor.expose.metrics.snapshot import build
from monitor.expose.web.app import _accepts_gzip


def _state(groups: int) -> StateRead:
    family = GaugeMetricFamily("kafka_consumer_group_max_lag_in_offsets", "lag", labels=["cluster", "group"])
    for n in range(groups):
        family.add_metric(["prod", f"group-{n}"], float(n))
    return StateRead((family,), ("group",), frozenset({"group"}), 0.1, 0, 0)


def test_the_gzip_answer_is_the_plain_answer_compressed_and_can_be_served_again() -> None:
    snapshot = build(_state(5_000), (("prod", datetime(2026, 6, 1, tzinfo=UTC)),))
    tail = b"# TYPE kafka_health_up gauge\nkafka_health_up 1.0\n"
    plain = snapshot.body(tail, gzip=False)
    assert plain.startswith(b"# HELP kafka_consumer_group_max_lag_in_offsets") and plain.endswith(tail)
    assert b'group="group-4999"' in plain
    first, second = snapshot.body(tail, gzip=True), snapshot.body(b"other\n", gzip=True)
    assert gzip.decompress(first) == plain
    assert gzip.decompress(second) == snapshot.text + b"other\n", "the cached head is not used up"
    assert len(first) < len(plain) / 4
    assert snapshot.families == ()


def test_the_families_named_in_keep_are_kept_for_the_push_targets() -> None:
    snapshot = build(_state(3), (), keep=["kafka_consumer_group_max_lag_in_offsets"])
    assert [len(family.samples) for family in snapshot.families] == [3]


@pytest.mark.parametrize(
    ("header", "gzip_it"),
    [
        ("gzip", True),
        ("gzip, deflate", True),
        ("deflate, GZIP;q=0.5", True),
        ("gzip;q=0", False),
        ("identity", False),
        ("", False),
        ("x-gzip-not", False),
    ],
)
def test_gzip_is_used_when_the_scraper_accepts_it(header: str, gzip_it: bool) -> None:
    assert _accepts_gzip(header) is gzip_it
