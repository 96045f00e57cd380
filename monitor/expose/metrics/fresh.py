"""The offset lag series of the `/metrics` snapshot as fresh as the store holds them, between two
evaluations.

A build reads the newest evaluation, so its offset lag would move only once per evaluation, while
the commit stream stores a commit within about a second. Between builds, each fresh read of the
snapshot (`snapshot.MetricsSnapshot._freshen`, when a scrape or a push asks) asks which groups had
a commit observed, or an end offset of one of their partitions listed moved, since the last read
(`monitor.store.fresh_lag.changed_since`: a range of the commits' time index, its cost follows
the commits since then, and a pass over the end offsets job's row per partition, with the groups
of the partitions that moved), reads the fresh offset lag of those groups only
(`monitor.store.fresh_lag.groups_lags`: their partitions' rows of the latest tables) and puts it
in the series of those groups (`LagSection.overlaid`: the offset lag families are kept as each
group's encoded lines, so only the lines of those groups whose values changed are written again,
and only their values: each line's name and labels are encoded once per build; the rest of the snapshot,
encoded and compressed once per build, is not touched). The first read after a
build looks back from the oldest newest evaluation by `LOOK_BACK_AFTER_BUILD`, so the commits
the evaluation did not see yet are read again (from each group-partition's newest commit: minutes
of commits outnumber them); later reads from the previous read's time by
`LOOK_BACK`, which covers a commit stored a little after the time it was observed.

What moves: the offset lag families below, per group-partition, per group-topic (summed and the
largest) and per group (summed and the largest), of the groups and partitions the evaluation has
(a series is never added nor removed between builds); the other families stay the evaluation's.
A group whose commits and end offsets did not move keeps the offset lag it has until the next
build (with the end offsets job off, a group that does not commit keeps the evaluation's).
`kafka_health_offset_lag_age_seconds` says how long ago the offset lag was last made fresh.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.samples import Sample

from monitor.expose.metrics.catalogue import BY_NAME
from monitor.expose.metrics.text_format import go_int, header, with_samples
from monitor.expose.metrics.text_format import lines as lines_of
from monitor.store.fresh_lag import FreshLag, Key

LOOK_BACK = timedelta(seconds=10)
"""How far before the previous check a check looks for commits and moved end offsets: a commit
is stored within about a second of the time it is observed at (the commit stream writes as it
reads), an end offset within a listing's time of when it was listed."""
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


GroupKey = tuple[str, str]
"""(cluster, group)"""


class LagSection:
    """The offset lag families of a snapshot in the text format, kept as each group's lines, so
    that new values of a few groups cost the encoding of the values that changed only
    (`overlaid`: a line whose value stays is kept as it is, name, labels and value) and the
    section is their concatenation (`text`): a family's lines need not be in any order."""

    def __init__(
        self,
        families: Sequence[GaugeMetricFamily],
        samples: dict[str, dict[GroupKey, list[Sample]]] | None = None,
        lines: dict[str, dict[GroupKey, list[bytes]]] | None = None,
        chunks: dict[str, dict[GroupKey, bytes]] | None = None,
    ) -> None:
        self._families = {family.name: with_samples(family, []) for family in families}
        self._headers = {name: header(f) for name, f in self._families.items()}
        if samples is None or lines is None or chunks is None:
            samples, lines, chunks = {}, {}, {}
            for family in families:
                by_group: dict[GroupKey, list[Sample]] = {}
                for sample in family.samples:
                    by_group.setdefault(_group(sample), []).append(sample)
                samples[family.name] = by_group
                chunks[family.name] = {
                    key: self._encode(family.name, group) for key, group in by_group.items()
                }
                lines[family.name] = {
                    key: chunk.splitlines(keepends=True) for key, chunk in chunks[family.name].items()
                }
        self._samples, self._lines, self._chunks = samples, lines, chunks

    def _encode(self, name: str, samples: list[Sample]) -> bytes:
        return lines_of(self._families[name], samples)

    def overlaid(self, fresh: Fresh) -> LagSection:
        """This section with the offset lag of the groups in `fresh` (a new section; this one is
        left as it is)."""
        samples = {name: dict(by_group) for name, by_group in self._samples.items()}
        lines = {name: dict(by_group) for name, by_group in self._lines.items()}
        chunks = {name: dict(by_group) for name, by_group in self._chunks.items()}
        totals = {key: _Totals.of(lags) for key, lags in fresh.items()}
        for name, by_group in samples.items():
            largest = BY_NAME[name].column == "max_offset_lag"
            for key in fresh.keys() & by_group.keys():
                changed = _overlaid(by_group[key], lines[name][key], totals[key], largest)
                if changed is not None:
                    by_group[key], lines[name][key] = changed
                    chunks[name][key] = b"".join(changed[1])
        return LagSection(list(self._families.values()), samples, lines, chunks)

    def text(self) -> bytes:
        """The families in the text format (a family without samples is left out)."""
        return b"".join(
            self._headers[name] + b"".join(chunks.values()) for name, chunks in self._chunks.items() if chunks
        )

    def families(self, names: Collection[str]) -> tuple[GaugeMetricFamily, ...]:
        """The families of `names` with their current samples (the push targets read them)."""
        return tuple(
            with_samples(family, [s for group in self._samples[name].values() for s in group])
            for name, family in self._families.items()
            if name in names and self._samples[name]
        )


