"""How numbers read in messages (the jinja2 filters that rule summaries and notifications share),
and how names from Kafka and from users reach a terminal or a log: as data, never as control.

A root module, like `types.py`: the evaluate and alert stages may not import each other, and both
render the same quantities for the same on-call engineer.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any, Final

from markupsafe import Markup

from monitor.core.derived import ADVICE_HORIZON


def duration_filter(seconds: float | None) -> str:
    """42 min, 2 h 5 min, 3 d 4 h, 45 s; `unknown` for null."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "unknown"
    if math.isinf(seconds):
        return "forever"
    total = max(round(float(seconds)), 0)
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{round(total / 60)} min"
    if total < 86400:
        hours, minutes = divmod(round(total / 60), 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(round(total / 3600), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def latency_filter(seconds: float | None) -> str:
    """A request's latency: 4 ms, 120 ms, 2.5 s; past a minute as `duration_filter`."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "unknown"
    value = max(float(seconds), 0.0)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    return duration_filter(value)


def percent_filter(ratio: float | None, digits: int = 0) -> str:
    """0.913 -> 91%."""
    return "unknown" if ratio is None else f"{float(ratio) * 100:.{digits}f}%"


def bytes_filter(size: float | None) -> str:
    """1288490188 -> 1.2 GiB."""
    if size is None:
        return "unknown"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def number_filter(number: float | None, digits: int = 0) -> str:
    """1234567 -> 1,234,567; with digits=1: 1,234.5."""
    return "unknown" if number is None else f"{float(number):,.{digits}f}"


def rate_filter(per_second: float) -> str:
    """A rate in records/s for a sentence: 120/s, 80/s, 2.5/s."""
    return f"{number_filter(per_second, 0 if abs(per_second) >= 10 else 1)}/s"


def catch_up_filter(
    offset_lag: float | None,
    consume_rate: float | None,
    produce_rate: float | None,
    time_to_catch_up_seconds: float | None,
    catch_up_low_seconds: float | None = None,
    catch_up_high_seconds: float | None = None,
    time_until_data_loss_seconds: float | None = None,
) -> str:
    """The catch-up forecast as one sentence, for notifications, pages and the CLI (the columns
    of monitor.core.derived): "catches up in ~14 min at the current rate (10 min to 25 min)",
    "not catching up: reads 80/s, 120/s arrive; retention deletes unread data in 42 min", "not
    catching up: reads as fast as records arrive (20/s); the backlog of 12 stays"."""
    loss = (
        ""
        if time_until_data_loss_seconds is None
        else f"; retention deletes unread data in {duration_filter(time_until_data_loss_seconds)}"
    )
    if offset_lag is None:
        return "lag unknown"
    if offset_lag <= 0:
        return "caught up"
    if consume_rate is None or produce_rate is None:
        return f"no catch-up forecast yet (no rates over the window){loss}"
    if time_to_catch_up_seconds is None:
        reads, arrive = rate_filter(consume_rate), rate_filter(produce_rate)
        if reads == arrive:  # not behind: the backlog holds, as a group that keeps up does
            stays = f"; the backlog of {number_filter(offset_lag)} stays"
            return f"not catching up: reads as fast as records arrive ({reads}){stays}{loss}"
        return f"not catching up: reads {reads}, {arrive} arrive{loss}"
    low, high = catch_up_low_seconds, catch_up_high_seconds
    if high is None and low is not None:
        spread = f" (at least {duration_filter(low)}; the rates vary too much to rule out not catching up)"
    elif low is not None and high is not None and duration_filter(low) != duration_filter(high):
        spread = f" ({duration_filter(low)} to {duration_filter(high)})"
    else:
        spread = ""
    return f"catches up in ~{duration_filter(time_to_catch_up_seconds)} at the current rate{spread}{loss}"


def consumer_advice_text(
    members: int | None,
    consumers_needed: int | None,
    advice_limited_by: str | None = None,
    hot_topic: str | None = None,
    hot_partition: int | None = None,
    offset_lag: float | None = None,
    time_until_data_loss_seconds: float | None = None,
) -> str:
    """The consumer advice as one sentence (the columns of monitor.core.derived), "" when there
    is none: "3 consumers (now 1) would read the backlog before retention deletes it", "more
    consumers cannot help: partition 7 of orders alone gets more than one consumer reads", "no
    consumer is running"."""
    if offset_lag is not None and offset_lag <= 0:
        return ""
    if members == 0:
        return "no consumer is running: start one (more of them cannot help before)"
    if consumers_needed is None:
        return ""
    if advice_limited_by == "hot_partition":
        return (
            f"more consumers cannot help: partition {hot_partition} of {hot_topic} alone gets more "
            "than one consumer reads"
        )
    deadline = (
        f"within {duration_filter(ADVICE_HORIZON.total_seconds())}"
        if time_until_data_loss_seconds is None
        else "before retention deletes it"
    )
    now = "unknown" if members is None else members
    count = f"{consumers_needed} consumer{'' if consumers_needed == 1 else 's'}"
    if advice_limited_by == "partitions":
        limit = "it needs more partitions"
        return f"even {count} (one per partition; now {now}) cannot read the backlog {deadline}: {limit}"
    return f"{count} (now {now}) would read the backlog {deadline}"


def advice_filter(*row: Any) -> str:
    """`consumer_advice_text` (of the same arguments) as a clause for a summary that already says
    something: "; " and the sentence, or "" (the templates' `advice` filter, written right after
    the catch-up forecast)."""
    text = consumer_advice_text(*row)
    return f"; {text}" if text else ""


NUMBER_FILTERS: Final[dict[str, Callable[..., str]]] = {
    "duration": duration_filter,
    "latency": latency_filter,
    "percent": percent_filter,
    "bytes": bytes_filter,
    "number": number_filter,
    "catch_up": catch_up_filter,
    "advice": advice_filter,
}
"""The filters by the names templates use."""

ROW_VALUE_FILTERS: Final = frozenset({"catch_up", "advice"})
"""The filters whose arguments are values of the row (an offset lag, a number of consumers), not
widths or counts: a template's size bound does not apply to them."""


# ---------------------------------------------------------------------------------------------
# Names are data: what reaches a terminal or a log line


def _control_escapes() -> dict[int, str]:
    table = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
    table |= {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    # Line and paragraph separators end a line too; the bidirectional controls (Unicode's
    # Bidi_Control: marks, embeddings, overrides, isolates) reorder what is shown; zero-width and
    # invisible characters make two names look alike (`pay\u200bments` is not `payments`).
    invisible = (0x061C, *range(0x200B, 0x2010), 0x2028, 0x2029, *range(0x202A, 0x202F))
    for code in (*invisible, *range(0x2060, 0x2065), *range(0x2066, 0x206A), 0xFEFF):
        table[code] = f"\\u{code:04x}"
    return table


_CONTROL_ESCAPES: Final = _control_escapes()

CONTROL_CODES: Final = frozenset(_CONTROL_ESCAPES)
"""The code points `printable` escapes: C0 and C1 controls, DEL, Unicode line separators and
bidirectional overrides; text a person edits holds none of them but tab, newline and CR."""


def printable(value: object) -> str:
    """`value` as text that cannot steer a terminal, forge a log line or pass for another name:
    every control character (C0 and C1, so ESC, BEL and the start of OSC-8 links; newline, tab,
    DEL), every Unicode line separator, bidirectional control and zero-width character becomes a
    visible escape (`\\n`, `\\x1b`, `\\u202e`).

    THE way a name that comes from Kafka or from a user (a group id, topic, cluster, broker host,
    member, comment) is shown, wherever it is shown: the terminal, the log, the web pages and
    the notifications (`visible_output`, their templates' `finalize`)."""
    return str(value).translate(_CONTROL_ESCAPES)


_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


def printable_lines(value: object) -> list[str]:
    """Free text a person wrote over several lines (a silence's comment, a retention request's
    reason): its lines (split at LF, CR LF or CR), each through `printable`. Only those breaks are
    kept; any other control character, a Unicode line separator included, stays a visible escape."""
    return [printable(line) for line in _LINE_BREAK.split(str(value))]


def lines_markup(value: object) -> Markup:
    """`printable_lines` as HTML: the lines escaped, joined by `<br>` (the pages' `lines` filter)."""
    return Markup("<br>\n").join(printable_lines(value))


def visible_output(value: object) -> object:
    """jinja2's `finalize` for the pages and the notifications: every string a template prints is
    shown through `printable`, so no template has to remember it for a name. Markup (HTML a
    template or macro built, already escaped) is left as it is; a link addresses the real name
    with `urlencode`, whose output holds no character `printable` changes."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


def printable_markup(value: object) -> str:
    """`printable(value)` with Rich markup escaped, for a string that Rich renders as markup (a
    table cell, a title, `Console.print` with markup on): `[bold]x[/]` prints as written."""
    from rich.markup import escape

    return escape(printable(value))


class PrintableLogFormatter(logging.Formatter):
    """A log formatter whose line (time, level, logger and message) goes through `printable`, so a
    group id with a newline in it cannot forge a second log line, nor an escape sequence reach the
    terminal that shows the log. A traceback that follows keeps its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))
