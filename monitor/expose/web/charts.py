"""Charts for the web pages, drawn on the server as inline SVG with pygal.

Why this way: a page must load with nothing but its own HTML (the browser tests fail on any
failed request, on-call laptops sit behind proxies, and a CDN outage must not blank a dashboard
during an incident). An inline `<svg>` needs no script and no second request, scales, prints, and
is drawn with the page. pygal is pure Python (no numpy), renders a chart in milliseconds, and keeps
its CSS scoped to each chart; its tooltip script, fetched from a CDN by default, is switched off.

Every chart is an image with a `<title>` and a `<desc>` that says in words what it shows
(`role="img"`), and every page shows the same numbers in a table beside it: the chart is for the
glance, the table for reading. Colours follow the pages: red, amber, green.

Charts are cached by their inputs (a page reloaded every few seconds draws nothing new until the
next evaluation), and the element id is a digest of the inputs, so a cached chart is identical
to a fresh one.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from markupsafe import Markup, escape

from monitor.core.formatting import duration_filter, latency_filter, number_filter, percent_filter, printable
from monitor.expose.web.health import BAD, OK, WARN
from monitor.expose.web.security import nonce

if TYPE_CHECKING:
    from pygal.style import Style

RED: Final = "#c5221f"
AMBER: Final = "#e37400"
GREEN: Final = "#1e8e3e"
GREY: Final = "#9aa3ae"
BLUE: Final = "#3367d6"

MAX_POINTS: Final = 240
"""A lag history longer than this is thinned to this many points, keeping each bucket's peak:
a 7-day window holds about 20,000 evaluations, more than a 900-pixel chart can show."""


@lru_cache(maxsize=16)
def _style(*colors: str) -> Style:
    """pygal's style of the pages' charts, in `colors` (pygal, a tenth of a second of imports, is
    imported at the first chart drawn, not at the web server's start)."""
    from pygal.style import Style

    return Style(
        font_family="system-ui, sans-serif",
        background="#ffffff",
        plot_background="#ffffff",
        foreground="#1d2330",
        foreground_strong="#1d2330",
        foreground_subtle="#5f6b7a",
        colors=colors,
        title_font_size=14,
        label_font_size=11,
        major_label_font_size=11,
        legend_font_size=11,
        value_font_size=11,
        guide_stroke_color="#e3e6eb",
        major_guide_stroke_color="#c4cad3",
        guide_stroke_dasharray="3,3",
        major_guide_stroke_dasharray="3,3",
        opacity=".85",
        opacity_hover=".95",
    )


_BARS: Final = (GREEN, GREY)
"""Leaders (green in the legend; each bar coloured by its health) beside the fair share (grey)."""
_LINES: Final = (BLUE, AMBER)
"""The lag (blue) and, on the lag in messages, its projection (amber, dashed)."""
COMMON: Final[dict[str, Any]] = {
    "js": [],  # the default tooltip script comes from a CDN
    "disable_xml_declaration": True,
    "legend_at_bottom": True,
    "legend_box_size": 10,
    "margin": 8,
    "print_values": False,
    "include_x_axis": True,
}


@dataclass(frozen=True, slots=True)
class Chart:
    """An inline SVG image and its text alternative."""

    svg: Markup
    alt: str

    def __html__(self) -> str:
        """The SVG, its scoped `<style>` carrying the answer's CSP nonce (`security.nonce`)."""
        return str(self.svg).replace(_STYLE, f'{_STYLE[:-1]} nonce="{nonce()}">', 1)


@dataclass(frozen=True, slots=True)
class BrokerBar:
    """One broker as the cluster charts need it."""

    broker_id: int
    up: bool
    leaders: int | None
    fair_share: float | None
    disk_used_ratio: float | None
    leader_health: str = OK
    disk_health: str = OK
    """The colours of its two bars (`health.broker_cell`: from the findings on the broker)."""


@dataclass(frozen=True, slots=True)
class LagPoint:
    """A group's lag at one evaluation."""

    at: datetime
    offset_lag: int | None
    lag_seconds: float | None


_COLOURS: Final = {BAD: RED, WARN: AMBER, OK: GREEN}


def _label(broker: BrokerBar) -> str:
    return f"{broker.broker_id}" if broker.up else f"{broker.broker_id} (down)"


def leader_balance(cluster: str, brokers: Sequence[BrokerBar]) -> Chart:
    """Leaders per broker (coloured by balance) beside each broker's fair share."""
    return _leader_balance(cluster, tuple(brokers))


@lru_cache(maxsize=128)
def _leader_balance(cluster: str, brokers: tuple[BrokerBar, ...]) -> Chart:
    title = f"Partition leaders per broker, {cluster}"
    import pygal

    chart = pygal.Bar(
        title="Leaders per broker",
        width=360,
        height=220,
        value_formatter=lambda v: number_filter(v, 0 if float(v).is_integer() else 1),
        style=_style(*_BARS),
        **COMMON,
    )
    chart.x_labels = [_label(b) for b in brokers]
    chart.y_labels = _integer_ticks(max((max(b.leaders or 0, b.fair_share or 0) for b in brokers), default=1))
    chart.add(
        "leaders",
        [{"value": b.leaders or 0, "color": _COLOURS[b.leader_health]} for b in brokers],
    )
    chart.add("fair share", [b.fair_share if b.up else None for b in brokers])
    alt = "; ".join(
        f"broker {_label(b)}: {number_filter(b.leaders)} leaders, fair share {number_filter(b.fair_share, 1)}"
        for b in brokers
    )
    return finish(chart, ("leaders", cluster, brokers), title, alt or "no brokers")


def disk_usage(cluster: str, brokers: Sequence[BrokerBar]) -> Chart:
    """Used disk per broker, in percent of its log dirs' total."""
    return _disk_usage(cluster, tuple(brokers))


@lru_cache(maxsize=128)
def _disk_usage(cluster: str, brokers: tuple[BrokerBar, ...]) -> Chart:
    title = f"Disk used per broker, {cluster}"
    import pygal

    chart = pygal.HorizontalBar(
        title="Disk used per broker",
        width=360,
        height=220,
        range=(0, 100),
        y_labels=[0, 25, 50, 75, 100],
        truncate_label=-1,
        show_legend=False,
        value_formatter=lambda v: f"{v:.0f}%",
        style=_style(*_BARS),
        **COMMON,
    )
    chart.x_labels = [_label(b) for b in brokers]
    chart.add(
        "disk used",
        [
            None
            if b.disk_used_ratio is None
            else {"value": b.disk_used_ratio * 100, "color": _COLOURS[b.disk_health]}
            for b in brokers
        ],
    )
    alt = "; ".join(f"broker {_label(b)}: {percent_filter(b.disk_used_ratio)} used" for b in brokers)
    return finish(chart, ("disk", cluster, brokers), title, alt or "no brokers")


@dataclass(frozen=True, slots=True)
class Projection:
    """Where a group's backlog is headed from its newest evaluation at that evaluation's rates
    (the catch-up forecast): drawn dashed on the lag in messages, and said in words."""

    points: tuple[tuple[datetime, float], ...]
    words: str


@dataclass(frozen=True, slots=True)
class LagCharts:
    """The two lag charts; None where the window holds no value to draw (a lag in seconds that
    could not be measured), so the page says so in words instead of drawing an empty frame."""

    offsets: Chart | None
    seconds: Chart | None


def lag_history(
    group: str,
    points: Sequence[LagPoint],
    start: datetime,
    end: datetime,
    projection: Projection | None = None,
) -> LagCharts:
    """Two line charts over [start, end]: lag in messages and lag in seconds. Two charts rather
    than two axes: on-call engineers read each scale without guessing which line is which. The
    lag in messages carries the backlog's `projection` where there is one, the chart widened to
    its end."""
    thinned = thin(sorted(points, key=lambda p: p.at), MAX_POINTS)
    return _lag_history(group, thinned, start, end, projection)


@lru_cache(maxsize=64)
def _lag_history(
    group: str, points: tuple[LagPoint, ...], start: datetime, end: datetime, projection: Projection | None
) -> LagCharts:
    window = duration_filter((end - start).total_seconds())
    key = ("lag", group, points, start, end, projection)
    offsets = [(p.at, p.offset_lag) for p in points if p.offset_lag is not None]
    seconds = [(p.at, p.lag_seconds) for p in points if p.lag_seconds is not None]
    offsets_chart = seconds_chart = None
    if offsets:
        ahead = max(end, projection.points[-1][0]) if projection else end
        chart = _line("Lag in messages", offsets, lambda v: number_filter(v), start, ahead)
        peak: float = max(v for _, v in offsets)
        latest = number_filter(offsets[-1][1])
        alt = f"{len(offsets)} points; peak {number_filter(peak)} messages; latest {latest}"
        if projection is not None:
            chart.show_legend = True
            chart.add(
                "projected at the current rates",
                list(projection.points),
                stroke_style={"dasharray": "6,4", "width": 2},
                fill=False,
                show_dots=False,
            )
            peak = max(peak, *(v for _, v in projection.points))
            alt = f"{alt}; {projection.words}"
        chart.y_labels = _integer_ticks(peak)
        offsets_chart = finish(
            chart, (*key, "offsets"), f"Lag in messages of {group} over the last {window}", alt
        )
    if seconds:
        chart = _line("Lag in seconds", seconds, duration_filter, start, end)
        chart.y_labels = duration_ticks(max(v for _, v in seconds))
        seconds_chart = finish(
            chart,
            (*key, "seconds"),
            f"Lag in seconds of {group} over the last {window}",
            f"{len(seconds)} points; peak {duration_filter(max(v for _, v in seconds))}; "
            f"latest {duration_filter(seconds[-1][1])}",
        )
    return LagCharts(offsets_chart, seconds_chart)


def _line(
    title: str,
    values: Sequence[tuple[datetime, float | int]],
    formatter: Callable[[Any], str],
    start: datetime,
    end: datetime,
) -> Any:
    x_format = "%H:%M" if end - start <= timedelta(days=1) else "%m-%d %H:%M"
    import pygal

    chart = pygal.DateTimeLine(
        title=title,
        width=900,
        height=220,
        show_dots=len(values) < 40,
        dots_size=2,
        fill=True,
        show_legend=False,
        x_label_rotation=0,
        truncate_label=-1,
        x_value_formatter=lambda at: at.strftime(x_format),
        x_title="UTC",
        value_formatter=formatter,
        xrange=(start, end),
        min_scale=2,
        max_scale=6,
        style=_style(*_LINES),
        **COMMON,
    )
    chart.x_labels = time_ticks(start, end)
    chart.add(title, values)
    return chart


_TICK_STEPS: Final = (
    (timedelta(minutes=15), timedelta(minutes=3)),
    (timedelta(hours=1), timedelta(minutes=10)),
    (timedelta(hours=6), timedelta(hours=1)),
    (timedelta(days=1), timedelta(hours=4)),
)
"""Window span -> the step of its time axis labels (a day for anything longer)."""


def time_ticks(start: datetime, end: datetime) -> list[datetime]:
    """Round times (every 10 minutes over an hour, every 4 hours over a day) in [start, end]."""
    step = next((step for span, step in _TICK_STEPS if end - start <= span), timedelta(days=1))
    seconds = step.total_seconds()
    first = math.ceil(start.timestamp() / seconds) * seconds
    ticks = []
    tick = datetime.fromtimestamp(first, tz=start.tzinfo or UTC)
    while tick <= end:
        ticks.append(tick)
        tick += step
    return ticks


_DURATION_STEPS: Final = (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
"""Steps of a lag-in-seconds axis: 1 s to 1 day, then whole days."""


def duration_ticks(top: float) -> list[int]:
    """0 to at least `top` seconds in at most six round steps (10 min, 1 h, ...)."""
    step = next((s for s in _DURATION_STEPS if top / s <= 5), 86400 * math.ceil(top / 86400 / 5))
    return list(range(0, math.ceil(top / step) * step + step, step))


def _integer_ticks(top: float) -> list[int]:
    """0 to at least `top` in at most six whole steps: leader counts are whole numbers."""
    step = max(1, math.ceil(top / 5))
    return list(range(0, math.ceil(top) + step, step))


def thin(points: Sequence[LagPoint], limit: int) -> tuple[LagPoint, ...]:
    """At most `limit` points: consecutive points are bucketed, each bucket keeps its last time
    and its peak of each lag, so a spike never disappears from the chart."""
    if len(points) <= limit:
        return tuple(points)
    size = -(-len(points) // limit)
    out = []
    for i in range(0, len(points), size):
        bucket = points[i : i + size]
        offsets = [p.offset_lag for p in bucket if p.offset_lag is not None]
        seconds = [p.lag_seconds for p in bucket if p.lag_seconds is not None]
        out.append(
            LagPoint(
                bucket[-1].at,
                max(offsets) if offsets else None,
                max(seconds) if seconds else None,
            )
        )
    return tuple(out)


_SCRIPT: Final = re.compile(r"<script\b.*?</script>", re.DOTALL)
"""pygal always inlines its configuration for its tooltip script, which is not loaded: dropped."""
_INLINE_STYLE: Final = re.compile(r'style="((?:\s*(?:fill|stroke|opacity): [#\w.]+;?)+)"')
"""pygal's inline styles (a bar's colour, the hidden tooltip), which the CSP refuses: written as
the SVG presentation attributes they are (`fill="#c5221f"`)."""


def budget_style() -> Style:
    return _style(GREEN)


def budget_colour(remaining: float) -> str:
    """An error budget's colour: red when spent, amber under a quarter left, else green."""
    return RED if remaining <= 0 else AMBER if remaining < 0.25 else GREEN


def _as_attributes(found: re.Match[str]) -> str:
    pairs = (part.split(":") for part in found.group(1).split(";") if part.strip())
    return " ".join(f'{name.strip()}="{value.strip()}"' for name, value in pairs)


_STYLE: Final = '<style type="text/css">'
"""pygal's one `<style>` element, scoped to its chart."""


def finish(chart: Any, key: tuple[Any, ...], title: str, alt: str) -> Chart:
    """Render with a stable id and make the SVG an accessible image."""
    chart.uuid = "kh-" + hashlib.blake2s(repr(key).encode(), digest_size=8).hexdigest()
    svg: str = _INLINE_STYLE.sub(_as_attributes, _SCRIPT.sub("", chart.render(is_unicode=True)))
    if chart.config.title:  # pygal's own short title gives way to the full one below
        svg = svg.replace(f"<title>{escape(chart.config.title)}</title>", "", 1)
    title_id = f"{chart.uuid}-title"
    svg = svg.replace(
        'class="pygal-chart"',
        f'class="pygal-chart" role="img" aria-labelledby="{title_id}"',
        1,
    )
    head_end = svg.index(">") + 1
    # Names in the title and the text are shown visibly, as everywhere else (`printable`).
    labels = f'<title id="{title_id}">{escape(printable(title))}</title><desc>{escape(printable(alt))}</desc>'
    return Chart(Markup(svg[:head_end] + labels + svg[head_end:]), alt)  # noqa: S704 - pygal escapes its text


_PROBE_LINES: Final = (BLUE, AMBER, GREEN, RED, GREY, "#8e44ad", "#16a085", "#2c3e50")


def probe_latency(
    cluster: str, points: Sequence[tuple[int, datetime, float | None]], start: datetime, end: datetime
) -> Chart | None:
    """End-to-end probe latency per broker over [start, end], one line per broker: (broker,
    time, seconds) points, a failed round as a gap. None when no round succeeded."""
    return _probe_latency(cluster, tuple(points), start, end)


@lru_cache(maxsize=64)
def _probe_latency(
    cluster: str, points: tuple[tuple[int, datetime, float | None], ...], start: datetime, end: datetime
) -> Chart | None:
    values = [v for _, _, v in points if v is not None]
    if not values:
        return None
    x_format = "%H:%M" if end - start <= timedelta(days=1) else "%m-%d %H:%M"
    import pygal

    chart = pygal.DateTimeLine(
        title="End-to-end latency per broker",
        width=900,
        height=220,
        show_dots=False,
        x_label_rotation=0,
        truncate_label=-1,
        x_value_formatter=lambda at: at.strftime(x_format),
        x_title="UTC",
        value_formatter=latency_filter,
        xrange=(start, end),
        style=_style(*_PROBE_LINES),
        **COMMON,
    )
    chart.x_labels = time_ticks(start, end)
    brokers = sorted({b for b, _, _ in points})
    for broker in brokers:
        chart.add(
            f"broker {broker}", [(at, v) for b, at, v in points if b == broker], allow_interruptions=True
        )
    parts = []
    for broker in brokers:
        mine = [v for b, _, v in points if b == broker]
        peak = max((v for v in mine if v is not None), default=None)
        failed = sum(1 for v in mine if v is None)
        parts.append(f"broker {broker}: peak {latency_filter(peak)}, {failed} failed rounds")
    peaks = "; ".join(parts)
    window = duration_filter((end - start).total_seconds())
    return finish(
        chart,
        ("probe", cluster, points, start, end),
        f"End-to-end probe latency per broker of {cluster} over the last {window}",
        peaks,
    )


def probe_outcomes(cluster: str, rows: Sequence[tuple[int, int, int]]) -> Chart:
    """Probe messages per broker over the window: (broker, successes, failures)."""
    return _probe_outcomes(cluster, tuple(rows))


@lru_cache(maxsize=128)
def _probe_outcomes(cluster: str, rows: tuple[tuple[int, int, int], ...]) -> Chart:
    import pygal

    chart = pygal.StackedBar(
        title="Probe rounds per broker",
        width=360,
        height=220,
        value_formatter=lambda v: number_filter(v, 0),
        style=_style(GREEN, RED),
        **COMMON,
    )
    chart.x_labels = [str(b) for b, _, _ in rows]
    chart.y_labels = _integer_ticks(max((s + f for _, s, f in rows), default=1))
    chart.add("succeeded", [s for _, s, _ in rows])
    chart.add("failed", [f for _, _, f in rows])
    alt = "; ".join(f"broker {b}: {s} succeeded, {f} failed" for b, s, f in rows)
    return finish(
        chart, ("probe-outcomes", cluster, rows), f"Probe rounds per broker, {cluster}", alt or "no rounds"
    )
