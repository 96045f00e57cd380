"""The consumer group page: status, members, lag in offsets and seconds and how it was measured,
each partition, and the lag history over a window (`?window=`; a bad one is a 422 page that lists
the good ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from sqlalchemy import Connection

from monitor.core.formatting import duration_filter, number_filter
from monitor.core.vocabulary import COMMITTED_BEYOND_END, STATUS_RANK, is_lagging
from monitor.expose.read import dashboard as read_pages
from monitor.expose.read import fresh as read_fresh
from monitor.expose.read import gone as read_gone
from monitor.expose.read import history as read_history
from monitor.expose.read import lag as read_lag
from monitor.expose.read import objectives as read_objectives
from monitor.expose.read.queries import ALL
from monitor.expose.web import budget_chart, charts, health
from monitor.expose.web.context import Context
from monitor.expose.web.inputs import ANY_NAME
from monitor.expose.web.pages.toolkit import (
    error_page,
    flags_of,
    freshness,
    judge_groups,
    not_found,
    render,
    row,
    unknown_cluster,
)

WINDOWS: Final = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
}

DEFAULT_WINDOW: Final = "1h"

router = APIRouter(include_in_schema=False)


@router.get("/clusters/{cluster}/groups/{group:" + ANY_NAME + "}", response_class=HTMLResponse)
def group_page(ctx: Context, cluster: str, group: str, window: str = DEFAULT_WINDOW) -> HTMLResponse:
    now = ctx.clock.now()
    if window not in WINDOWS:
        return error_page(
            ctx,
            422,
            "Unknown window",
            f"The lag history window must be one of {', '.join(WINDOWS)}, not {window!r}.",
            [(f"{_group_href(cluster, group)}?window={w}", f"{group} over the last {w}") for w in WINDOWS],
        )
    with ctx.engine.connect() as conn:
        reads = ctx.reads.of(conn, cluster)
        if reads is None:
            return unknown_cluster(ctx, cluster)
        view = reads.get(("group page", group), lambda c: _group_view(c, cluster, group))
        if view is not None:
            view = _freshened(conn, cluster, group, view)
        if view is None:
            return not_found(
                ctx,
                f"No consumer group {group!r} on cluster {cluster!r} (a new group appears after"
                " its first evaluation)",
                cluster,
            )
        context = _group_context(
            conn,
            cluster,
            group,
            view,
            chart_end(now) - WINDOWS[window],
            chart_end(now),
            ctx.data_loss(),
            flags_of(ctx, reads, groups=[group]),
        )
    return render(
        ctx,
        "web/group.html",
        title=f"{group} · {cluster}",
        cluster=cluster,
        window=window,
        windows=list(WINDOWS),
        freshness=freshness(reads.evaluated_at, now, ctx.stale_after),
        **context,
    )


@dataclass(frozen=True, slots=True)
class _GroupView:
    """What the group page shows that changes only with an evaluation or a collection: kept
    (`read.cache`). Its lag history, alerts and findings are read live."""

    detail: read_lag.GroupDetail | None
    """None: the newest evaluation does not have the group (its history remains)."""
    partitions: list[read_lag.GroupPartitionLag]


def _group_view(conn: Connection, cluster: str, group: str) -> _GroupView | None:
    """None when no stored evaluation has the group."""
    detail = read_lag.group(conn, cluster, group)
    if detail is None and not read_lag.group_known(conn, cluster, group):
        return None
    return _GroupView(detail, read_lag.group_partitions(conn, cluster, group, page=ALL).items)


def _freshened(conn: Connection, cluster: str, group: str, view: _GroupView) -> _GroupView:
    """The kept view with the group's offset lag as fresh as the store holds it, read now (one
    indexed query over the group's partitions): a commit shows before the next evaluation."""
    lags = read_fresh.partition_lags(conn, cluster, group)
    detail = read_lag.freshened(view.detail, lags) if view.detail is not None else None
    return _GroupView(detail, read_lag.freshened_partitions(view.partitions, lags))


CHART_STEP: Final = timedelta(seconds=10)
"""The lag charts' window ends at the first multiple of this from now on: the pages asked within
one step draw the same chart (`charts` keeps each drawn chart by its inputs), not one each."""


def chart_end(now: datetime) -> datetime:
    """Where the lag charts' window ends: `now` rounded up to a `CHART_STEP`."""
    step = CHART_STEP.total_seconds()
    return datetime.fromtimestamp(math.ceil(now.timestamp() / step) * step, tz=UTC)


_GROUP_COLUMNS: Final = tuple(f.name for f in fields(read_lag.GroupSummary))
"""A group that left the newest evaluation (its history remains) has none of these."""


