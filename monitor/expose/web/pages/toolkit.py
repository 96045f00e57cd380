"""What every dashboard page uses: the health labels and colours, how fresh a page's numbers are,
rows from read records, the judging of topic, group and share-group rows by their facts and the
open findings (`flags_of`), rendering, and the 404 and 422 pages. The pages (`dashboard`, `topic`,
`group`, `entities`, `share_groups`) import from here, never from each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import quote

from fastapi.responses import HTMLResponse
from sqlalchemy import Connection

from monitor.expose.read import dashboard as read_pages
from monitor.expose.read import share_groups as read_share
from monitor.expose.read import topics as read_topics
from monitor.expose.read.cache import ClusterReads
from monitor.expose.web import health
from monitor.expose.web.context import WebContext
from monitor.expose.web.inputs import list_offset, search_text

LABELS: Final = {health.BAD: "critical", health.WARN: "warning", health.OK: "healthy"}

WORST_ROWS: Final = 25
"""Rows of the cluster page's topics and groups tables: the worst ones. A page with 10,000 rows
is neither light nor read; each table links to its full list (`pages.entities`), paginated."""

LIST_ROWS: Final = 100
"""Rows per page of a full list (topics, groups, share groups)."""

WORST_CANDIDATES: Final = 100
"""Rows read, worst first by their facts (`sort="worst"`), to pick the `WORST_ROWS` worst by
colour, which adds the findings' severities and the data-loss scale to the facts."""


@dataclass(frozen=True, slots=True)
class Freshness:
    """How old a page's numbers are: the evaluation they come from, and whether that is stale."""

    evaluated_at: datetime | None
    age_seconds: float | None
    stale: bool
    stale_after_seconds: float


def row(record: Any) -> dict[str, Any]:
    """A read-layer record as a page's row: its fields, as they are. The records are flat and a
    page never changes a value, so nothing is copied (`dataclasses.asdict` deep-copies every
    value, which was a third of the cluster page's time at 10,000 topics)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def freshness(evaluated_at: datetime | None, now: datetime, stale_after: timedelta) -> Freshness:
    if evaluated_at is None:
        return Freshness(None, None, True, stale_after.total_seconds())
    age = max((now - evaluated_at).total_seconds(), 0.0)
    return Freshness(evaluated_at, age, age > stale_after.total_seconds(), stale_after.total_seconds())


def judged_topics(
    topics: Iterable[read_topics.TopicSummary], loss: health.LossScale, flags: health.Flags
) -> list[dict[str, Any]]:
    """Topic rows coloured by their facts, their findings and their groups' data-loss margin."""
    return health.annotate((row(t) for t in topics), lambda t: health.topic(t, loss, flags))


def with_worst_status(
    groups: list[dict[str, Any]], worst: Mapping[str, str], loss: health.LossScale, flags: health.Flags
) -> list[dict[str, Any]]:
    """Group rows with their worst partition status (STOP, STALL, REWIND where the group says
    ERR; `worst`: `read_pages.worst_partition_status` of the rows' groups), coloured again."""
    return judge_groups(({**g, "worst_status": worst.get(g["group_id"])} for g in groups), loss, flags)


def judge_groups(
    rows: Iterable[dict[str, Any]],
    loss: health.LossScale,
    flags: health.Flags,
    *,
    topic: str | None = None,
    of_group: str | None = None,
) -> list[dict[str, Any]]:
    """Groups coloured, each row by the findings on what it is: a group, its lag on `topic`, or
    (rows of the group `of_group`) its lag on the row's partition."""

    def flagged(r: dict[str, Any]) -> str:
        if of_group is not None:
            return flags.health(group_id=of_group, topic=r["topic"], partition=r["partition"])
        if topic is not None:
            return flags.health(group_id=r["group_id"], topic=topic)
        return flags.health(group_id=r["group_id"])

    return [
        {
            **r,
            "health": health.group(r, loss, flagged(r)),
            "status_health": health.status_health(r.get("worst_status") or r["status"]),
        }
        for r in rows
    ]


def flags_of(
    ctx: WebContext, reads: ClusterReads, *, topics: Iterable[str] = (), groups: Iterable[str] = ()
) -> health.Flags:
    """The colours the open findings of the cluster give the rows a page shows: the brokers, the
    topics named in `topics` (their partitions and the groups' lag on them) and the groups named
    in `groups`. Only the findings on those are read (a cluster may have thousands open), and
    kept with the cluster's version and the rule files' stamp (built again when they change)."""
    stamp, rules = ctx.data_loss.stamped_reads()
    names, ids = tuple(topics), tuple(groups)

    def read(conn: Connection) -> health.Flags:
        return health.Flags(read_pages.open_findings(conn, reads.cluster, topics=names, groups=ids), rules)

    return reads.get(("flags", names, ids, stamp), read)


def render(ctx: WebContext, name: str, **context: Any) -> HTMLResponse:
    """A page with what every dashboard template uses: the health labels and colours."""
    return ctx.render(name, labels=LABELS, loss_health=ctx.data_loss().health, **context)


def share_groups_href(cluster: str) -> str:
    return f"/clusters/{quote(cluster, safe='')}/share-groups"


def judged_share_group(group: read_share.ShareGroupSummary, severity: str | None) -> dict[str, Any]:
    """A share group's row, coloured by the most severe open finding of a share-group rule on it."""
    return {**row(group), "health": health.severity_health(severity)}


def unknown_cluster(ctx: WebContext, cluster: str) -> HTMLResponse:
    return error_page(
        ctx,
        404,
        "Not found",
        f"No cluster {cluster!r}: the monitor has never collected a cluster of that name.",
        [("/", "All clusters")],
    )


def not_found(ctx: WebContext, message: str, cluster: str) -> HTMLResponse:
    href = f"/clusters/{quote(cluster, safe='')}"
    return error_page(
        ctx, 404, "Not found", message + ".", [(href, f"Back to cluster {cluster}"), ("/", "All clusters")]
    )


def error_page(
    ctx: WebContext, status: int, title: str, message: str, links: list[tuple[str, str]]
) -> HTMLResponse:
    response = ctx.render("web/error.html", title=title, message=message, links=links)
    response.status_code = status
    return response


def list_query(
    ctx: WebContext, q: str, offset: str, action: str, what: str
) -> tuple[str, int] | HTMLResponse:
    """A full list's search text and offset (bounded, `inputs`), or the 422 page that says what is
    wrong and links to the whole list (`action`, `what`)."""
    try:
        return search_text(q), list_offset(offset)
    except ValueError as exc:
        return error_page(ctx, 422, "Bad request", f"{exc}.", [(action, what)])
