"""The dashboard pages: clusters overview, one cluster, one topic, one consumer group.

Server-rendered from `templates/web/`, with charts drawn on the server (`charts`), so a page is
one request and shows what is wrong before anyone reads: every row and card is red, amber or
green (`health`), worst first. Every page says which evaluation its numbers come from and how old
that is, marked stale past the context's `stale_after`. An unknown cluster, topic or group is a
404 page that says what was not found; a bad `?window=` is a 422 page that lists the good ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from sqlalchemy import Connection

from monitor.expose import charts, health, queries, read_pages
from monitor.expose.context import WebContext
from monitor.formatting import bytes_filter, duration_filter

LABELS: Final = {health.BAD: "critical", health.WARN: "warning", health.OK: "healthy"}
WINDOWS: Final = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
DEFAULT_WINDOW: Final = "1h"
TABLE_ROWS: Final = 200
"""Rows of a topics or groups table: the worst ones. A page with 10,000 rows is neither light
nor read; the API lists everything."""


@dataclass(frozen=True, slots=True)
class Freshness:
    """How old a page's numbers are: the evaluation they come from, and whether that is stale."""

    evaluated_at: datetime | None
    age_seconds: float | None
    stale: bool
    stale_after_seconds: float


def freshness(evaluated_at: datetime | None, now: datetime, stale_after: timedelta) -> Freshness:
    if evaluated_at is None:
        return Freshness(None, None, True, stale_after.total_seconds())
    age = max((now - evaluated_at).total_seconds(), 0.0)
    return Freshness(evaluated_at, age, age > stale_after.total_seconds(), stale_after.total_seconds())


