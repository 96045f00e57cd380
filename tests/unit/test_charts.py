"""The dashboard's charts: self-contained accessible SVG (no script, no request), coloured by
health, stable for a cache, and thinned without losing a spike."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from monitor.expose.web import charts
from monitor.expose.web.charts import BrokerBar, LagPoint
from monitor.expose.web.health import BAD, WARN
from monitor.expose.web.pages.group import CHART_STEP, backlog_projection, chart_end

NOW = datetime(2026, 6, 1, 12, 0, 20, tzinfo=UTC)
BROKERS = [
    BrokerBar(1, True, 30, 20.0, 0.40),
    BrokerBar(2, True, 30, 20.0, 0.97),
    BrokerBar(3, False, 0, None, None),
]


def _external(svg: str) -> list[str]:
    """Every reference a browser could fetch (namespace URIs and comments are not fetched)."""
    without_comments = re.sub(r"<!--.*?-->", "", svg, flags=re.DOTALL)
    return re.findall(r"""(?:href|src)\s*=\s*["']([^"']+)|url\(([^)#][^)]*)\)|@import""", without_comments)


def test_bar_charts_are_accessible_images_with_nothing_to_fetch() -> None:
    leaders = charts.leader_balance("prod", BROKERS)
    disk = charts.disk_usage("prod", BROKERS)
    for chart in (leaders, disk):
        svg = str(chart.svg)
        assert svg.startswith("<svg") and 'role="img"' in svg
        assert "<script" not in svg and _external(svg) == []
    assert "<title" in str(leaders.svg) and "Partition leaders per broker, prod" in str(leaders.svg)
    assert "broker 3 (down): 0 leaders" in leaders.alt
    assert "broker 2: 97% used" in disk.alt


def test_bars_are_coloured_by_health() -> None:
    # The colours come with the bars (the page takes them from the findings on each broker).
    disk = str(charts.disk_usage("prod", [*BROKERS[:1], replace(BROKERS[1], disk_health=BAD)]).svg)
    assert charts.RED in disk and charts.GREEN in disk
    leaders = str(charts.leader_balance("prod", [BrokerBar(1, True, 31, 20.0, None, leader_health=WARN)]).svg)
    assert charts.AMBER in leaders and charts.RED not in leaders
    unflagged = str(charts.disk_usage("prod", BROKERS).svg)
    assert charts.RED not in unflagged, "97% used colours nothing without a finding: the rule decides"


def test_a_chart_is_the_same_for_the_same_inputs() -> None:
    first = charts.leader_balance("prod", BROKERS)
    second = charts.leader_balance("prod", list(BROKERS))
    assert first.svg == second.svg
    assert charts.leader_balance("stage", BROKERS).svg != first.svg


def test_lag_history_is_two_charts_over_the_window() -> None:
    points = [LagPoint(NOW - timedelta(minutes=m), 1000 - m, 60.0 * (30 - m)) for m in range(30)]
    drawn = charts.lag_history("billing", points, NOW - timedelta(hours=1), NOW)
    assert "Lag in messages of billing over the last 1 h" in str(drawn.offsets.svg)
    assert "Lag in seconds of billing over the last 1 h" in str(drawn.seconds.svg)
    assert "peak 1,000 messages; latest 1,000" in drawn.offsets.alt
    assert "<script" not in str(drawn.seconds.svg)


def test_thinning_keeps_each_buckets_peak() -> None:
    points = [LagPoint(NOW + timedelta(seconds=i), 5, 1.0) for i in range(1000)]
    points[517] = LagPoint(points[517].at, 99_999, 3600.0)
    thinned = charts.thin(points, 100)
    assert len(thinned) == 100
    assert max(p.offset_lag or 0 for p in thinned) == 99_999
    assert max(p.lag_seconds or 0 for p in thinned) == 3600.0
    assert charts.thin(points[:10], 100) == tuple(points[:10])


def test_time_axis_labels_are_round_times() -> None:
    start = datetime(2026, 6, 1, 11, 3, 20, tzinfo=UTC)
    ticks = charts.time_ticks(start, start + timedelta(hours=1))
    assert [t.strftime("%H:%M") for t in ticks] == ["11:10", "11:20", "11:30", "11:40", "11:50", "12:00"]
    week = charts.time_ticks(start - timedelta(days=7), start)
    assert len(week) == 7 and all(t.hour == 0 and t.minute == 0 for t in week)


def test_lag_in_seconds_axis_steps_are_round_durations() -> None:
    assert charts.duration_ticks(1250) == [0, 300, 600, 900, 1200, 1500]
    assert charts.duration_ticks(6 * 3600 + 50 * 60) == [0, 7200, 14400, 21600, 28800]
    assert charts.duration_ticks(0.5) == [0, 1]


def test_a_lag_never_measured_in_seconds_draws_no_seconds_chart() -> None:
    points = [LagPoint(NOW - timedelta(minutes=m), 9, None) for m in range(3)]
    drawn = charts.lag_history("lost", points, NOW - timedelta(minutes=15), NOW)
    assert drawn.offsets is not None and drawn.seconds is None


def test_probe_charts_show_latency_per_broker_with_failed_rounds_as_gaps() -> None:
    start = NOW - timedelta(minutes=15)
    points = [
        (1, NOW - timedelta(minutes=10), 0.012),
        (1, NOW - timedelta(minutes=5), 0.020),
        (3, NOW - timedelta(minutes=10), 0.015),
        (3, NOW - timedelta(minutes=5), None),
    ]

    latency = charts.probe_latency("prod", points, start, NOW)
    outcomes = charts.probe_outcomes("prod", [(1, 2, 0), (3, 1, 1)])

    assert latency is not None
    for chart in (latency, outcomes):
        svg = str(chart.svg)
        assert 'role="img"' in svg and "<script" not in svg and _external(svg) == []
    assert latency.alt == "broker 1: peak 20 ms, 0 failed rounds; broker 3: peak 15 ms, 1 failed rounds"
    assert outcomes.alt == "broker 1: 2 succeeded, 0 failed; broker 3: 1 succeeded, 1 failed"
    assert charts.probe_latency("prod", [(3, NOW, None)], start, NOW) is None, "no round to draw"


def test_the_group_page_draws_one_chart_per_step_of_the_clock() -> None:
    at = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert chart_end(at) == at, "a time on a step is its own end"
    ends = {chart_end(at + timedelta(milliseconds=ms)) for ms in (1, 2_500, 9_999)}
    assert ends == {at + CHART_STEP}, "the pages asked within one step share their window"
    points = tuple(LagPoint(at - timedelta(minutes=m), 10 * m, float(m)) for m in range(5))
    end = chart_end(at + timedelta(seconds=3))
    first = charts.lag_history("g", points, end - timedelta(hours=1), end)
    again = charts.lag_history("g", points, end - timedelta(hours=1), chart_end(at + timedelta(seconds=7)))
    assert again is first, "drawn once, kept by charts"


START = NOW - timedelta(hours=1)


def test_the_backlog_projection_goes_to_zero_when_the_group_catches_up() -> None:
    at = NOW - timedelta(minutes=1)
    # 8,400 messages, caught up in 14 min: the line reaches 0 then, within the 15 min shown.
    found = backlog_projection(at, 8400, 30.0, 20.0, 840.0, timedelta(minutes=15))
    assert found is not None
    assert found.points == ((at, 8400.0), (at + timedelta(seconds=840), 0.0))
    assert found.words == "projected: caught up around 12:13 UTC (in ~14 min)"
    # Beyond the horizon: the line stops at it, where what is left is in proportion.
    far = backlog_projection(at, 8400, 30.0, 20.0, 3600.0, timedelta(minutes=15))
    assert far is not None and far.points[-1] == (at + timedelta(minutes=15), 6300.0)
    assert "in ~1 h" in far.words


def test_the_backlog_projection_grows_when_the_group_is_not_catching_up() -> None:
    at = NOW
    found = backlog_projection(at, 1000, 3.0, 5.0, None, timedelta(minutes=10))
    assert found is not None and found.points[-1] == (at + timedelta(minutes=10), 2200.0)
    assert found.words == "projected: 2,200 messages in 10 min at the current rates"
    held = backlog_projection(at, 12, 5.0, 5.0, None, timedelta(minutes=10))
    assert held is not None and held.words == "projected: the backlog holds at 12 messages"
    # Nothing to project: caught up, or a rate unknown.
    assert backlog_projection(at, 0, 3.0, 5.0, None, timedelta(minutes=10)) is None
    assert backlog_projection(at, 50, None, 5.0, None, timedelta(minutes=10)) is None


def test_the_projection_is_drawn_dashed_and_said_on_the_lag_in_messages() -> None:
    points = [LagPoint(START + timedelta(minutes=m), 100 * m, 6.0 * m) for m in range(61)]
    projection = backlog_projection(NOW - timedelta(seconds=20), 6000, 3.0, 5.0, None, timedelta(minutes=15))
    drawn = charts.lag_history("billing", points, START, NOW, projection)
    assert drawn.offsets is not None and drawn.seconds is not None
    svg = str(drawn.offsets.svg)
    assert "projected at the current rates" in svg and ".serie-1{stroke-width:2;stroke-dasharray:6,4}" in svg
    assert drawn.offsets.alt.endswith("; projected: 7,800 messages in 15 min at the current rates")
    assert "projected" not in drawn.seconds.alt
    plain = charts.lag_history("billing", points, START, NOW)
    assert plain.offsets is not None and "projected" not in str(plain.offsets.svg)
