"""What a person types, read in one place (`monitor.core.user_input`, and the duration and size
grammars that read digits the same way): hostile values as data, each refused with a ValueError
that names the field, never read as something else and never an OverflowError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.act.policy import parse_duration_ms, parse_size
from monitor.core.user_input import BIGINT_MAX, decimal, timestamp, whole_number
from monitor.core.vocabulary import parse_duration

NOT_NUMBERS = [
    "²",  # a superscript: str.isdigit() says yes, int() refuses
    "٣",  # an Arabic-Indic three: int() reads it as 3
    "\uff13",  # a full-width three
    "1" * 5_000,  # past Python's 4,300-digit limit
    "9" * 26,  # past any bound, refused before conversion
    str(BIGINT_MAX + 1),
    "-1",
    "+1",
    " 1",
    "1_000",
    "1.0",
    "0x10",
    "",
    "1\x00",
    True,
    False,
    1.0,
    None,
    [1],
]


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_a_whole_number_is_ascii_digits_within_its_bounds(value: object) -> None:
    with pytest.raises(
        ValueError, match=r"^incident must be a whole number from 1 to 9,223,372,036,854,775,807"
    ):
        whole_number(value, "incident", low=1)


@pytest.mark.parametrize(("value", "number"), [("1", 1), ("007", 7), (str(BIGINT_MAX), BIGINT_MAX), (42, 42)])
def test_a_whole_number_is_read(value: object, number: int) -> None:
    assert whole_number(value, "id", low=1) == number


def test_a_refusal_shows_the_value_short_and_printable() -> None:
    with pytest.raises(ValueError) as caught:
        whole_number("1" * 5_000 + "\x1b[31m", "id")
    message = str(caught.value)
    assert "(5,005 characters)" in message and len(message) < 200 and "\x1b" not in message


NOT_TIMES = [
    "0001-01-01T00:00:00Z",  # window arithmetic overflowed
    "9999-12-31T23:59:59Z",
    "2026-11-21T22:00:00",  # no offset
    "٢٠٢٦-11-21T22:00:00Z",
    "1700000000",
    "2026-11-21T22:00:00Z" + " " * 50,
    "yesterday",
    True,
    1_700_000_000,
    None,
]


@pytest.mark.parametrize("value", NOT_TIMES, ids=repr)
def test_a_time_is_iso_8601_with_offset_within_bounds(value: object) -> None:
    with pytest.raises(ValueError, match=r"^until "):
        timestamp(value, "until")


def test_a_time_is_read_and_leaves_room_for_a_window() -> None:
    at = timestamp("2026-11-21T23:00:00+01:00", "until")
    assert at == datetime(2026, 11, 21, 22, tzinfo=UTC)
    for edge in ("1970-01-01T00:00:00Z", "9000-01-01T00:00:00Z"):
        bound = timestamp(edge, "until")
        assert bound - timedelta(days=3650) and bound + timedelta(days=3650)


@pytest.mark.parametrize(
    "value", ["٣", "1e5", "1e999999", "NaN", "Infinity", "-1", "1.", ".5", "1" * 50, "²"]
)
def test_a_decimal_is_ascii_digits_with_one_optional_fraction(value: str) -> None:
    with pytest.raises(ValueError, match=r"^new retention.ms: .* (is not a number|is too long)"):
        decimal(value, "new retention.ms")


@pytest.mark.parametrize(
    "value", ["٣s", "²m", "\uff13h", "1" * 5_000 + "s", True, 1, "1.5h", "-5m"], ids=repr
)
def test_durations_and_sizes_read_ascii_digits_only(value: object) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(value)
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration_ms(value)


@pytest.mark.parametrize("value", ["٣GiB", "²", "1" * 5_000, True, 1.5, "1e3"], ids=repr)
def test_a_size_reads_ascii_digits_only(value: object) -> None:
    with pytest.raises(ValueError, match="bad size"):
        parse_size(value)