def _group(sample: Sample) -> GroupKey:
    return (sample.labels["cluster"], sample.labels["group"])


@dataclass(frozen=True, slots=True)
class _Totals:
    """One group's fresh offset lag per partition, and summed and the largest per topic and for
    the group: worked out once per fresh read, not once per series (a group-topic series would
    otherwise add up its group's partitions each time: 43,000 series x 200 partitions at 100,000
    group-partitions)."""

    partitions: Mapping[Key, FreshLag]
    topic_sum: Mapping[str, int]
    topic_max: Mapping[str, int]
    group_sum: int | None
    group_max: int | None

    @classmethod
    def of(cls, lags: Mapping[Key, FreshLag]) -> _Totals:
        topic_sum: dict[str, int] = {}
        topic_max: dict[str, int] = {}
        for (topic, _), lag in lags.items():
            value = lag.offset_lag
            topic_sum[topic] = topic_sum.get(topic, 0) + value
            topic_max[topic] = max(topic_max.get(topic, value), value)
        values = [lag.offset_lag for lag in lags.values()]
        return cls(lags, topic_sum, topic_max, sum(values) if values else None, max(values, default=None))

    def value(self, topic: str | None, partition: str | None, largest: bool) -> int | None:
        """The fresh offset lag of one partition, or of a topic's or the group's partitions
        (summed, or the largest); None when the store has none for it (the evaluation's is kept)."""
        if partition is not None and topic is not None:
            lag = self.partitions.get((topic, int(partition)))
            return None if lag is None else lag.offset_lag
        if topic is not None:
            return (self.topic_max if largest else self.topic_sum).get(topic)
        return self.group_max if largest else self.group_sum


def _overlaid(
    samples: list[Sample], lines: list[bytes], totals: _Totals, largest: bool
) -> tuple[list[Sample], list[bytes]] | None:
    """One group's samples of a family and their lines with the fresh values of `totals`, or None
    when no value changed. A line whose value changed keeps its name and labels (up to the space
    before the value: a gauge's line has no timestamp, and a label value's space or newline is
    within its quotes, escaped) and gets the new value; the others are kept as they are."""
    new_samples: list[Sample] | None = None
    new_lines: list[bytes] = lines
    for index, sample in enumerate(samples):
        labels = sample.labels
        value = totals.value(labels.get("topic"), labels.get("partition"), largest)
        if value is None or value == sample.value:
            continue
        if new_samples is None:
            new_samples, new_lines = list(samples), list(lines)
        line = lines[index]
        new_samples[index] = Sample(sample.name, labels, float(value), *sample[3:])
        new_lines[index] = line[: line.rindex(b" ") + 1] + go_int(value).encode() + b"\n"
    return None if new_samples is None else (new_samples, new_lines)
