"""The SQL files of queries/ as tests read them: the comment header of each file, and its psql
variables turned into bound parameters.

A query file is run by people with psql (`psql -v cluster=prod -f queries/x.sql`), where
`:'name'` is replaced by the variable as a quoted literal and `:name` by its raw text. Tests run
the same file through psycopg instead: `to_pyformat` rewrites each variable to a `%(name)s`
placeholder (and doubles every other `%`), skipping what psql skips too: string literals, quoted
identifiers, dollar-quoted bodies, comments and `::` casts. `:"name"` (an identifier) and psql's
`:{?name}` test cannot be bound and are refused.

The header is the leading `--` comment block, in sections:

    -- Question: the question the file answers
    -- When: when to use it during an incident review
    -- Parameters:
    --   cluster  what it means (continuation lines indented further)
    -- Reads: view_a, table_b
    -- Notes: anything else (optional)
    -- Run: psql -v cluster=prod -f queries/x.sql

`-- Parameters: none` declares a file without parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SECTIONS = ("Question", "When", "Parameters", "Reads", "Notes", "Run")
REQUIRED_SECTIONS = ("Question", "When", "Parameters", "Reads", "Run")

_SECTION = re.compile(r"-- ([A-Z][a-z]+):(?: (.*))?$")
_PARAMETER = re.compile(r"-- {3}([A-Za-z_][A-Za-z0-9_]*) {2,}(\S.*)$")
_CONTINUATION = re.compile(r"-- {3,}(\S.*)$")
_PARAMETER_CONTINUATION = re.compile(r"-- {4,}(\S.*)$")
_VARIABLE = re.compile(r":(?:'([A-Za-z_][A-Za-z0-9_]*)'|([A-Za-z_][A-Za-z0-9_]*))")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")
_IDENTIFIER_CHAR = re.compile(r"[A-Za-z0-9_$]")


class QueryFileError(ValueError):
    """A query file that tests cannot read: a bad header, or SQL the substitution refuses."""


@dataclass(frozen=True)
class Header:
    sections: dict[str, str]
    """Section name -> its text, continuation lines joined with single spaces."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Declared parameter -> its description, in header order."""

    @property
    def question(self) -> str:
        return self.sections["Question"]

    @property
    def reads(self) -> list[str]:
        """The relations named by the Reads section."""
        return [name.strip() for name in self.sections["Reads"].split(",") if name.strip()]

    @property
    def run(self) -> str:
        return self.sections["Run"]


def parse_header(sql: str) -> Header:
    """The header of a query file; QueryFileError when a section is missing, repeated or unknown,
    a line is not laid out as above, or a parameter is declared twice or not at all."""
    sections: dict[str, list[str]] = {}
    parameters: dict[str, list[str]] = {}
    current: str | None = None
    parameter: str | None = None
    for number, line in enumerate(sql.splitlines(), start=1):
        if not line.startswith("--"):
            break
        line = line.rstrip()
        if line == "--":
            parameter = None
            continue
        if section := _SECTION.match(line):
            current, parameter = section.group(1), None
            if current not in SECTIONS:
                raise QueryFileError(f"line {number}: unknown section {current!r}; sections are {SECTIONS}")
            if current in sections:
                raise QueryFileError(f"line {number}: section {current!r} appears twice")
            sections[current] = [section.group(2)] if section.group(2) else []
            continue
        if current is None:
            raise QueryFileError(f"line {number}: text before the first section: {line!r}")
        if current == "Parameters" and (declared := _PARAMETER.match(line)):
            parameter = declared.group(1)
            if parameter in parameters:
                raise QueryFileError(f"line {number}: parameter {parameter!r} declared twice")
            parameters[parameter] = [declared.group(2)]
        elif current == "Parameters" and parameter and (more := _PARAMETER_CONTINUATION.match(line)):
            parameters[parameter].append(more.group(1))
        elif current != "Parameters" and (more := _CONTINUATION.match(line)):
            sections[current].append(more.group(1))
        else:
            expected = "'--   name  description'" if current == "Parameters" else "'--   text'"
            raise QueryFileError(f"line {number}: expected a section or {expected}: {line!r}")
    missing = [name for name in REQUIRED_SECTIONS if name not in sections]
    if missing:
        raise QueryFileError(f"missing section(s): {', '.join(missing)}")
    text_after = " ".join(sections["Parameters"])
    if not parameters and text_after != "none":
        raise QueryFileError("no parameter declared: list them under Parameters, or write 'Parameters: none'")
    if parameters and text_after:
        raise QueryFileError(f"unexpected text after 'Parameters:': {text_after!r}")
    return Header(
        sections={name: " ".join(text) for name, text in sections.items()},
        parameters={name: " ".join(text) for name, text in parameters.items()},
    )


