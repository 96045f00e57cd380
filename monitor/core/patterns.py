"""Regular expressions that people type (silences, inhibition and route matchers), compiled with
RE2: matching takes time linear in the text whatever the pattern, so no pattern can stall a cycle
(Python's `re` backtracks: `(.*.*)*\\d` against a long label runs for hours). Alertmanager uses Go's
RE2 for the same reason, so its patterns and ours mean the same.

RE2 refuses what it cannot match in linear time (backreferences, lookaround); the error says so.
Linear is not cheap: `(?:.?){999}.*(?:.?){999}` compiles to 17,994 instructions and takes
milliseconds per label, so a pattern's compiled program is bounded too (`MAX_PROGRAM_SIZE`), and
many patterns are matched in one pass (`PatternSet`) rather than one after the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import re2

MAX_PATTERN_LENGTH = 1_000
"""Longest pattern accepted: enough for any real label selector."""
_MAX_PROGRAM_BYTES = 8 << 20
"""Memory RE2 may use for one compiled pattern; a pattern that needs more is refused."""
MAX_PROGRAM_SIZE = 1_000
"""Most instructions one pattern may compile to (RE2's program size): a list of eighty names
with `.*` after each, or `[a-z0-9._-]{1,64}`, stays under it; counted repetitions of optional
groups, whose matching cost grows with it for every label they are matched against, do not."""
_SET_PROGRAM_SIZE = 200_000
"""Most instructions in one RE2 set; a `PatternSet` of more is split into several."""
_SET_MEMORY = 64 << 20


class UserPattern(Protocol):
    """What a compiled pattern offers (RE2's `_Regexp`)."""

    pattern: str

    @property
    def programsize(self) -> int: ...

    def fullmatch(self, text: str) -> object | None: ...


class PatternError(ValueError):
    """A pattern is too long, does not parse, or uses what RE2 cannot match in linear time."""


def _options(dot_all: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # errors come back as exceptions with their reason, not on stderr
    options.max_mem = _MAX_PROGRAM_BYTES
    options.dot_nl = dot_all
    return options


_OPTIONS = {False: _options(False), True: _options(True)}


def compile_pattern(pattern: str, *, dot_all: bool = False) -> UserPattern:
    """`pattern` compiled with RE2, or PatternError saying why not and how to fix it. With
    `dot_all`, `.` also matches a newline (names are data: `.*` must match every one)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(
            f"the regular expression is {len(pattern)} characters long; at most {MAX_PATTERN_LENGTH} "
            "are accepted: list fewer alternatives, or match a common prefix"
        )
    try:
        compiled: UserPattern = re2.compile(pattern, _OPTIONS[dot_all])
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise PatternError(
            f"invalid regular expression {pattern!r}: {text} (RE2 syntax, as Alertmanager: no "
            "backreferences or lookaround)"
        ) from None
    except (TypeError, UnicodeError) as exc:
        raise PatternError(f"invalid regular expression {pattern!r}: {exc}") from None
    size = compiled.programsize
    if size > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"it compiles to {size:,} RE2 instructions, at most {MAX_PROGRAM_SIZE:,} are accepted: write "
            ".* or + instead of counted repetitions ({n}, {m,n}), or list fewer alternatives"
        )
    return compiled


def matchable(text: str) -> str:
    """`text` as RE2 can read it: a lone surrogate, which UTF-8 cannot hold, becomes '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class PatternSet:
    """Many patterns, each already accepted by `compile_pattern`, matched against a text in one
    pass (RE2's `Set`, anchored at both ends as `fullmatch`): the cost is one scan of the text
    whatever the number of patterns, where matching them one by one costs one scan each."""

    def __init__(self, patterns: Sequence[UserPattern]) -> None:
        self._sets: list[tuple[int, re2.Set]] = []
        options = _options(False)
        options.max_mem = _SET_MEMORY
        start, size = 0, 0
        for index, pattern in enumerate(patterns):
            program = pattern.programsize
            if index > start and size + program > _SET_PROGRAM_SIZE:
                self._sets.append((start, _compiled_set(patterns[start:index], options)))
                start, size = index, 0
            size += program
        if len(patterns) > start:
            self._sets.append((start, _compiled_set(patterns[start:], options)))

    def matching(self, text: str) -> list[int]:
        """The indexes of the patterns that match all of `text`."""
        text = matchable(text)
        found: list[int] = []
        for offset, compiled in self._sets:
            found += (offset + index for index in compiled.Match(text) or ())
        return found


def _compiled_set(patterns: Sequence[UserPattern], options: re2.Options) -> re2.Set:
    compiled = re2.Set.FullMatchSet(options)
    for pattern in patterns:
        compiled.Add(pattern.pattern)
    compiled.Compile()
    return compiled
