"""Regular expressions that people type (silences, inhibition and route matchers), compiled with
RE2: matching takes time linear in the text whatever the pattern, so no pattern can stall a cycle
(Python's `re` backtracks: `(.*.*)*\\d` against a long label runs for hours). Alertmanager uses Go's
RE2 for the same reason, so its patterns and ours mean the same.

RE2 refuses what it cannot match in linear time (backreferences, lookaround); the error says so.
"""

from __future__ import annotations

from typing import Protocol

import re2

MAX_PATTERN_LENGTH = 1_000
"""Longest pattern accepted: enough for any real label selector."""
_MAX_PROGRAM_BYTES = 8 << 20
"""Memory RE2 may use for one compiled pattern; a pattern that needs more is refused."""


class UserPattern(Protocol):
    """What a compiled pattern offers (RE2's `_Regexp`)."""

    pattern: str

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
    return compiled
