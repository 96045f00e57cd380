"""Silences matched all at once (`SilenceIndex`, one RE2 set per label) decide exactly what
matching every silence's matchers against every alert decided, and a pattern whose compiled
program is costly is refused with the limit and how to stay under it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from monitor.alert.alerts import AlertRow
from monitor.alert.matchers import Matcher, MatcherError, matches_all, parse_matchers
from monitor.alert.mute.silence import SilenceIndex, SilenceRow, apply_silences
from monitor.core import patterns
from monitor.core.patterns import MAX_PROGRAM_SIZE, PatternSet, compile_pattern, matchable

pytestmark = pytest.mark.unit
T0 = datetime(2026, 11, 28, tzinfo=UTC)

SILENCES: list[tuple[int, tuple[str, ...]]] = [
    (3, ("team=payments", "group_id=billing")),
    (5, ("team=payments", "topic!=orders")),
    (7, ("team=search", "group_id=~idx-.*")),
    (8, ("team=search", "group_id!~idx-.*", "severity=critical")),
    (11, ("cluster=~prod|stage", "topic=~pay.*", "topic=~.*ments")),
    (12, ("team=", "rule=BrokerDown")),
    (13, ("team!=", "group_id=~", "rule=~Consumer.*")),
    (14, ("topic=a", "topic=b")),
    (15, ("topic=a", "topic=a", "severity!=info")),
    (16, ("group_id!~.+", "cluster=dev")),
    (17, ("team=search", "group_id=~idx-.*", "group_id!~idx-old.*")),
    (18, ('group_id=~"caf\\x{e9}|naive"', "rule!=Lag")),
    (20, ("severity=~warning|critical", "cluster!~prod.*", "team=~pay.*")),
    (21, ("entity=~(group|topic)", "cluster=~prod", "team=~(payments|search)")),
]
"""Equality, inequality, regular expressions and their negations, on labels alerts have and
labels they lack (matched as the empty string), several matchers on one label, contradictions,
a pattern shared by several silences."""

ALERTS: list[dict[str, str]] = [
    {"team": "payments", "group_id": "billing", "topic": "orders", "cluster": "prod"},
    {"team": "payments", "group_id": "ledger", "topic": "refunds", "cluster": "prod"},
    {"team": "payments", "group_id": "ledger", "topic": "orders", "cluster": "prod"},
    {"team": "search", "group_id": "idx-books", "cluster": "prod", "severity": "warning"},
    {"team": "search", "group_id": "idx-old-1", "cluster": "prod", "severity": "warning"},
    {"team": "search", "group_id": "crawler", "severity": "critical"},
    {"team": "search", "group_id": "crawler", "severity": "warning"},
    {"cluster": "stage", "topic": "payments"},
    {"cluster": "stage", "topic": "pay-ments"},
    {"cluster": "prod2", "topic": "payments"},
    {"rule": "BrokerDown", "cluster": "prod"},
    {"rule": "BrokerDown", "team": "kafka-platform"},
    {"rule": "ConsumerLag", "team": "kafka-platform"},
    {"rule": "ConsumerLag", "team": "kafka-platform", "group_id": "g"},
    {"topic": "a", "severity": "info"},
    {"topic": "a", "severity": "warning"},
    {"topic": "b"},
    {"cluster": "dev"},
    {"cluster": "dev", "group_id": "x"},
    {"group_id": "café", "rule": "Lag"},
    {"group_id": "café", "rule": "Other"},
    {"group_id": "naive", "rule": "Other"},
    {"severity": "critical", "cluster": "dev", "team": "payments"},
    {"severity": "warning", "cluster": "production", "team": "payroll"},
    {"entity": "group", "cluster": "prod", "team": "search"},
    {"entity": "groups", "cluster": "prod", "team": "search"},
    {"group_id": "lone \udc80 surrogate", "cluster": "dev"},
    {},
]


def _per_silence(silences: list[tuple[int, tuple[Matcher, ...]]], labels: dict[str, str]) -> int | None:
    """What the alert cycle decided before: every silence's matchers against the alert, in order."""
    return next((silence_id for silence_id, matchers in silences if matches_all(matchers, labels)), None)


def test_the_index_decides_as_matching_silence_by_silence() -> None:
    parsed = [(silence_id, parse_matchers(texts)) for silence_id, texts in SILENCES]
    index = SilenceIndex(parsed)
    decided = [index.first_match(labels) for labels in ALERTS]
    assert decided == [_per_silence(parsed, labels) for labels in ALERTS]
    # the table is worth something only if it mutes some and spares others, by several silences
    assert len({d for d in decided if d is not None}) >= 10 and None in decided


