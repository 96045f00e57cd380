"""The topic page: partitions with replicas and ISR, size and time coverage against retention,
the groups reading it with their data-loss margin, and the retention button's panel. A deleted
topic is a 404 page that says when it was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import Connection

from monitor.core.formatting import bytes_filter, duration_filter
from monitor.expose.read import dashboard as read_pages
from monitor.expose.read import gone as read_gone
from monitor.expose.read import topics as read_topics
from monitor.expose.read.queries import ALL
from monitor.expose.web import health
from monitor.expose.web.context import Context, WebContext
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

router = APIRouter(include_in_schema=False)


@router.get("/clusters/{cluster}/topics/{topic}", response_class=HTMLResponse)
def topic_page(ctx: Context, request: Request, cluster: str, topic: str) -> HTMLResponse:
    now = ctx.clock.now()
    with ctx.engine.connect() as conn:
        reads = ctx.reads.of(conn, cluster)
        if reads is None:
            return unknown_cluster(ctx, cluster)
        found = read_topics.summary(conn, cluster, topic)  # its settings, as collected now
        if found is None:
            return _gone_or_not_found(ctx, read_gone.topic_deleted_at(conn, cluster, topic), cluster, topic)
        configs = read_topics.configs(conn, cluster, topic)
        view = reads.get(("topic page", topic), lambda c: _topic_view(c, cluster, topic))
        alerts = read_pages.firing_alerts(conn, cluster, topic=topic)
        deleted_at = read_gone.topic_deleted_at(conn, cluster, topic)
        flags = flags_of(ctx, reads, topics=[topic])
        panel = ctx.topic_panel(request, conn, cluster, topic) if ctx.topic_panel else {"retention": None}
    loss = ctx.data_loss()
    partitions = health.annotate(
        (row(p) for p in view.partitions),
        lambda p: health.partition(p, loss, flags.health(topic=topic, partition=p["partition"])),
    )
    consumers = (
        {**row(c), "worst_status": view.worst.get(c.group_id), "data_loss_limit": view.limits.get(c.group_id)}
        for c in view.consumers
    )
    groups = judge_groups(consumers, loss, flags, topic=topic)
    summary = row(found)
    summary["health"] = health.worst(health.topic(summary, loss, flags), *(p["health"] for p in partitions))
    return render(
        ctx,
        "web/topic.html",
        title=f"{topic} · {cluster}",
        cluster=cluster,
        topic=summary,
        configs=configs,
        limits=_limits(configs),
        partitions=sorted(partitions, key=lambda p: (health.RANK[p["health"]], p["partition"])),
        groups=health.groups_worst_first(groups),
        alerts=alerts,
        deleted_at=deleted_at,
        freshness=freshness(reads.evaluated_at, now, ctx.stale_after),
        **panel,
    )


@dataclass(frozen=True, slots=True)
class _TopicView:
    """What the topic page shows that changes only with an evaluation or a collection: kept
    (`read.cache`). Its settings, configuration, alerts, findings and retention panel are read
    live."""

    partitions: list[read_topics.PartitionState]
    consumers: list[read_topics.TopicConsumer]
    worst: dict[str, str]
    """group id -> the worst status of its partitions of the topic"""
    limits: dict[str, str]
    """group id -> the retention limit that deletes its oldest unread message first"""


def _topic_view(conn: Connection, cluster: str, topic: str) -> _TopicView:
    return _TopicView(
        read_topics.topic_partitions(conn, cluster, topic, ALL).items,
        read_topics.consumers(conn, cluster, topic),
        read_pages.worst_partition_status(conn, cluster, topic),
        read_pages.data_loss_limits(conn, cluster, topic),
    )


def _limits(configs: dict[str, str | None]) -> dict[str, str]:
    """The topic's retention limits in words, from its current configuration."""

    def number(name: str) -> float | None:
        try:
            value = configs.get(name)
            return float(value) if value is not None else None
        except ValueError:
            return None

    size, time = number("retention.bytes"), number("retention.ms")
    unknown = "not collected yet"
    return {
        "bytes": unknown
        if size is None
        else "unlimited"
        if size < 0
        else f"{bytes_filter(size)} per partition",
        "ms": unknown if time is None else "unlimited" if time < 0 else duration_filter(time / 1000),
    }


def _gone_or_not_found(
    ctx: WebContext, deleted_at: datetime | None, cluster: str, topic: str
) -> HTMLResponse:
    """A topic the cluster no longer has: said so (its alerts resolved as gone); one it never had: 404."""
    if deleted_at is None:
        return not_found(ctx, f"No topic {topic!r} on cluster {cluster!r}", cluster)
    seen = deleted_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    message = f"Gone: this topic was deleted, seen {seen}. Its alerts resolved as gone"
    href = f"/clusters/{quote(cluster, safe='')}"
    return error_page(
        ctx, 200, f"Topic {topic} is gone", message + ".", [(href, f"Back to cluster {cluster}")]
    )
