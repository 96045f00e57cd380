"""The share-group pages (KIP-932, Kafka 4.1+): a cluster's share groups, most records waiting
first, with a search box, and one share group with its alerts, members and share partitions.

They read the newest share-groups sample (`monitor.expose.read.share_groups`, as the API does),
so their freshness is that sample's time. A row is red or amber where an open finding (pending or
firing) of a share-group rule (`alert_rules/share.yaml`) on the group is critical or a warning.
A cluster without share groups (before Kafka 4.1, or with the feature off) says so, with the
broker's reason, as an empty list; an unknown cluster or share group is a 404 page that says what
was not found.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from monitor.expose.read import dashboard as read_pages
from monitor.expose.read import share_groups as read_share
from monitor.expose.read.queries import Page, cluster_exists
from monitor.expose.web.context import Context
from monitor.expose.web.inputs import ANY_NAME, MAX_SEARCH
from monitor.expose.web.pages.toolkit import (
    LIST_ROWS,
    error_page,
    freshness,
    judged_share_group,
    list_query,
    render,
    share_groups_href,
    unknown_cluster,
)

router = APIRouter(include_in_schema=False)


@router.get("/clusters/{cluster}/share-groups", response_class=HTMLResponse)
def share_groups_page(ctx: Context, cluster: str, q: str = "", offset: str = "0") -> HTMLResponse:
    """Every share group of the cluster, most records waiting first."""
    action = share_groups_href(cluster)
    parsed = list_query(ctx, q, offset, action, f"All share groups of {cluster}")
    if isinstance(parsed, HTMLResponse):
        return parsed
    search, skip = parsed
    with ctx.engine.connect() as conn:
        if not cluster_exists(conn, cluster):
            return unknown_cluster(ctx, cluster)
        listed = read_share.share_groups(conn, cluster, Page(LIST_ROWS, skip), search or None)
        worst = read_share.worst_open(conn, cluster, [g.group_id for g in listed.items])
    rows = [judged_share_group(g, worst.get(g.group_id)) for g in listed.items]
    return render(
        ctx,
        "web/share_groups.html",
        title=f"Share groups · {cluster}",
        cluster=cluster,
        listed=listed,
        rows=rows,
        action=action,
        q=search,
        max_search=MAX_SEARCH,
        offset=skip,
        size=LIST_ROWS,
        freshness=freshness(listed.sampled_at, ctx.clock.now(), ctx.stale_after),
    )


@router.get("/clusters/{cluster}/share-groups/{group:" + ANY_NAME + "}", response_class=HTMLResponse)
def share_group_page(ctx: Context, cluster: str, group: str) -> HTMLResponse:
    """One share group: its alerts, state, members and share partitions."""
    with ctx.engine.connect() as conn:
        if not cluster_exists(conn, cluster):
            return unknown_cluster(ctx, cluster)
        found = read_share.share_group(conn, cluster, group)
        alerts = (
            read_pages.firing_alerts(conn, cluster, group_id=group, entities=read_share.ENTITIES)
            if found is not None
            else []
        )
        worst = read_share.worst_open(conn, cluster, [group])
    if found is None:
        href = share_groups_href(cluster)
        return error_page(
            ctx,
            404,
            "Not found",
            f"No share group {group!r} on cluster {cluster!r} in its newest share-groups sample (a new "
            "share group appears after its first sample; one deleted leaves it).",
            [(href, f"All share groups of {cluster}"), ("/", "All clusters")],
        )
    judged = judged_share_group(found, worst.get(group))
    return render(
        ctx,
        "web/share_group.html",
        title=f"{group} · {cluster}",
        cluster=cluster,
        group=judged,
        members=found.member_list,
        partitions=sorted(found.share_partitions, key=lambda p: (-(p.lag or 0), p.topic, p.partition)),
        alerts=alerts,
        freshness=freshness(found.sampled_at, ctx.clock.now(), ctx.stale_after),
    )