def test_alerts_equal_on_the_labels_silences_read_are_answered_alike_in_any_order() -> None:
    """The index remembers its answer per value of the labels the silences read: a label no
    silence reads (the partition) and the order of the alerts change nothing."""
    parsed = [(silence_id, parse_matchers(texts)) for silence_id, texts in SILENCES]
    index = SilenceIndex(parsed)
    expected = [_per_silence(parsed, labels) for labels in ALERTS]
    alerts = [{**labels, "partition": str(n)} for n, labels in enumerate([*ALERTS, *reversed(ALERTS)])]
    assert [index.first_match(labels) for labels in alerts] == [*expected, *reversed(expected)]
    assert (
        index.first_match({"team": "", "rule": "BrokerDown"})
        == index.first_match({"rule": "BrokerDown"})
        == 12
    )


@pytest.mark.parametrize("size", range(len(SILENCES) + 1))
def test_every_subset_of_the_silences_decides_the_same(size: int) -> None:
    parsed = [(silence_id, parse_matchers(texts)) for silence_id, texts in SILENCES]
    for chosen in itertools.islice(itertools.combinations(parsed, size), 40):
        index = SilenceIndex(list(chosen))
        assert [index.first_match(a) for a in ALERTS] == [_per_silence(list(chosen), a) for a in ALERTS]


def test_apply_silences_marks_the_first_silence_by_id_and_spares_pending_alerts() -> None:
    rows = [AlertRow(id=None, fingerprint=f"f{n}", rule="Lag", cluster="prod", entity="group",
                     entity_key=f"prod/{n}", labels=dict(labels), severity="warning", state="firing",
                     summary="", description="", value=1.0, annotations={}, pending_since=T0, starts_at=T0)
            for n, labels in enumerate(ALERTS)]  # fmt: skip
    rows[0].state = "pending"
    apply_silences(rows, [SilenceRow(i, t) for i, t in reversed(SILENCES)])
    parsed = [(silence_id, parse_matchers(texts)) for silence_id, texts in SILENCES]
    assert rows[0].silenced_by is None
    assert [r.silenced_by for r in rows[1:]] == [_per_silence(parsed, a) for a in ALERTS[1:]]


COSTLY = ["(?:.?){999}.*(?:.?){999}", "(?:.?){200}", "(x{1,100}){1,10}", "(a+b+){400}", ".{1000}"]


@pytest.mark.parametrize("pattern", COSTLY)
def test_a_costly_pattern_is_refused_naming_the_limit_and_the_fix(pattern: str) -> None:
    with pytest.raises(MatcherError) as refused:
        Matcher.parse(f"group_id=~{pattern}")
    message = str(refused.value)
    assert f"at most {MAX_PROGRAM_SIZE:,}" in message and "instructions" in message
    assert "write .* or + instead" in message and "group_id" in message


@pytest.mark.parametrize(
    "pattern",
    ["payments([._-].*)?", "[^/]+", "|".join(f"app-{n}-.*" for n in range(80)), "[a-z0-9._-]{1,64}", ".*"],
)
def test_ordinary_patterns_stay_under_the_limit(pattern: str) -> None:
    assert compile_pattern(pattern).programsize <= MAX_PROGRAM_SIZE


def test_a_costly_silence_stored_before_the_limit_mutes_nothing() -> None:
    row = AlertRow(id=None, fingerprint="f", rule="Lag", cluster="prod", entity="group", entity_key="prod/g",
                   labels={"team": "payments", "group_id": "g" * 200}, severity="warning", state="firing",
                   summary="", description="", value=1.0, annotations={}, pending_since=T0, starts_at=T0)  # fmt: skip
    stored = [SilenceRow(1, ("team=payments", f"group_id=~{COSTLY[0]}")), SilenceRow(2, ("group_id=~g+",))]
    apply_silences([row], stored)
    assert row.silenced_by == 2


def test_a_pattern_set_larger_than_one_re2_set_is_split_and_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(patterns, "_SET_PROGRAM_SIZE", 20)
    compiled = [compile_pattern(p) for p in ["a.*", "b+", "[ab]+", "ab", "(?:ab)+", ".*b", "c"]]
    split = PatternSet(compiled)
    assert len(split._sets) > 2
    for text in ["a", "ab", "abab", "b", "bb", "c", "", "lone \udc80"]:
        assert sorted(split.matching(text)) == [
            n for n, p in enumerate(compiled) if p.fullmatch(matchable(text))
        ]