def router(ctx: WebContext) -> APIRouter:
    pages = APIRouter(include_in_schema=False)

    @pages.get("/", response_class=HTMLResponse)
    def overview() -> HTMLResponse:
        now = ctx.clock.now()
        with ctx.engine.connect() as conn:
            cards = read_pages.cluster_cards(conn)
            brokers = read_pages.brokers(conn)
            runs = queries.last_runs(conn)
        cards = sorted(
            (_card(c, [b for b in brokers if b["cluster"] == c["cluster"]], now, ctx) for c in cards),
            key=lambda c: (health.RANK[c["health"]], c["cluster"]),
        )
        times = [c["evaluated_at"] for c in cards if c["evaluated_at"] is not None]
        oldest = min(times, default=None)  # a cluster never evaluated says so on its own card
        return _render(
            ctx,
            "web/overview.html",
            title="Clusters",
            clusters=cards,
            runs=runs,
            freshness=freshness(oldest, now, ctx.stale_after),
        )

    @pages.get("/clusters/{cluster}", response_class=HTMLResponse)
    def cluster_page(cluster: str) -> HTMLResponse:
        now = ctx.clock.now()
        with ctx.engine.connect() as conn:
            found = read_pages.cluster_cards(conn, cluster)
            if not found:
                return _unknown_cluster(ctx, cluster)
            brokers = read_pages.brokers(conn, cluster)
            card = _card(found[0], brokers, now, ctx)
            topics = health.annotate(read_pages.topics(conn, cluster), health.topic)
            groups = _judge_groups(read_pages.groups(conn, cluster))
            alerts = read_pages.firing_alerts(conn, cluster)
        brokers = [
            {
                **b,
                "health": health.broker(b),
                "leader_health": health.leader_health(b["leaders"], b["fair_share_leaders"], b["up"]),
                "disk_health": health.disk_health(b["disk_used_ratio"]),
            }
            for b in brokers
        ]
        return _render(
            ctx,
            "web/cluster.html",
            title=cluster,
            cluster=cluster,
            card=card,
            freshness=card["freshness"],
            brokers=brokers,
            leader_chart=card["leader_chart"],
            disk_chart=card["disk_chart"],
            topics=health.topics_worst_first(topics)[:TABLE_ROWS],
            topics_total=len(topics),
            groups=health.groups_worst_first(groups)[:TABLE_ROWS],
            groups_total=len(groups),
            alerts=alerts,
        )

    @pages.get("/clusters/{cluster}/topics/{topic}", response_class=HTMLResponse)
    def topic_page(cluster: str, topic: str) -> HTMLResponse:
        now = ctx.clock.now()
        with ctx.engine.connect() as conn:
            if not read_pages.cluster_exists(conn, cluster):
                return _unknown_cluster(ctx, cluster)
            row = read_pages.topic(conn, cluster, topic)
            if row is None:
                return _not_found(ctx, f"No topic {topic!r} on cluster {cluster!r}", cluster)
            configs = read_pages.topic_configs(conn, cluster, topic)
            partitions = health.annotate(read_pages.topic_partitions(conn, cluster, topic), health.partition)
            groups = _judge_groups(read_pages.topic_groups(conn, cluster, topic))
            alerts = read_pages.firing_alerts(conn, cluster, topic=topic)
            evaluated = read_pages.evaluated_at(conn, cluster)
        row["health"] = health.worst(health.topic(row), *(p["health"] for p in partitions))
        return _render(
            ctx,
            "web/topic.html",
            title=f"{topic} · {cluster}",
            cluster=cluster,
            topic=row,
            configs=configs,
            limits=_limits(configs),
            partitions=sorted(partitions, key=lambda p: (health.RANK[p["health"]], p["partition"])),
            groups=health.groups_worst_first(groups),
            alerts=alerts,
            freshness=freshness(evaluated, now, ctx.stale_after),
        )

    @pages.get("/clusters/{cluster}/groups/{group:path}", response_class=HTMLResponse)
    def group_page(cluster: str, group: str, window: str = DEFAULT_WINDOW) -> HTMLResponse:
        now = ctx.clock.now()
        if window not in WINDOWS:
            return _error(
                ctx,
                422,
                "Unknown window",
                f"The lag history window must be one of {', '.join(WINDOWS)}, not {window!r}.",
                [(_group_href(cluster, group), f"{group} over the last {DEFAULT_WINDOW}")],
            )
        span = WINDOWS[window]
        with ctx.engine.connect() as conn:
            if not read_pages.cluster_exists(conn, cluster):
                return _unknown_cluster(ctx, cluster)
            row = read_pages.group(conn, cluster, group)
            if row is None:
                return _not_found(ctx, f"No consumer group {group!r} on cluster {cluster!r}", cluster)
            context = _group_context(conn, cluster, group, row, now - span, now)
            evaluated = read_pages.evaluated_at(conn, cluster)
        return _render(
            ctx,
            "web/group.html",
            title=f"{group} · {cluster}",
            cluster=cluster,
            window=window,
            windows=list(WINDOWS),
            freshness=freshness(evaluated, now, ctx.stale_after),
            **context,
        )

    return pages


_GROUP_COLUMNS: Final = (
    "status", "worst_status", "group_state", "members", "topics", "partitions", "offset_lag",
    "lag_seconds", "max_lag_seconds", "append_lag_seconds", "commit_lag_seconds",
    "time_since_last_commit_seconds", "time_until_data_loss_seconds", "data_loss_occurred",
    "lag_growing", "consume_rate", "produce_rate", "time_to_catch_up_seconds",
)  # fmt: skip
"""A group collected but not yet evaluated has none of these; the page shows them as unknown."""


