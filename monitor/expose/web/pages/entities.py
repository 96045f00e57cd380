"""The full lists of a cluster's topics and consumer groups, linked from the cluster page (which
shows only the worst): worst first, `LIST_ROWS` at a time, with a search box.

The search text is user text: bounded (`inputs.search_text`), matched literally in a
parameterised LIKE (`queries.like_pattern` escapes its wildcards), and shown back escaped. A bad
search text or offset is a 422 page that says what is wrong.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from monitor.expose.read import dashboard as read_pages
from monitor.expose.read.queries import Page
from monitor.expose.web.context import Context, WebContext
from monitor.expose.web.inputs import MAX_SEARCH
from monitor.expose.web.pages.toolkit import (
    LIST_ROWS,
    flags_of,
    freshness,
    judge_groups,
    judged_topics,
    list_query,
    render,
    row,
    unknown_cluster,
    with_worst_status,
)

router = APIRouter(include_in_schema=False)


@router.get("/clusters/{cluster}/topics", response_class=HTMLResponse)
def topics_page(ctx: Context, cluster: str, q: str = "", offset: str = "0") -> HTMLResponse:
    """Every topic of the cluster, worst first (offline, under min ISR, data at risk, ...)."""
    return _list_page(ctx, cluster, "topics", q, offset)


@router.get("/clusters/{cluster}/groups", response_class=HTMLResponse)
def groups_page(ctx: Context, cluster: str, q: str = "", offset: str = "0") -> HTMLResponse:
    """Every consumer group of the cluster, worst first (data lost, stopped, lagging, ...)."""
    return _list_page(ctx, cluster, "groups", q, offset)


def _list_page(ctx: WebContext, cluster: str, kind: str, q: str, offset: str) -> HTMLResponse:
    action = f"/clusters/{quote(cluster, safe='')}/{kind}"
    parsed = list_query(ctx, q, offset, action, f"All {kind} of {cluster}")
    if isinstance(parsed, HTMLResponse):
        return parsed
    search, skip = parsed
    page = Page(LIST_ROWS, skip)
    with ctx.engine.connect() as conn:
        reads = ctx.reads.of(conn, cluster)
        if reads is None:
            return unknown_cluster(ctx, cluster)
        if kind == "topics":
            topics = reads.topics(search=search or None, sort="worst", page=page)
            flags = flags_of(ctx, reads, topics=(t.topic for t in topics.items))
            rows = judged_topics(topics.items, ctx.data_loss(), flags)
            total, evaluated = topics.total, topics.evaluated_at
        else:
            groups = reads.groups(search=search or None, sort="worst", page=page)
            names = tuple(g.group_id for g in groups.items)
            worst = reads.get(
                ("worst statuses", names),
                lambda c: read_pages.worst_partition_status(c, cluster, groups=names),
            )
            flags = flags_of(ctx, reads, groups=names)
            judged = judge_groups(map(row, groups.items), ctx.data_loss(), flags)
            rows = with_worst_status(judged, worst, ctx.data_loss(), flags)
            total, evaluated = groups.total, groups.evaluated_at
    return render(
        ctx,
        "web/entities.html",
        title=f"{'Topics' if kind == 'topics' else 'Consumer groups'} · {cluster}",
        heading="Topics" if kind == "topics" else "Consumer groups",
        kind=kind,
        cluster=cluster,
        action=action,
        q=search,
        max_search=MAX_SEARCH,
        offset=skip,
        size=LIST_ROWS,
        total=total,
        rows=rows,
        freshness=freshness(evaluated, ctx.clock.now(), ctx.stale_after),
    )
