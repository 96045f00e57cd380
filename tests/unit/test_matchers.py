"""Label matchers: each operator, anchoring, missing labels, quoting, round trips and the errors
an operator sees for a bad matcher, in numbered tables."""

from __future__ import annotations

import pytest

from monitor.alert.matchers import Matcher, MatcherError, matches_all, parse_matchers

LABELS = {"severity": "critical", "topic": "payments.orders", "cluster": "prod", "page": "true"}

# (case, matcher, labels, matches)
CASES: list[tuple[int, str, dict[str, str], bool]] = [
    # 1-4. equal / not equal
    (1, "severity=critical", LABELS, True),
    (2, "severity=warning", LABELS, False),
    (3, "severity!=warning", LABELS, True),
    (4, "severity!=critical", LABELS, False),
    # 5-8. regex and negated regex
    (5, r"topic=~payments\..*", LABELS, True),
    (6, "topic=~orders", LABELS, False),
    (7, "topic!~orders", LABELS, True),
    (8, r"topic!~payments\..*", LABELS, False),
    # 9-12. anchored at both ends, also around an alternation
    (9, "topic=~payments", LABELS, False),
    (10, "topic=~.*orders", LABELS, True),
    (11, "severity=~warn|crit", LABELS, False),
    (12, "severity=~warning|critical", LABELS, True),
    # 13-18. a missing label is the empty string
    (13, "team=", LABELS, True),
    (14, "team!=", LABELS, False),
    (15, 'team=""', LABELS, True),
    (16, "team=~.*", LABELS, True),
    (17, "team=~.+", LABELS, False),
    (18, "team!=payments", LABELS, True),
    # 19-21. spaces around the operator; quoted values keep inner spaces and take escapes
    (19, "  severity = critical ", LABELS, True),
    (20, 'note=" two words "', {"note": " two words "}, True),
    (21, r'note="say \"hi\""', {"note": 'say "hi"'}, True),
    # 22. a bare value is taken as written, backslashes and all
    (22, r"topic=~payments\.orders", LABELS, True),
    # 23. case matters
    (23, "severity=Critical", LABELS, False),
]


@pytest.mark.parametrize(("case", "text", "labels", "expected"), CASES, ids=[f"case{c[0]}" for c in CASES])
def test_matches(case: int, text: str, labels: dict[str, str], expected: bool) -> None:
    assert Matcher.parse(text).matches(labels) is expected


ROUND_TRIPS = [
    "severity=critical",
    "severity!=info",
    r"topic=~payments\..*",
    "team!~ops|infra",
    "team=",
    'note=" padded "',
    'quote="a \\"b\\" c"',
    'path="C:\\\\dir"',
    'op="=x"',
    'op="~x"',
    'multi="line\\nbreak"',
    "words=two words",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_str_round_trips(text: str) -> None:
    matcher = Matcher.parse(text)
    assert Matcher.parse(str(matcher)) == matcher


def test_str_is_the_plain_form_when_it_can_be() -> None:
    assert str(Matcher.parse('severity="critical"')) == "severity=critical"
    assert str(Matcher("team", "=", " x")) == 'team=" x"'
    assert str(Matcher("op", "=", "~x")) == 'op="~x"'


# (case, text, words the message must contain)
ERRORS: list[tuple[int, str, list[str]]] = [
    (1, "severity", ["bad matcher 'severity'", "label=value", "label=~regex"]),
    (2, "severity==critical", ["unexpected '='"]),
    (3, "1severity=critical", ["bad matcher"]),
    (4, "=critical", ["bad matcher"]),
    (5, "severity=~(crit", ["invalid regular expression '(crit'", "label severity", "whole value"]),
    (6, "topic!~[a-", ["invalid regular expression"]),
    (7, 'team="open', ["no closing"]),
    (8, 'team="a"b', ["after the closing quote"]),
    (9, "severity=~~crit", ["unexpected '~'"]),
]


@pytest.mark.parametrize(("case", "text", "words"), ERRORS, ids=[f"case{c[0]}" for c in ERRORS])
def test_errors_say_what_is_wrong(case: int, text: str, words: list[str]) -> None:
    with pytest.raises(MatcherError) as caught:
        Matcher.parse(text)
    for word in words:
        assert word in str(caught.value)


def test_direct_construction_validates() -> None:
    with pytest.raises(MatcherError, match="invalid regular expression"):
        Matcher("topic", "=~", "(")
    with pytest.raises(MatcherError, match="bad label name"):
        Matcher("bad-name", "=", "x")
    with pytest.raises(MatcherError, match="bad operator"):
        Matcher("team", "==", "x")  # type: ignore[arg-type]


def test_a_matcher_error_is_a_value_error() -> None:
    """So that pydantic models report it like any other bad value, with its location."""
    assert issubclass(MatcherError, ValueError)


def test_parse_matchers_and_matches_all() -> None:
    matchers = parse_matchers(["severity=critical", "page!=false", r"topic=~payments\..*"])
    assert len(matchers) == 3
    assert matches_all(matchers, LABELS)
    assert not matches_all(matchers, {**LABELS, "page": "false"})
    assert matches_all((), {})  # no matcher selects everything
    with pytest.raises(MatcherError, match="bad matcher 'nope'"):
        parse_matchers(["severity=critical", "nope"])


def test_matchers_are_values() -> None:
    """Equal when their text means the same; usable in sets (silences dedupe by matchers)."""
    assert Matcher.parse("a=~x.*") == Matcher.parse('a =~ "x.*"')
    assert len({Matcher.parse("a=b"), Matcher.parse('a="b"'), Matcher.parse("a!=b")}) == 2
