"""The shared vocabulary: one ranking of severities and statuses, one duration grammar, and the one
job -> interval map the collection page reads."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.act.policy import parse_duration_ms
from monitor.collect.jobs import job_intervals
from monitor.core.scheduler import run_intervals
from monitor.core.settings import RetentionConfig
from monitor.core.vocabulary import (
    BAD_STATUSES,
    CONSUMER_STATUSES,
    MAX_DURATION_SECONDS,
    MOST_SEVERE_FIRST,
    SEVERITY_RANK,
    STATUS_RANK,
    format_duration,
    is_lagging,
    lagging_sql,
    most_severe_first_sql,
    parse_duration,
)


def test_critical_outranks_warning_outranks_info() -> None:
    assert SEVERITY_RANK["critical"] > SEVERITY_RANK["warning"] > SEVERITY_RANK["info"]
    assert MOST_SEVERE_FIRST == ("critical", "warning", "info")


def test_queries_list_the_most_severe_first() -> None:
    key = most_severe_first_sql("a.severity")
    assert key == "array_position(ARRAY['critical', 'warning', 'info'], a.severity) NULLS LAST"


def test_lagging_is_an_offset_lag_above_zero_in_python_and_in_sql() -> None:
    assert [is_lagging(lag) for lag in (None, 0, 1)] == [False, False, True]
    assert lagging_sql("coalesce(f.offset_lag, g.offset_lag)") == "coalesce(f.offset_lag, g.offset_lag) > 0"


def test_statuses_rank_in_burrows_order() -> None:
    assert [STATUS_RANK[s] for s in CONSUMER_STATUSES] == [1, 2, 3, 4, 5, 6]
    assert max(("WARN", "REWIND", "ERR"), key=STATUS_RANK.__getitem__) == "REWIND"
    assert {"ERR", "STOP", "STALL", "REWIND"} == BAD_STATUSES


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        (0, 0),
        ("0s", 0),
        ("45s", 45),
        ("5m", 300),
        ("1h30m", 5400),
        ("2d", 172800),
        (" 1d12h ", 129600),
    ],
)
def test_durations_parse_and_format_back(text: Any, seconds: int) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (5, "add a unit, e.g. 5s or 5m"),
        (True, "write a number and a unit"),
        ("1.5h", "write a number and a unit"),
        ("5 m", "write a number and a unit"),
        ("", "write a number and a unit"),
        ("m", "write a number and a unit"),
        ("1" * 41 + "s", "write a number and a unit"),
        ("3651d", "at most 3650d (ten years)"),
    ],
)
def test_bad_durations_say_how_to_write_one(value: Any, says: str) -> None:
    with pytest.raises(ValueError, match="bad duration") as caught:
        parse_duration(value)
    assert says in str(caught.value)


def test_the_longest_duration_is_accepted() -> None:
    assert parse_duration("3650d") == MAX_DURATION_SECONDS


def test_zero_is_refused_where_it_means_nothing() -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 30m, 12h"):
        parse_duration("0s", allow_zero=False, examples="30m, 12h")
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration_ms(0)
    assert parse_duration_ms("1m") == 60_000


def test_the_retention_job_has_an_interval_so_it_can_go_stale() -> None:
    intervals = run_intervals(retention=RetentionConfig(interval_seconds=120), collect=job_intervals())
    assert intervals["retention"] == 120
    assert set(intervals) >= {
        "offsets",
        "metadata",
        "configs",
        "log_dirs",
        "evaluate",
        "alert",
        "maintenance",
    }
