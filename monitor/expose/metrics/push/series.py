"""The series a push sends: the state metrics' samples, picked by cluster and metric name."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from monitor.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    labels: tuple[tuple[str, str], ...]
    """Sorted by label name."""
    value: float

    def label(self, name: str) -> str | None:
        for key, value in self.labels:
            if key == name:
                return value
        return None


def select(families: Iterable[Metric], metrics: Sequence[str], clusters: Sequence[str]) -> list[Series]:
    """The finite samples of the families named in `metrics`, of the `clusters` (all when empty)."""
    wanted = set(metrics)
    only = set(clusters)
    picked: list[Series] = []
    for family in families:
        if family.name not in wanted:
            continue
        for sample in family.samples:
            if not math.isfinite(sample.value):
                continue
            if only and sample.labels.get("cluster") not in only:
                continue
            picked.append(Series(sample.name, tuple(sorted(sample.labels.items())), float(sample.value)))
    return picked


def check_names(target: str, metrics: Sequence[str], known: Iterable[str], where: str) -> None:
    """Raise ConfigError naming every metric of `metrics` that is not one of `known`."""
    choices = sorted(known)
    problems = []
    for name in metrics:
        if name not in choices:
            close = difflib.get_close_matches(name, choices, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/metrics.md for the state metrics"
            problems.append(f"push.{where}[{target}].metrics: {name!r} is not a state metric; {hint}")
    if problems:
        raise ConfigError(problems, "configuration")