def _group_context(
    conn: Connection, cluster: str, group: str, row: dict[str, Any], since: datetime, until: datetime
) -> dict[str, Any]:
    """Everything the group page shows besides the freshness and the window."""
    judged = _judge_groups([{**dict.fromkeys(_GROUP_COLUMNS), **row}])[0]
    members = read_pages.group_members(conn, cluster, group)
    owners = {
        assigned: f"{m['client_id']} on {m['host']}" for m in members for assigned in m["assignment"] or []
    }
    partitions = [
        {**p, "owner": owners.get(f"{p['topic']}:{p['partition']}")}
        for p in _judge_groups(read_pages.group_partitions(conn, cluster, group))
    ]
    partitions.sort(
        key=lambda p: (health.RANK[p["health"]], -(p["offset_lag"] or 0), p["topic"], p["partition"])
    )
    history = read_pages.group_lag_history(conn, cluster, group, since, until, charts.MAX_POINTS)
    points = [charts.LagPoint(h["at"], h["offset_lag"], h["lag_seconds"]) for h in history]
    return {
        "group": judged,
        "data_loss_class": health.data_loss_health(
            judged["time_until_data_loss_seconds"], judged["data_loss_occurred"]
        ),
        "method": _method(partitions),
        "partitions": partitions,
        "members": members,
        "alerts": read_pages.firing_alerts(conn, cluster, group_id=group),
        "charts": charts.lag_history(group, points, since, until),
        "history_points": len(points),
    }


def _judge_groups(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **r,
            "health": health.group(r),
            "status_health": health.status_health(r.get("worst_status") or r["status"]),
        }
        for r in rows
    ]


def _method(partitions: list[dict[str, Any]]) -> str:
    """How the lag in seconds was measured, over the lagging partitions."""
    lagging = [p for p in partitions if (p["offset_lag"] or 0) > 0]
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


def _card(
    card: dict[str, Any], brokers: list[dict[str, Any]], now: datetime, ctx: WebContext
) -> dict[str, Any]:
    """A cluster's overview card: health, freshness, down brokers and its two charts."""
    fresh = freshness(card["evaluated_at"], now, ctx.stale_after)
    bars = [
        charts.BrokerBar(b["broker_id"], b["up"], b["leaders"], b["fair_share_leaders"], b["disk_used_ratio"])
        for b in brokers
    ]
    name = card["cluster"]
    evaluated = any(b.leaders is not None for b in bars)
    with_disk = any(b.disk_used_ratio is not None for b in bars)
    return {
        **card,
        "freshness": fresh,
        "health": health.cluster(card, fresh.stale),
        "down_brokers": [b["broker_id"] for b in brokers if not b["up"]],
        "leader_chart": charts.leader_balance(name, bars) if evaluated else None,
        "disk_chart": charts.disk_usage(name, bars) if with_disk else None,
    }


def _limits(configs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The topic's retention limits in words, from its current configuration."""

    def number(name: str) -> float | None:
        row = configs.get(name)
        try:
            return float(row["value"]) if row and row["value"] is not None else None
        except ValueError:
            return None

    size, time = number("retention.bytes"), number("retention.ms")
    return {
        "bytes": "not collected yet"
        if size is None
        else "unlimited"
        if size < 0
        else f"{bytes_filter(size)} per partition",
        "ms": "not collected yet"
        if time is None
        else "unlimited"
        if time < 0
        else duration_filter(time / 1000),
    }


def _render(ctx: WebContext, name: str, **context: Any) -> HTMLResponse:
    """A page with what every dashboard template uses: the health labels and colours."""
    return ctx.render(name, labels=LABELS, loss_health=health.data_loss_health, **context)


def _group_href(cluster: str, group: str) -> str:
    return f"/clusters/{quote(cluster, safe='')}/groups/{quote(group)}"


def _unknown_cluster(ctx: WebContext, cluster: str) -> HTMLResponse:
    return _error(
        ctx,
        404,
        "Not found",
        f"No cluster {cluster!r}: the monitor has never collected a cluster of that name.",
        [("/", "All clusters")],
    )


def _not_found(ctx: WebContext, message: str, cluster: str) -> HTMLResponse:
    href = f"/clusters/{quote(cluster, safe='')}"
    return _error(
        ctx, 404, "Not found", message + ".", [(href, f"Back to cluster {cluster}"), ("/", "All clusters")]
    )


def _error(
    ctx: WebContext, status: int, title: str, message: str, links: list[tuple[str, str]]
) -> HTMLResponse:
    response = ctx.render("web/error.html", title=title, message=message, links=links)
    response.status_code = status
    return response