def body(sql: str) -> str:
    """The file without its header."""
    lines = sql.splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("--"):
        start += 1
    return "".join(lines[start:])


def _block_comment_end(sql: str, start: int) -> int:
    """Index after the `*/` closing the (nestable) comment opened at `start`."""
    depth, i = 0, start
    while i < len(sql):
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise QueryFileError(f"unterminated /* comment at offset {start}")


def _quoted_end(sql: str, start: int, quote: str, backslash: bool) -> int:
    """Index after the quote closing the literal or identifier opened at `start` (doubled quotes
    stay inside; with `backslash`, so does a backslash-escaped character)."""
    i = start + 1
    while i < len(sql):
        if backslash and sql[i] == "\\":
            i += 2
        elif sql[i] == quote:
            if sql.startswith(quote * 2, i):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    raise QueryFileError(f"unterminated {quote} at offset {start}")


def _follows_identifier(sql: str, i: int) -> bool:
    return i > 0 and bool(_IDENTIFIER_CHAR.match(sql[i - 1]))


def _is_escape_string(sql: str, i: int) -> bool:
    """Whether the quote at `i` opens an E'...' string (backslash escapes)."""
    return i > 0 and sql[i - 1] in "eE" and not _follows_identifier(sql, i - 1)


def to_pyformat(sql: str) -> tuple[str, list[str]]:
    """`sql` with its psql variables as psycopg `%(name)s` placeholders, and the variable names in
    order of first use. `:'name'` (a literal) and `:name` (raw text) both become a bound value."""
    out: list[str] = []
    names: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        end: int | None = None
        if sql.startswith("--", i):
            newline = sql.find("\n", i)
            end = n if newline < 0 else newline
        elif sql.startswith("/*", i):
            end = _block_comment_end(sql, i)
        elif char == "'":
            end = _quoted_end(sql, i, "'", backslash=_is_escape_string(sql, i))
        elif char == '"':
            end = _quoted_end(sql, i, '"', backslash=False)
        elif char == "$" and not _follows_identifier(sql, i):
            tag = _DOLLAR_TAG.match(sql, i)
            if tag:
                close = sql.find(tag.group(0), tag.end())
                if close < 0:
                    raise QueryFileError(f"unterminated {tag.group(0)} quote at offset {i}")
                end = close + len(tag.group(0))
        if end is not None:
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        if sql.startswith("::", i):
            out.append("::")
            i += 2
            continue
        if char == ":" and (variable := _VARIABLE.match(sql, i)):
            name = variable.group(1) or variable.group(2)
            if name not in names:
                names.append(name)
            out.append(f"%({name})s")
            i = variable.end()
            continue
        if sql.startswith(':"', i) or sql.startswith(":{", i):
            raise QueryFileError(
                f"psql variable {sql[i : i + 20]!r} at offset {i} cannot be a bound parameter;"
                " use :'name' or :name"
            )
        out.append("%%" if char == "%" else char)
        i += 1
    return "".join(out), names


def variables(sql: str) -> list[str]:
    """The psql variables `sql` uses, in order of first use."""
    return to_pyformat(sql)[1]
