"""The offset lag series of the `/metrics` snapshot as fresh as the store holds them, between two
evaluations.

A build reads the newest evaluation, so its offset lag would move only once per evaluation, while
the commit stream stores a commit within about a second. Between builds, each check of the
snapshot (`snapshot.MetricsSnapshot.refresh`) asks which groups had a commit observed since the
last check (`monitor.store.fresh_lag.committed_since`: a range of the commits' time index, its
cost follows the commits since then), reads the fresh offset lag of those groups only
(`monitor.store.fresh_lag.groups_lags`: their partitions' rows of the latest tables) and puts it
in the series of those groups (`overlaid`). The first check after a build looks back from the
oldest newest evaluation by `LOOK_BACK_AFTER_BUILD`, so the commits the evaluation did not see
yet are read again; later checks from the previous check's time by `LOOK_BACK`, which covers a
commit stored a little after the time it was observed.

What moves: the offset lag families below, per group-partition, per group-topic (summed and the
largest) and per group (summed and the largest), of the groups and partitions the evaluation has
(a series is never added nor removed between builds); the other families stay the evaluation's.
A group whose commits did not move keeps the evaluation's offset lag until the next build.
`kafka_health_offset_lag_age_seconds` says how long ago the offset lag was last made fresh.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import timedelta

from prometheus_client.metrics_core import GaugeMetricFamily

from monitor.expose.metrics.catalogue import BY_NAME
from monitor.store.fresh_lag import FreshLag, Key

LOOK_BACK = timedelta(seconds=10)
"""How far before the previous check a check looks for commits: a commit is stored within about
a second of the time it is observed at (the commit stream writes as it reads)."""
LOOK_BACK_AFTER_BUILD = timedelta(minutes=5)
"""How far before the oldest newest evaluation the first check after a build looks: more than an
evaluation takes between reading the offsets and being dated."""

OFFSET_LAG_FAMILIES: frozenset[str] = frozenset(
    spec.name
    for spec in BY_NAME.values()
    if spec.query in ("group_partition", "group_topic", "group")
    and spec.column in ("offset_lag", "max_offset_lag")
)
"""The families whose values the fresh offset lag replaces (the catalogue's offset lag columns of
the group-partition, group-topic and group queries)."""

Fresh = Mapping[tuple[str, str], Mapping[Key, FreshLag]]
"""(cluster, group) -> (topic, partition) -> the fresh offset lag of the partition."""


def overlaid(families: tuple[GaugeMetricFamily, ...], fresh: Fresh) -> tuple[GaugeMetricFamily, ...]:
    """`families` with the offset lag of the groups in `fresh` replaced by it; the families and
    samples of other groups are the same objects."""
    if not fresh:
        return families
    return tuple(_overlaid(f, fresh) if f.name in OFFSET_LAG_FAMILIES else f for f in families)


def _overlaid(family: GaugeMetricFamily, fresh: Fresh) -> GaugeMetricFamily:
    spec = BY_NAME[family.name]
    largest = spec.column == "max_offset_lag"
    samples = []
    for sample in family.samples:
        labels = sample.labels
        lags = fresh.get((labels["cluster"], labels["group"]))
        value = None if lags is None else _value(lags, labels.get("topic"), labels.get("partition"), largest)
        samples.append(sample if value is None else sample._replace(value=float(value)))
    changed = copy.copy(family)
    changed.samples = samples
    return changed


def _value(
    lags: Mapping[Key, FreshLag], topic: str | None, partition: str | None, largest: bool
) -> int | None:
    """The fresh offset lag of one partition, or of a topic's or the group's partitions (summed,
    or the largest); None when the store has none for it (the evaluation's is kept)."""
    if partition is not None and topic is not None:
        lag = lags.get((topic, int(partition)))
        return None if lag is None else lag.offset_lag
    values = [lag.offset_lag for (t, _), lag in lags.items() if topic is None or t == topic]
    if not values:
        return None
    return max(values) if largest else sum(values)
