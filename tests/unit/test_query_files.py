"""The psql-variable substitution and the header reader the queries/ catalogue tests rely on."""

from __future__ import annotations

import pytest

from tests.query_files import QueryFileError, body, parse_header, to_pyformat, variables


@pytest.mark.parametrize(
    ("sql", "expected", "names"),
    [
        ("SELECT :'cluster'", "SELECT %(cluster)s", ["cluster"]),
        ("LIMIT :rows", "LIMIT %(rows)s", ["rows"]),
        ("CAST(:'since' AS timestamptz)", "CAST(%(since)s AS timestamptz)", ["since"]),
        ("x = :'a'::date", "x = %(a)s::date", ["a"]),
        ("x::int + y::text", "x::int + y::text", []),
        ("a BETWEEN :'a' AND :'b' OR c = :'a'", "a BETWEEN %(a)s AND %(b)s OR c = %(a)s", ["a", "b"]),
        ("f(x:=1)", "f(x:=1)", []),
        ("arr[1:2]", "arr[1:2]", []),
        ("arr[1:n]", "arr[1%(n)s]", ["n"]),  # as in psql: :n is a variable wherever it appears
        ("x LIKE '50%'", "x LIKE '50%%'", []),
        ("x % 7", "x %% 7", []),
        ("'it''s :'a' here'", "'it''s :'a' here'", []),
        ("E'\\' :a' || :b", "E'\\' :a' || %(b)s", ["b"]),
        ("'\\' || :a", "'\\' || %(a)s", ["a"]),  # a standard string: the backslash is a character
        ('SELECT ":a" FROM t', 'SELECT ":a" FROM t', []),
        ('"say ""x"" :a"', '"say ""x"" :a"', []),
        ("-- :'a' 100%\nSELECT :b", "-- :'a' 100%%\nSELECT %(b)s", ["b"]),
        ("SELECT 1 -- :a", "SELECT 1 -- :a", []),
        ("/* :a /* :b */ :c */ :d", "/* :a /* :b */ :c */ %(d)s", ["d"]),
        ("$$ :a $$ || :b", "$$ :a $$ || %(b)s", ["b"]),
        ("$fn$ :a $x$ $fn$ :b", "$fn$ :a $x$ $fn$ %(b)s", ["b"]),
        ("a$b$ = :c", "a$b$ = %(c)s", ["c"]),  # an identifier with dollars, not a dollar quote
        ("$1 + :a", "$1 + %(a)s", ["a"]),
        ("x = :'a'", "x = %(a)s", ["a"]),
        ("x = :'1a'", "x = :'1a'", []),  # not a variable name: a colon, then a literal
    ],
)
def test_to_pyformat(sql: str, expected: str, names: list[str]) -> None:
    assert to_pyformat(sql) == (expected, names)


@pytest.mark.parametrize(
    "sql",
    ['SELECT :"column"', "\\if :{?cluster}", "'open", '"open', "/* open", "$$ open", "E'\\'"],
)
def test_to_pyformat_refuses_what_cannot_be_bound_or_is_unterminated(sql: str) -> None:
    with pytest.raises(QueryFileError):
        to_pyformat(sql)


def test_variables_in_order_of_first_use() -> None:
    assert variables("SELECT :'b', :a, :'b' -- :'c'") == ["b", "a"]


HEADER = """\
-- Question: Which groups lost data?
--   (the ones retention deleted messages of)
-- When: first thing in a review.
--
-- Parameters:
--   cluster  the cluster
--   since    start of the window,
--            inclusive
-- Reads: data_loss_events, group_lag
-- Notes: loss is recorded once.
-- Run: psql -v cluster=prod -v since=2026-11-01 -f queries/x.sql
SELECT 1 -- not the header
"""


def test_parse_header() -> None:
    header = parse_header(HEADER)
    assert header.question == "Which groups lost data? (the ones retention deleted messages of)"
    assert header.parameters == {"cluster": "the cluster", "since": "start of the window, inclusive"}
    assert header.reads == ["data_loss_events", "group_lag"]
    assert header.sections["Notes"] == "loss is recorded once."
    assert header.run == "psql -v cluster=prod -v since=2026-11-01 -f queries/x.sql"
    assert body(HEADER) == "SELECT 1 -- not the header\n"


def test_parse_header_with_no_parameters() -> None:
    header = parse_header(
        HEADER.replace("--   cluster  the cluster\n", "")
        .replace("--   since    start of the window,\n--            inclusive\n", "")
        .replace("-- Parameters:", "-- Parameters: none")
    )
    assert header.parameters == {}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("--   cluster  the cluster\n--   since    start of the window,\n--            inclusive\n", ""),
            "no parameter declared",
        ),
        (("-- Parameters:\n", "-- Parameters: none\n"), "unexpected text"),
        (("-- Reads: data_loss_events, group_lag\n", ""), "missing section"),
        (("-- Notes:", "-- Note:"), "unknown section"),
        (("-- Notes:", "-- When:"), "appears twice"),
        (("--   since ", "--   cluster "), "declared twice"),
        (("--   cluster  the cluster", "--  cluster  the cluster"), "expected a section"),
        (("--   (the ones", "-- (the ones"), "expected a section"),
        (("-- Question: Which", "-- Which"), "before the first section"),
    ],
)
def test_parse_header_refuses(edit: tuple[str, str], message: str) -> None:
    old, new = edit
    assert old in HEADER
    with pytest.raises(QueryFileError, match=message):
        parse_header(HEADER.replace(old, new, 1))
