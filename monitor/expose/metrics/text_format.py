"""The Prometheus text format of the snapshot's families, byte for byte what prometheus_client's
`generate_latest` writes, at a fraction of its cost for the families the snapshot has in bulk.

`generate_latest` checks and escapes every label name of every sample and formats each line
through several string operations: at 100,000 group-partitions a build's 650,000 samples took
about 8 s of a 14 s build on a quiet machine, and each fresh read of the offset lag
(`fresh.py`) re-encoded the lines of every group that committed. Here a family's header is still
`generate_latest`'s own; a sample line is written directly when the family is a gauge, its name
and label names are of the legacy character set (no quoting or escaping: the catalogue's are)
and it has no timestamp. Anything else is handed to `generate_latest` whole. Label values are
escaped as the format says (backslash, newline, double quote). tests/unit/test_text_format.py
compares both on odd values.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeVar

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

go_float: Final[Callable[[float], str]] = floatToGoString
"""A value as the text format writes it (prometheus_client's own, which is not typed)."""

_EXACT: Final = 10**15
"""Whole numbers below this in size are floats exactly, and their shortest repr is their digits."""


def go_int(value: int) -> str:
    """`go_float(value)` of a whole number (an offset lag), without formatting a float first:
    "123.0", and from a million on the exponent Go writes ("1.234567e+06"). A fifth of the time
    of `go_float` (the fresh offset lag of `/metrics` encodes hundreds of thousands a minute)."""
    if -_EXACT < value < _EXACT:
        if value < 1_000_000:
            return f"{value}.0"
        digits = str(value)
        return f"{(digits[0] + '.' + digits[1:]).rstrip('0.')}e+{len(digits) - 1:02d}"
    return go_float(value)


M = TypeVar("M", bound=Metric)

_LEGACY_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LEGACY_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class Families:
    """A list of families in the shape `generate_latest` reads (a registry's `collect`)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


def with_samples(family: M, samples: list[Sample]) -> M:
    """A shallow copy of `family` with `samples`."""
    changed = copy.copy(family)
    changed.samples = samples
    return changed


def header(family: Metric) -> bytes:
    """The `# HELP` and `# TYPE` lines of `family`."""
    return generate_latest(Families([with_samples(family, [])]))


def encode(families: Iterable[Metric]) -> bytes:
    """`families` in the text format: the same bytes as `generate_latest` of them."""
    out: list[bytes] = []
    written: dict[int, str] = {}
    for family in families:
        out.append(header(family) + lines(family, family.samples, written))
    return b"".join(out)


def lines(family: Metric, samples: Sequence[Sample], written: dict[int, str] | None = None) -> bytes:
    """The lines of `samples` of `family`, without its header: `sample_lines`, or what
    `generate_latest` writes after the header where it declines."""
    fast = sample_lines(family, samples, written)
    if fast is not None:
        return fast
    return generate_latest(Families([with_samples(family, list(samples))]))[len(header(family)) :]


def sample_lines(
    family: Metric, samples: Sequence[Sample], written: dict[int, str] | None = None
) -> bytes | None:
    """The lines of `samples` of `family` (without its header), or None when one of them needs
    what only `generate_latest` does (not a gauge, a sample of another name, a timestamp or an
    exemplar, a name to escape). `written` keeps the label text of each labels mapping by its
    identity, for samples that share one (a state query's row, `prometheus._add`): the caller
    keeps the samples, so no mapping is freed and its identity reused meanwhile."""
    pairs_of = {} if written is None else written
    if family.type != "gauge":
        return None
    own = family.name
    checked: set[tuple[str, ...]] = set()
    lines: list[str] = []
    append = lines.append
    for sample in samples:
        name, labels, value = sample.name, sample.labels, sample.value
        if name != own or sample.timestamp is not None or sample.exemplar is not None:
            return None  # (a gauge's `_created`, `_gsum` or `_gcount` sample goes to a family of its own)
        if not labels:
            if not _LEGACY_NAME.match(name):
                return None
            append(f"{name} {go_float(value)}\n")
            continue
        keys = (name, *labels)
        if keys not in checked:
            if not (_LEGACY_NAME.match(name) and all(_LEGACY_LABEL.match(k) for k in labels)):
                return None
            checked.add(keys)
        pairs = pairs_of.get(id(labels))
        if pairs is None:
            pairs = ",".join([f'{k}="{_escaped(v)}"' for k, v in sorted(labels.items())])
            pairs_of[id(labels)] = pairs
        append(f"{name}{{{pairs}}} {go_float(value)}\n")
    return "".join(lines).encode()


def _escaped(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value
