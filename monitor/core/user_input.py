"""Numbers and times a person types, read in one place for the web and the command line.

A number is ASCII digits only (`٣` or `²` are not digits here, though Python's `int` reads the
first as 3), bounded in length before it is converted (Python refuses more than 4,300 digits with
an error of its own) and then in value; a JSON `true` is not a number. A time is ISO 8601 with its
UTC offset, within years that date arithmetic and PostgreSQL can hold. Durations have their
grammar in `vocabulary.parse_duration`, which reads its digits the same way.

Every refusal is a ValueError whose message names the field, shows what was given (shortened,
control characters visible) and says what to write instead.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Final

from monitor.core.formatting import printable

BIGINT_MAX: Final = 2**63 - 1
"""The largest id or count PostgreSQL's bigint (and a Kafka long) holds."""
_DIGITS: Final = re.compile(r"[0-9]+", re.ASCII)
_DECIMAL: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_MAX_DIGITS: Final = 25
"""Longer than any bound here, far shorter than what makes `int` slow or refuse."""
_MAX_TEXT: Final = 40
"""The longest decimal number read: Kafka's largest value is 19 digits."""
_SHOWN: Final = 40
EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(9000, 1, 1, tzinfo=UTC)
"""The times a request may name: room on both sides for a window or a duration around them."""
_MAX_TIME_TEXT: Final = 40


def shown(value: object) -> str:
    """`value` as an error message quotes it: printable, at most `_SHOWN` characters."""
    if isinstance(value, int) and value.bit_length() > 1000:  # repr() refuses past 4,300 digits
        return f"a number of about {int(value.bit_length() * 0.30103):,} digits"
    if isinstance(value, int):
        return str(value)
    text = value if isinstance(value, str) else repr(value)
    if len(text) > _SHOWN:
        text = f"{text[:_SHOWN]}... ({len(text):,} characters)"
    return repr(printable(text))


def whole_number(value: object, what: str, *, low: int = 0, high: int = BIGINT_MAX) -> int:
    """`value` as an int in [low, high]: an int (not a bool) or text of ASCII digits (no sign,
    space, underscore or fraction). Raises ValueError naming `what` and the range."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and len(value) <= _MAX_DIGITS and _DIGITS.fullmatch(value):
        number = int(value)
    if number is None or not low <= number <= high:
        raise ValueError(
            f"{what} must be a whole number from {low:,} to {high:,} in the digits 0-9, not {shown(value)}"
        )
    return number


def decimal(value: str, what: str) -> Decimal:
    """Text such as 2 or 1.5 (ASCII digits, one optional fraction) as a Decimal. Raises
    ValueError naming `what` (Decimal itself would read `٣` as 3 and `1e999999`)."""
    if len(value) > _MAX_TEXT:
        raise ValueError(f"{what}: {shown(value)} is too long for a number (at most {_MAX_TEXT} characters)")
    if not _DECIMAL.fullmatch(value):
        raise ValueError(f"{what}: {shown(value)} is not a number; write e.g. 2 or 1.5")
    return Decimal(value)


def is_digits(value: str) -> bool:
    """Whether `value` is written in the ASCII digits 0-9 only (and is not empty)."""
    return _DIGITS.fullmatch(value) is not None


def timestamp(value: object, what: str) -> datetime:
    """`value` (a datetime, or ISO 8601 text such as 2026-11-21T22:00:00Z) as an aware datetime
    between 1970 and 9000. Raises ValueError naming `what` and how to write one."""
    example = "2026-11-21T22:00:00Z or 2026-11-21T23:00:00+01:00"
    at: datetime | None = value if isinstance(value, datetime) else None
    if isinstance(value, str) and len(value) <= _MAX_TIME_TEXT and value.isascii():
        try:
            at = datetime.fromisoformat(value.strip())
        except ValueError:
            at = None
    if at is None:
        raise ValueError(f"{what} must be a time in ISO 8601, like {example}; not {shown(value)}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{what} needs its UTC offset, like {example}; not {shown(value)}")
    if not EARLIEST <= at <= LATEST:
        raise ValueError(f"{what} must lie between the years 1970 and 9000, not {shown(value)}")
    return at
