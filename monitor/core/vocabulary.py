"""The domain's words, each defined once: severities, consumer statuses, alert, run and outbox
states, and the duration grammar operators write in rules, routing and retention policy.

Everything that ranks, lists or checks one of these words imports it from here, so the pager, the
dashboard, the CLI and the database's CHECK constraints cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from monitor.core.user_input import shown

# ---------------------------------------------------------------------------------------------
# Severity of a rule tier, a finding and an alert

Severity = Literal["info", "warning", "critical"]
SEVERITIES: Final[tuple[Severity, ...]] = ("info", "warning", "critical")
"""Least severe first."""
SEVERITY_RANK: Final[Mapping[str, int]] = {name: rank for rank, name in enumerate(SEVERITIES, start=1)}
"""Higher is more severe: `info` 1, `warning` 2, `critical` 3."""
MOST_SEVERE_FIRST: Final[tuple[Severity, ...]] = tuple(reversed(SEVERITIES))
"""The order findings and alerts are listed in."""


def most_severe_first_sql(column: str) -> str:
    """A SQL sort key putting the severity in `column` most severe first (an unknown one last)."""
    words = ", ".join(f"'{severity}'" for severity in MOST_SEVERE_FIRST)
    return f"array_position(ARRAY[{words}], {column}) NULLS LAST"


# ---------------------------------------------------------------------------------------------
# A consumer group's sliding-window status (Burrow's words and order)

ConsumerStatus = Literal["OK", "WARN", "ERR", "STOP", "STALL", "REWIND"]
CONSUMER_STATUSES: Final[tuple[ConsumerStatus, ...]] = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND")
"""Best to worst, Burrow's order. A group's `status` folds STOP, STALL and REWIND into ERR; its
partitions keep them apart."""
STATUS_RANK: Final[Mapping[str, int]] = {name: rank for rank, name in enumerate(CONSUMER_STATUSES, start=1)}
"""Higher is worse: `OK` 1 ... `REWIND` 6; the worst partition is the one with the highest rank."""


def worst_status_first(column: str = "status") -> str:
    """A SQL sort key: the worst consumer status in `column` first (the order above)."""
    return f"array_position(ARRAY{list(CONSUMER_STATUSES)!r}, {column}) DESC NULLS LAST"


BAD_STATUSES: Final[frozenset[str]] = frozenset(
    s for s in CONSUMER_STATUSES if STATUS_RANK[s] >= STATUS_RANK["ERR"]
)
"""ERR, STOP, STALL and REWIND: a consumer that is not keeping up."""
STOPPED_STATUSES: Final[tuple[ConsumerStatus, ...]] = ("STOP", "STALL")
"""A consumer that stopped moving: no commit for longer than its window (STOP), or the same
committed offset while lag grows (STALL). The dashboard counts such groups as stopped."""
NOT_FOUND_STATUS: Final = "NOTFOUND"
"""Burrow's status for a group or partition it has no data for; ranks below OK."""


# ---------------------------------------------------------------------------------------------
# Lagging: a group (on a topic, a partition) with messages it has not read


def is_lagging(offset_lag: int | None) -> bool:
    """Whether an offset lag says lagging: offset lag > 0 (DOMAIN.md; unknown is not lagging)."""
    return offset_lag is not None and offset_lag > 0


def lagging_sql(offset_lag: str = "offset_lag") -> str:
    """A SQL condition: the offset lag in the column `offset_lag` says lagging (`is_lagging`)."""
    return f"{offset_lag} > 0"


# ---------------------------------------------------------------------------------------------
# States and statuses kept in the database (each table's CHECK constraint uses these)

ALERT_STATES: Final = ("pending", "firing", "resolved")
"""An alert, and the finding it comes from: pending (held for the rule's `for`), firing, resolved."""
RUN_STATUSES: Final = ("running", "ok", "partial", "failed", "skipped")
"""A collection or evaluation run."""
REACHED_RUN_STATUSES: Final = ("ok", "partial")
"""Runs that reached the cluster (a partial run failed only for some entities): what counts as
a job's latest success."""
WRITING_RUN_STATUSES: Final = ("running", *REACHED_RUN_STATUSES)
"""Runs whose samples may be in the store: reached, or still going (a run writes its samples
before its row says how it ended)."""
FAULTY_RUN_STATUSES: Final = ("failed", "partial")
"""Runs with errors to show."""

