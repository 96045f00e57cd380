"""Label matchers, the one selector language of routes, inhibition rules and silences.

The syntax and semantics are Alertmanager's, so an operator who knows one knows the other:

    severity=critical          equal
    severity!=info             not equal
    topic=~"payments\\..*"     regular expression (RE2), anchored at both ends
    team!~"ops|infra"          not matching the regular expression

Regular expressions compile with RE2 (`monitor.core.patterns`): matching is linear in the label's
length whatever the pattern, and a pattern's compiled program is bounded, so what a person types
into a silence cannot stall the alert cycle.

A label the alert does not carry matches as the empty string, so `team=""` selects the alerts
without a team and `team!=""` those with one. A value may be written bare or in double quotes; in
quotes, `\\"`, `\\\\` and `\\n` are escapes and leading or trailing spaces are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from monitor.core.patterns import PatternError, UserPattern, compile_pattern, matchable

MatchOp = Literal["=", "!=", "=~", "!~"]

OPERATORS: tuple[MatchOp, ...] = ("=", "!=", "=~", "!~")
_LABEL = r"[A-Za-z_][A-Za-z0-9_]*"
_SYNTAX = re.compile(rf"^\s*(?P<name>{_LABEL})\s*(?P<op>=~|!~|!=|=)\s*(?P<value>.*?)\s*$", re.DOTALL)
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n"}
_BARE = re.compile(r'^(?:[^\s"=~]|[^\s"=~].*\S)?$', re.DOTALL)
"""Values printed without quotes: those that parse back unchanged."""
_HOW = "write label=value, label!=value, label=~regex or label!~regex"
MAX_MATCHER_LENGTH = 1_200
"""Longest matcher text accepted (a label name, an operator and a pattern of up to
`monitor.core.patterns.MAX_PATTERN_LENGTH` characters)."""


class MatcherError(ValueError):
    """A matcher's text does not parse, or its regular expression does not compile."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """One condition on one label. Build it with `Matcher.parse` (or directly: it validates)."""

    name: str
    op: MatchOp
    value: str
    _regex: UserPattern | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(_LABEL, self.name):
            raise MatcherError(
                f"bad label name {self.name!r}: letters, digits and '_', not starting with a digit"
            )
        if self.op not in OPERATORS:
            raise MatcherError(f"bad operator {self.op!r}; {_HOW}")
        if self.op in ("=~", "!~"):
            try:
                regex = compile_pattern(self.value)
            except PatternError as exc:
                raise MatcherError(
                    f"label {self.name}: {exc}; the pattern is matched against the whole value"
                ) from None
            object.__setattr__(self, "_regex", regex)

    @classmethod
    def parse(cls, text: str) -> Matcher:
        """`label=value`, `label!=value`, `label=~regex` or `label!~regex`. Raises MatcherError."""
        if not isinstance(text, str):
            raise MatcherError(f"a matcher is text, not {type(text).__name__}: {_HOW}")
        if len(text) > MAX_MATCHER_LENGTH:
            raise MatcherError(
                f"a matcher of {len(text)} characters is too long (at most {MAX_MATCHER_LENGTH}): {_HOW}"
            )
        found = _SYNTAX.match(text)
        if found is None:
            raise MatcherError(f"bad matcher {text!r}: {_HOW}, e.g. severity=critical")
        op = cast(MatchOp, found["op"])
        value = found["value"]
        if value.startswith('"'):
            value = _unquote(value, text)
        elif value.startswith(("=", "~")):
            raise MatcherError(f"bad matcher {text!r}: unexpected {value[0]!r} after {op!r}; {_HOW}")
        try:
            return cls(found["name"], op, value)
        except MatcherError as exc:
            raise MatcherError(f"bad matcher {text!r}: {exc}") from None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether `labels` satisfy the matcher; a missing label counts as the empty string."""
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        assert self._regex is not None
        found = self._regex.fullmatch(matchable(actual)) is not None
        return found if self.op == "=~" else not found

    @property
    def regex(self) -> UserPattern | None:
        """The compiled pattern of `=~` and `!~` (None for `=` and `!=`)."""
        return self._regex

    def __str__(self) -> str:
        value = self.value if _BARE.match(self.value) and "\n" not in self.value else _quote(self.value)
        return f"{self.name}{self.op}{value}"


def parse_matchers(texts: Iterable[str]) -> tuple[Matcher, ...]:
    """Parse every text; the first bad one raises MatcherError."""
    if isinstance(texts, str):
        texts = [texts]
    return tuple(Matcher.parse(text) for text in texts)


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """Whether every matcher holds (true for no matchers: they select everything)."""
    return all(matcher.matches(labels) for matcher in matchers)


def _unquote(quoted: str, text: str) -> str:
    chars: list[str] = []
    index = 1
    while index < len(quoted):
        char = quoted[index]
        if char == "\\" and index + 1 < len(quoted):
            following = quoted[index + 1]
            chars.append(_ESCAPES.get(following, "\\" + following))
            index += 2
            continue
        if char == '"':
            if index != len(quoted) - 1:
                raise MatcherError(f"bad matcher {text!r}: text after the closing quote; {_HOW}")
            return "".join(chars)
        chars.append(char)
        index += 1
    raise MatcherError(f"bad matcher {text!r}: the quoted value has no closing '\"'")


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