def _group_context(
    conn: Connection,
    cluster: str,
    group: str,
    view: _GroupView,
    since: datetime,
    until: datetime,
    loss: health.LossScale,
    flags: health.Flags,
) -> dict[str, Any]:
    """Everything the group page shows besides the freshness and the window."""
    detail = view.detail
    partitions = [
        {**row(p), "consumer": f"{p.client_id} on {p.owner}" if p.owner else None} for p in view.partitions
    ]
    statuses = [p["status"] for p in partitions if p["status"]]
    worst_status = max(statuses, key=lambda s: STATUS_RANK.get(s, 0), default=None)
    summary = row(detail.group) if detail else {**dict.fromkeys(_GROUP_COLUMNS), "group_id": group}
    judged = judge_groups([{**summary, "worst_status": worst_status}], loss, flags)[0]
    partitions = judge_groups(partitions, loss, flags, of_group=group)
    partitions.sort(
        key=lambda p: (health.RANK[p["health"]], -(p["offset_lag"] or 0), p["topic"], p["partition"])
    )
    history = read_history.group_history(
        conn, cluster, group, since, until + timedelta(seconds=1), charts.MAX_POINTS
    )
    points = [
        charts.LagPoint(
            h.evaluated_at,
            h.offset_lag,
            h.max_lag_seconds if h.max_lag_seconds is not None else h.lag_seconds,
        )
        for h in history.points
    ]
    beyond = read_gone.beyond_end(conn, cluster, group)
    for p in partitions:
        p["beyond_end"] = (p["topic"], p["partition"]) in beyond
    return {
        "group": judged,
        "gone_since": read_gone.group_gone_since(conn, cluster, group),
        "beyond_end_words": COMMITTED_BEYOND_END,
        "beyond_end": len(beyond),
        "data_loss_class": loss.health(judged["data_loss_margin_seconds"], judged["data_loss_occurred"]),
        "method": _method(partitions),
        "partitions": partitions,
        "members": detail.members if detail else [],
        "alerts": read_pages.firing_alerts(conn, cluster, group_id=group),
        "charts": charts.lag_history(group, points, since, until, _projection(judged, points, until - since)),
        "history_points": len(points),
        "objectives": _objectives(conn, cluster, group, detail.objectives if detail else [], until),
    }


def _objectives(
    conn: Connection,
    cluster: str,
    group: str,
    objectives: list[read_objectives.GroupObjective],
    until: datetime,
) -> list[dict[str, Any]]:
    """Each objective of the group with its budget chart (the budget left per day)."""
    return [
        {
            **row(o),
            "chart": budget_chart.budget(
                group, o.objective, read_objectives.budget_days(conn, cluster, group, o, until)
            ),
        }
        for o in objectives
    ]


def backlog_projection(
    at: datetime,
    offset_lag: float | None,
    consume_rate: float | None,
    produce_rate: float | None,
    time_to_catch_up_seconds: float | None,
    horizon: timedelta,
) -> charts.Projection | None:
    """The backlog from `at` on, at most `horizon` ahead: down to 0 when the group catches up
    (at the forecast's time), else growing by what arrives beyond what is read. None without a
    backlog or without both rates."""
    if offset_lag is None or offset_lag <= 0 or consume_rate is None or produce_rate is None:
        return None
    ahead = horizon.total_seconds()
    if time_to_catch_up_seconds is not None:
        shown = min(time_to_catch_up_seconds, ahead)
        end = at + timedelta(seconds=shown)
        left = offset_lag * (1 - shown / time_to_catch_up_seconds) if time_to_catch_up_seconds > 0 else 0.0
        when = f"caught up around {at + timedelta(seconds=time_to_catch_up_seconds):%H:%M} UTC"
        words = f"projected: {when} (in ~{duration_filter(time_to_catch_up_seconds)})"
        return charts.Projection(((at, float(offset_lag)), (end, left)), words)
    growth = max(produce_rate - consume_rate, 0.0)
    end, grown = at + horizon, offset_lag + growth * ahead
    words = (
        f"projected: the backlog holds at {number_filter(offset_lag)} messages"
        if growth == 0
        else f"projected: {number_filter(grown)} messages in {duration_filter(ahead)} at the current rates"
    )
    return charts.Projection(((at, float(offset_lag)), (end, grown)), words)


PROJECTION_SHARE: Final = 4
"""The backlog's projection reaches at most a quarter of the chart's window ahead."""


def _projection(
    group: dict[str, Any], points: list[charts.LagPoint], window: timedelta
) -> charts.Projection | None:
    """The backlog's projection from the newest evaluation drawn (the one the forecast is of)."""
    newest = next((p for p in reversed(points) if p.offset_lag is not None), None)
    if newest is None:
        return None
    return backlog_projection(
        newest.at,
        newest.offset_lag,
        group["consume_rate"],
        group["produce_rate"],
        group["time_to_catch_up_seconds"],
        window / PROJECTION_SHARE,
    )


def _method(partitions: list[dict[str, Any]]) -> str:
    """How the lag in seconds was measured, over the lagging partitions."""
    lagging = [p for p in partitions if is_lagging(p["offset_lag"])]
    if not lagging:
        return "caught up" if partitions else "not evaluated"
    methods = [p["lag_seconds_method"] or "none" for p in lagging]
    if all(m == "exact" for m in methods):
        return "exact"
    parts = []
    for method in ("interpolated", "none"):
        n = methods.count(method)
        if n:
            label = "interpolated" if method == "interpolated" else "unknown"
            parts.append(f"{label} on {n} of {len(lagging)} lagging partitions")
    errors = [p["lag_seconds_error"] for p in lagging if p["lag_seconds_error"] is not None]
    bound = f", error up to {duration_filter(max(errors))}" if errors else ""
    return "; ".join(parts) + bound + (", exact elsewhere" if "exact" in methods else "")


def _group_href(cluster: str, group: str) -> str:
    return f"/clusters/{quote(cluster, safe='')}/groups/{quote(group)}"