FULL_EVALUATION: Final = "full"
"""An evaluation that computes every entity from its inputs."""
INCREMENTAL_EVALUATION: Final = "incremental"
"""An evaluation that copies the rows of the consumer groups that stood still since the previous one
(monitor.store.carry) and computes the rest."""

OUTBOX_STATES: Final = ("pending", "sending", "sent", "failed", "dropped")
"""A notification in the outbox."""
OUTBOX_UNDELIVERED: Final = ("pending", "sending")
"""An outbox notification still to be delivered (the others are sent, or given up: failed, dropped)."""
RESOLVED_GONE: Final = "gone"
"""Why a finding (and its alert) resolved when the cluster no longer has its entity: the consumer
group or its committed offsets deleted, the topic deleted, the broker unregistered from the
controller (decommissioned, where a broker that is down is still registered)."""
RESOLVE_REASONS: Final = (RESOLVED_GONE,)
"""The reasons a finding or alert may give for resolving; none (NULL) when its condition stopped
holding."""


# ---------------------------------------------------------------------------------------------
# What a group-partition's committed offset says beside its lag

COMMITTED_BEYOND_END: Final = "committed beyond the end"
"""A committed offset above the partition's log end offset (the topic deleted and made again, an
offset restore gone wrong): its lag reads 0 but the group is not caught up, and its next restart
resets to the earliest or latest offset, reading data again or skipping it. A commit can briefly
be above a stale end (DOMAIN.md): the lag stays clamped at 0 and counted, and the rule that warns
about it waits for its `for:`."""


# ---------------------------------------------------------------------------------------------
# Durations: 30s, 5m, 2h, 1d, 1h30m; 0 where nothing is allowed

DURATION_UNITS: Final = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
MAX_DURATION_SECONDS: Final = 3650 * 86400
"""Ten years: longer than any wait, interval or retention an operator means to write."""
_MAX_DURATION_TEXT = 40
MIN_INTERVAL_SECONDS: Final = 0.001
"""The shortest time a setting in seconds may give (one millisecond); shorter is a slip."""
_DURATION = re.compile(r"^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$")
_EXAMPLES = "30s, 5m, 2h or 1h30m"


def parse_duration(value: Any, *, allow_zero: bool = True, examples: str = _EXAMPLES) -> int:
    """Seconds in a duration such as 30s, 5m, 2h, 1d or 1h30m (`0` too, when `allow_zero`).

    Raises ValueError saying how to write one; `examples` are the ones the message suggests.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value == 0 and allow_zero:
            return 0
        number = str(value) if value.bit_length() <= 64 else "5"
        raise ValueError(f"bad duration {shown(value)}: add a unit, e.g. {number}s or {number}m")
    text = value.strip() if isinstance(value, str) else ""
    found = _DURATION.match(text) if text and len(text) <= _MAX_DURATION_TEXT else None
    if text == "0" and allow_zero:
        return 0
    if found is not None:
        seconds = sum(
            int(part) * unit for part, (_, unit) in zip(found.groups(), DURATION_UNITS, strict=True) if part
        )
        if seconds > MAX_DURATION_SECONDS:
            raise ValueError(
                f"bad duration {shown(value)}: at most {format_duration(MAX_DURATION_SECONDS)} (ten years)"
            )
        if seconds > 0 or allow_zero:
            return seconds
    raise ValueError(f"bad duration {shown(value)}: write a number and a unit, e.g. {examples}")


def check_seconds(seconds: float) -> float:
    """`seconds` when it is a time a setting can mean: finite, zero or at least a millisecond, at
    most MAX_DURATION_SECONDS. Raises ValueError saying what to write instead."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"{seconds} is not a number of seconds; write a finite number, e.g. 30")
    if 0 < abs(seconds) < MIN_INTERVAL_SECONDS:
        raise ValueError(
            f"{seconds:g} s is shorter than a millisecond; write at least {MIN_INTERVAL_SECONDS}"
        )
    if abs(seconds) > MAX_DURATION_SECONDS:
        raise ValueError(
            f"{seconds:g} s is longer than {format_duration(MAX_DURATION_SECONDS)} (ten years); write less"
        )
    return seconds


def format_duration(seconds: int | None) -> str:
    """The shortest text for `seconds` in the same grammar: 0s, 45s, 5m, 1h30m, 2d; `-` for None."""
    if seconds is None:
        return "-"
    if seconds <= 0:
        return "0s"
    text = ""
    for suffix, unit in DURATION_UNITS:
        count, seconds = divmod(seconds, unit)
        if count:
            text += f"{count}{suffix}"
    return text
