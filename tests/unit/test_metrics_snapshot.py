"""The snapshot's encoding without a database: the cached gzip head continued by each scrape's
tail is one valid gzip member equal to the plain text, and which Accept-Encoding headers get it."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest
from prometheus_client.metrics_core import GaugeMetricFamily

from monitor.expose.metrics.prometheus import StateRead
from monitor.expose.metrics.snapshot import build, freshened
from monitor.expose.web.app import _accepts_gzip
from monitor.store.fresh_lag import FreshLag


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


def _lag_state() -> StateRead:
    partitions = GaugeMetricFamily(
        "kafka_consumer_group_lag_in_offsets",
        "lag",
        labels=["cluster", "clustername", "group", "topic", "partition"],
    )
    summed = GaugeMetricFamily(
        "kafka_consumer_group_sum_lag_in_offsets", "sum", labels=["cluster", "clustername", "group"]
    )
    seconds = GaugeMetricFamily(
        "kafka_consumer_group_max_lag_in_seconds", "s", labels=["cluster", "clustername", "group"]
    )
    for group in ("g0", "g1", "g2"):
        for partition in (0, 1):
            partitions.add_metric(["prod", "prod", group, "t", str(partition)], 10.0)
        summed.add_metric(["prod", "prod", group], 20.0)
        seconds.add_metric(["prod", "prod", group], 7.0)
    return StateRead((partitions, summed, seconds), ("group",), frozenset({"group"}), 0.1, 6, 0)


def test_fresh_offset_lag_replaces_the_lines_of_the_groups_that_committed() -> None:
    keep = ["kafka_consumer_group_sum_lag_in_offsets"]
    snapshot = build(_lag_state(), (), keep=keep)
    at = datetime(2026, 6, 1, tzinfo=UTC)
    lags = {
        ("prod", "g1"): {("t", 0): FreshLag(6, 10, 4, at, at, at), ("t", 1): FreshLag(9, 10, 1, at, at, at)}
    }
    fresh = freshened(snapshot, lags, keep)
    lines = set(fresh.text.decode().splitlines())
    g1 = 'cluster="prod",clustername="prod",group="g1"'
    assert f'kafka_consumer_group_lag_in_offsets{{{g1},partition="0",topic="t"}} 4.0' in lines
    assert f"kafka_consumer_group_sum_lag_in_offsets{{{g1}}} 5.0" in lines
    assert f"kafka_consumer_group_max_lag_in_seconds{{{g1}}} 7.0" in lines, (
        "not an offset lag: the evaluation's"
    )
    assert (
        'kafka_consumer_group_sum_lag_in_offsets{cluster="prod",clustername="prod",group="g0"} 20.0' in lines
    )
    assert len(lines) == len(set(snapshot.text.decode().splitlines())), "the same series, new values"
    assert gzip.decompress(fresh.body(b"tail\n", gzip=True)) == fresh.text + b"tail\n"
    assert snapshot.text.count(b"20.0") == 3, "the snapshot it came from is left as it was"
    (summed,) = fresh.families
    assert sorted(s.value for s in summed.samples) == [5.0, 20.0, 20.0]


def _lag_family(values: dict[tuple[str, int], float], group: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "kafka_consumer_group_lag_in_offsets",
        "lag",
        labels=["cluster", "clustername", "group", "topic", "partition"],
    )
    for (topic, partition), value in values.items():
        family.add_metric(["prod", "prod", group, topic, str(partition)], value)
    return family


def test_fresh_lines_are_the_lines_a_whole_encoding_of_the_new_values_gives() -> None:
    # Label values the text format escapes (a quote, a backslash, a newline) and one outside ASCII.
    group, topic = 'pay"ments\\eu\nblue', "töpic"
    before = {(topic, 0): 10.0, (topic, 1): 2.5e20}
    snapshot = build(
        StateRead((_lag_family(before, group),), ("group",), frozenset({"group"}), 0.1, 2, 0), ()
    )
    at = datetime(2026, 6, 1, tzinfo=UTC)
    once = freshened(snapshot, {("prod", group): {(topic, 0): FreshLag(6, 10, 4, at, at, at)}}, ())
    twice = freshened(once, {("prod", group): {(topic, 1): FreshLag(0, 3, 3, at, at, at)}}, ())

    def whole(values: dict[tuple[str, int], float]) -> bytes:
        return build(
            StateRead((_lag_family(values, group),), ("group",), frozenset({"group"}), 0.1, 2, 0), ()
        ).text

    assert once.text == whole({(topic, 0): 4.0, (topic, 1): 2.5e20})
    assert twice.text == whole({(topic, 0): 4.0, (topic, 1): 3.0})
    assert b"\\n" in twice.text and b'\\"' in twice.text, "the labels stay escaped"
