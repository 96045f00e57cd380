"""Silences: an active silence mutes every firing alert all of whose labels its matchers match.

A silenced alert is kept and shown, but notifies nobody. A stored silence whose matchers do not
parse (or no longer pass a bound, such as the regular expressions' program size) mutes nothing and
is logged, so that one bad silence never stops the cycle.

Every alert is matched against all silences at once (`SilenceIndex`): per label that some silence
names, the regular expressions of all silences on it are one RE2 set, matched once per distinct
value, and what a value leaves standing is a bit mask over the silences; an alert is muted by the
silences left in the AND of its labels' masks. The cost is one set match per distinct label value
and a few integer operations per alert, where matching every silence's regexes against every
alert cost silences x alerts matches. The result is the same: the first active silence, by id,
all of whose matchers hold.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from monitor.alert.alerts import AlertRow
from monitor.alert.matchers import Matcher, MatcherError, parse_matchers
from monitor.core.patterns import PatternSet, UserPattern

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SilenceRow:
    id: int
    matchers: tuple[str, ...]


def apply_silences(alerts: Iterable[AlertRow], silences: Sequence[SilenceRow]) -> None:
    """Set each alert's `silenced_by` to the first (lowest id) active silence matching it, if it
    fires; None otherwise. Marks the alerts whose silence changed."""
    parsed = []
    for silence in sorted(silences, key=lambda s: s.id):
        try:
            parsed.append((silence.id, _parsed(tuple(silence.matchers))))
        except MatcherError as exc:  # stored before a rule it breaks: it mutes nothing, the cycle goes on
            log.warning("silence %s is ignored: %s; expire it and create it again", silence.id, exc)
    index = SilenceIndex(parsed)
    for alert in alerts:
        before = alert.silenced_by
        alert.silenced_by = index.first_match(alert.labels) if alert.state == "firing" else None
        alert.changed = alert.changed or before != alert.silenced_by


@functools.lru_cache(maxsize=8192)
def _parsed(texts: tuple[str, ...]) -> tuple[Matcher, ...]:
    """A silence's matchers, parsed and compiled once for all the cycles it is active in (a
    matcher is an immutable value; one that does not parse raises each time, and is not kept)."""
    return parse_matchers(texts)


_UNKNOWN = object()


class SilenceIndex:
    """Silences (id and matchers, in order) matched all at once against an alert's labels."""

    def __init__(self, silences: Sequence[tuple[int, Sequence[Matcher]]]) -> None:
        self._ids = [silence_id for silence_id, _ in silences]
        self._all = (1 << len(silences)) - 1
        per_label: dict[str, dict[int, list[Matcher]]] = {}
        for bit, (_, matchers) in enumerate(silences):
            for matcher in matchers:
                per_label.setdefault(matcher.name, {}).setdefault(bit, []).append(matcher)
        self._labels = {name: _LabelIndex(found) for name, found in per_label.items()}
        self._names = tuple(self._labels)
        self._memo: dict[tuple[str, ...], int | None] = {}
        """The label values the silences read -> the answer: the partitions of a topic, the
        alerts of a group share them."""

    def first_match(self, labels: Mapping[str, str]) -> int | None:
        """The id of the first silence all of whose matchers hold for `labels` (a missing label
        counts as the empty string), or None."""
        values = tuple([labels.get(name, "") for name in self._names])
        found = self._memo.get(values, _UNKNOWN)
        if found is _UNKNOWN:
            found = self._memo[values] = self._first_match(values)
        return cast(int | None, found)

    def _first_match(self, values: tuple[str, ...]) -> int | None:
        left = self._all
        for index, value in zip(self._labels.values(), values, strict=True):
            if not left:
                return None
            left &= ~index.failing(value)
        return self._ids[(left & -left).bit_length() - 1] if left else None


class _LabelIndex:
    """The matchers of the silences on one label: for a value, the mask of the silences one of
    whose matchers on this label fails (cached per value: alerts share their clusters, rules and
    groups)."""

    def __init__(self, matchers_of: Mapping[int, list[Matcher]]) -> None:
        self._equal_any = 0
        """Silences with an equality matcher on the label."""
        self._equal_only: dict[str, int] = {}
        """value -> the silences whose equality matchers on the label all name that value."""
        self._unequal: dict[str, int] = {}
        """value -> the silences with `label!=value`."""
        self._regex_one: dict[int, int] = {}
        """pattern -> the silences whose one `=~` on the label it is."""
        self._regex_any = 0
        """Silences with one `=~` on the label."""
        self._regex_many: list[tuple[int, frozenset[int]]] = []
        """Silences with several `=~` on the label, and their patterns: all must match."""
        self._not_regex: dict[int, int] = {}
        """pattern -> the silences with `label!~pattern`."""
        patterns: dict[str, int] = {}
        compiled: list[UserPattern] = []

        def number(matcher: Matcher) -> int:
            if matcher.value not in patterns:
                patterns[matcher.value] = len(compiled)
                assert matcher.regex is not None
                compiled.append(matcher.regex)
            return patterns[matcher.value]

        for bit, matchers in matchers_of.items():
            self._add(1 << bit, matchers, number)
        self._set = PatternSet(compiled) if compiled else None
        self._cache: dict[str, int] = {}

    def _add(self, flag: int, matchers: list[Matcher], number: Callable[[Matcher], int]) -> None:
        equal = {m.value for m in matchers if m.op == "="}
        if equal:
            self._equal_any |= flag
            if len(equal) == 1:  # two different values can never both hold
                (value,) = equal
                self._equal_only[value] = self._equal_only.get(value, 0) | flag
        for m in matchers:
            if m.op == "!=":
                self._unequal[m.value] = self._unequal.get(m.value, 0) | flag
            elif m.op == "!~":
                key = number(m)
                self._not_regex[key] = self._not_regex.get(key, 0) | flag
        regexes = frozenset(number(m) for m in matchers if m.op == "=~")
        if len(regexes) == 1:
            (key,) = regexes
            self._regex_one[key] = self._regex_one.get(key, 0) | flag
            self._regex_any |= flag
        elif regexes:
            self._regex_many.append((flag, regexes))

    def failing(self, value: str) -> int:
        """The silences one of whose matchers on this label does not hold for `value`."""
        cached = self._cache.get(value)
        if cached is not None:
            return cached
        failed = (self._equal_any & ~self._equal_only.get(value, 0)) | self._unequal.get(value, 0)
        if self._set is not None:
            matched = self._set.matching(value)
            passed = 0
            for key in matched:
                passed |= self._regex_one.get(key, 0)
                failed |= self._not_regex.get(key, 0)
            failed |= self._regex_any & ~passed
            if self._regex_many:
                hit = set(matched)
                for flag, needed in self._regex_many:
                    if not needed <= hit:
                        failed |= flag
        self._cache[value] = failed
        return failed
