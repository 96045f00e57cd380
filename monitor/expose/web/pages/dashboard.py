"""The dashboard pages: clusters overview, one cluster, one topic, one consumer group.

Server-rendered from `templates/web/`, with charts drawn on the server (`charts`), so a page is
one request and shows what is wrong before anyone reads: every row and card is red, amber or
green (`health`), worst first. Every page says which evaluation its numbers come from and how old
that is, marked stale past the context's `stale_after`. An unknown cluster, topic or group is a
404 page that says what was not found; a bad `?window=` is a 422 page that lists the good ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import Connection

from monitor.act import repair_request
from monitor.core.formatting import bytes_filter, duration_filter
from monitor.core.vocabulary import COMMITTED_BEYOND_END, STATUS_RANK
from monitor.expose.read import clusters as read_clusters
from monitor.expose.read import dashboard as read_pages
from monitor.expose.read import gone as read_gone
from monitor.expose.read import history as read_history
from monitor.expose.read import lag as read_lag
from monitor.expose.read import probe as read_probe
from monitor.expose.read import queries
from monitor.expose.read import share_groups as read_share
from monitor.expose.read import topics as read_topics
from monitor.expose.read.cache import ClusterReads
from monitor.expose.read.queries import ALL, Page
from monitor.expose.web import charts, health
from monitor.expose.web.context import Context, WebContext
from monitor.expose.web.inputs import ANY_NAME

LABELS: Final = {health.BAD: "critical", health.WARN: "warning", health.OK: "healthy"}
WINDOWS: Final = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
DEFAULT_WINDOW: Final = "1h"
WORST_ROWS: Final = 25
"""Rows of the cluster page's topics and groups tables: the worst ones. A page with 10,000 rows
is neither light nor read; each table links to its full list (`pages.entities`), paginated."""
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


router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def overview(ctx: Context) -> HTMLResponse:
    now = ctx.clock.now()
    with ctx.engine.connect() as conn:
        states = read_clusters.clusters(conn)
        trouble = read_pages.cluster_trouble(conn)
        brokers = {s.cluster: read_clusters.brokers(conn, s.cluster) for s in states}
        flags = {s.cluster: _broker_flags(ctx, conn, s.cluster) for s in states}  # a card colours its brokers
        runs = queries.last_runs(conn)
    cards = sorted(
        (_card(s, trouble.get(s.cluster), brokers[s.cluster], flags[s.cluster], now, ctx) for s in states),
        key=lambda c: (health.RANK[c["health"]], c["cluster"]),
    )
    unreached = _unreached(runs, {s.cluster for s in states})
    times = [c["evaluated_at"] for c in cards if c["evaluated_at"] is not None]
    oldest = min(times, default=None)  # a cluster never evaluated says so on its own card
    return render(
        ctx,
        "web/overview.html",
        title="Clusters",
        clusters=cards,
        unreached=unreached,
        runs=runs,
        freshness=freshness(oldest, now, ctx.stale_after),
    )


@router.get("/clusters/{cluster}", response_class=HTMLResponse)
def cluster_page(ctx: Context, cluster: str) -> HTMLResponse:
    now = ctx.clock.now()
    with ctx.engine.connect() as conn:
        reads = ctx.reads.of(conn, cluster)
        view = reads.get("cluster page", lambda c: _cluster_view(c, cluster)) if reads else None
        if reads is None or view is None:
            return unknown_cluster(ctx, cluster)
        # the worst first, as the full lists' first pages and the API (`sort=worst`) read them
        topics = reads.topics(sort="worst", page=Page(WORST_CANDIDATES))
        groups = reads.groups(sort="worst", page=Page(WORST_CANDIDATES))
        names = tuple(g.group_id for g in groups.items)
        worst = reads.get(
            ("worst statuses", names), lambda c: read_pages.worst_partition_status(c, cluster, groups=names)
        )
        flags = flags_of(
            ctx, reads, topics=(t.topic for t in topics.items), groups=(g.group_id for g in groups.items)
        )
        firing, critical = read_pages.alert_counts(conn, cluster)
        trouble = replace(view.trouble, alerts_firing=firing, alerts_critical=critical)
        alerts = read_pages.firing_alerts(conn, cluster)
        probe_since = now - PROBE_WINDOW
        probe = read_probe.partitions(conn, cluster, probe_since)
        probe_points = read_probe.history(conn, cluster, probe_since) if probe else []
        repairs = repair_request.list_repairs(conn, cluster=cluster, limit=CLUSTER_REPAIRS)
        unregistered = read_gone.unregistered_brokers(conn, cluster)
        shares = read_share.share_groups(conn, cluster, Page(WORST_ROWS))
        share_worst = read_share.worst_open(conn, cluster, [g.group_id for g in shares.items])
    card = _card(view.state, trouble, view.brokers, flags, now, ctx)
    loss = ctx.data_loss()
    topic_rows = health.topics_worst_first(judged_topics(topics.items, loss, flags))
    group_rows = health.groups_worst_first(judge_groups(map(row, groups.items), loss, flags))
    group_rows = with_worst_status(group_rows[:WORST_ROWS], worst, loss, flags)
    return render(
        ctx,
        "web/cluster.html",
        title=cluster,
        cluster=cluster,
        card=card,
        kafka_version=view.state.kafka_version,
        unavailable=view.state.unavailable,
        freshness=card["freshness"],
        brokers=[_judge_broker(row(b), flags, unregistered.get(b.broker_id)) for b in view.brokers],
        leader_chart=card["leader_chart"],
        disk_chart=card["disk_chart"],
        topics=topic_rows[:WORST_ROWS],
        topics_total=topics.total,
        groups=health.groups_worst_first(group_rows),
        groups_total=groups.total,
        alerts=alerts,
        repairs=repairs,
        share_groups=[judged_share_group(g, share_worst.get(g.group_id)) for g in shares.items],
        share_groups_total=shares.total,
        **_probe_section(cluster, probe, probe_points, probe_since, now),
    )


@dataclass(frozen=True, slots=True)
class _ClusterView:
    """The cluster's numbers on its page, kept (`read.cache`) with its worst topics and groups
    (entries of their own, shared with the lists); its alerts, probe rounds and repairs are read
    live."""

    state: read_clusters.ClusterState
    brokers: list[read_clusters.BrokerState]
    trouble: read_pages.ClusterTrouble


def _cluster_view(conn: Connection, cluster: str) -> _ClusterView | None:
    state = read_clusters.cluster(conn, cluster)
    if state is None:
        return None
    trouble = read_pages.cluster_trouble(conn, cluster).get(cluster) or read_pages.ClusterTrouble(
        cluster, 0, 0, 0, 0
    )
    return _ClusterView(state, read_clusters.brokers(conn, cluster), trouble)


CLUSTER_REPAIRS: Final = 10
"""The newest leadership repairs of the cluster its page shows, with their diffs."""

PROBE_WINDOW: Final = timedelta(minutes=15)
"""The end-to-end probe rounds the cluster page shows and counts."""


def _probe_section(
    cluster: str,
    partitions: list[read_probe.ProbePartitionState],
    points: list[read_probe.ProbePoint],
    since: datetime,
    now: datetime,
) -> dict[str, Any]:
    """The probe's table (failing partitions first) and its two charts; nothing when the probe
    has no rounds in the window (it is off, or has not run yet)."""
    if not partitions:
        return {"probe": [], "probe_latency_chart": None, "probe_outcomes_chart": None}
    rows = sorted((row(p) for p in partitions), key=lambda p: (p["ok"], p["partition"]))
    per_broker: dict[int, tuple[int, int]] = {}
    for p in partitions:
        ok, failed = per_broker.get(p.broker_id, (0, 0))
        per_broker[p.broker_id] = (ok + p.successes, failed + p.failures)
    return {
        "probe": rows,
        "probe_latency_chart": charts.probe_latency(
            cluster, [(p.broker_id, p.at, p.end_to_end_seconds if p.ok else None) for p in points], since, now
        ),
        "probe_outcomes_chart": charts.probe_outcomes(
            cluster, [(b, ok, failed) for b, (ok, failed) in sorted(per_broker.items())]
        ),
    }


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
        if view is None:
            return _not_found(
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
        "charts": charts.lag_history(group, points, since, until),
        "history_points": len(points),
    }


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
    state: read_clusters.ClusterState,
    trouble: read_pages.ClusterTrouble | None,
    brokers: list[read_clusters.BrokerState],
    flags: health.Flags,
    now: datetime,
    ctx: WebContext,
) -> dict[str, Any]:
    """A cluster's card: its state, what is in trouble, health, freshness and its two charts."""
    by_status = state.groups_by_status
    card: dict[str, Any] = {
        **row(state),
        **(row(trouble) if trouble else {"groups_stopped": 0, "groups_lost_data": 0}),
        "alerts_firing": trouble.alerts_firing if trouble else 0,
        "alerts_critical": trouble.alerts_critical if trouble else 0,
        "brokers": len(brokers),
        "groups": state.consumer_groups,
        "groups_lagging": by_status.get("WARN", 0) + by_status.get("ERR", 0),
        "down_brokers": [b.broker_id for b in brokers if not b.up],
    }
    fresh = freshness(state.evaluated_at, now, ctx.stale_after)
    bars = [
        charts.BrokerBar(
            b.broker_id, b.up, b.leaders, b.fair_share_leaders, b.disk_used_ratio,
            health.broker_cell(b.up, b.broker_id, health.LEADER_COLUMNS, flags),
            health.broker_cell(b.up, b.broker_id, health.DISK_COLUMNS, flags),
        )
        for b in brokers
    ]  # fmt: skip
    evaluated = any(b.leaders is not None for b in bars)
    with_disk = any(b.disk_used_ratio is not None for b in bars)
    card["freshness"] = fresh
    card["health"] = health.cluster(card, fresh.stale)
    card["leader_chart"] = charts.leader_balance(state.cluster, bars) if evaluated else None
    card["disk_chart"] = charts.disk_usage(state.cluster, bars) if with_disk else None
    return card


def _unreached(runs: list[dict[str, Any]], known: set[str]) -> list[dict[str, Any]]:
    """The newest run of each configured cluster whose metadata was never read: it has runs (all
    failed) but no row in `clusters`, so no evaluation either. First on the page: nothing else
    would show it."""
    newest: dict[str, dict[str, Any]] = {}
    for run in runs:
        name = run["cluster"]
        if (
            name
            and name not in known
            and (name not in newest or run["started_at"] > newest[name]["started_at"])
        ):
            newest[name] = run
    return [newest[name] for name in sorted(newest)]


def _judge_broker(
    broker: dict[str, Any], flags: health.Flags, unregistered_at: datetime | None = None
) -> dict[str, Any]:
    """A broker row with its health; one unregistered from the controller (decommissioned) is
    gone, not down: nothing to fix."""
    up, broker_id = broker["up"], broker["broker_id"]
    return {
        **broker,
        "unregistered_at": unregistered_at,
        "health": "ok" if unregistered_at is not None else health.broker(broker, flags),
        "leader_health": health.broker_cell(up, broker_id, health.LEADER_COLUMNS, flags),
        "disk_health": health.broker_cell(up, broker_id, health.DISK_COLUMNS, flags),
    }


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


def _broker_flags(ctx: WebContext, conn: Connection, cluster: str) -> health.Flags:
    """`flags_of` the brokers of `cluster` (no flags for a cluster gone since it was listed)."""
    reads = ctx.reads.of(conn, cluster)
    return flags_of(ctx, reads) if reads is not None else health.NO_FLAGS


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


def render(ctx: WebContext, name: str, **context: Any) -> HTMLResponse:
    """A page with what every dashboard template uses: the health labels and colours."""
    return ctx.render(name, labels=LABELS, loss_health=ctx.data_loss().health, **context)


def share_groups_href(cluster: str) -> str:
    return f"/clusters/{quote(cluster, safe='')}/share-groups"


def judged_share_group(group: read_share.ShareGroupSummary, severity: str | None) -> dict[str, Any]:
    """A share group's row, coloured by the most severe open finding of a share-group rule on it."""
    return {**row(group), "health": health.severity_health(severity)}


def _group_href(cluster: str, group: str) -> str:
    return f"/clusters/{quote(cluster, safe='')}/groups/{quote(group)}"


def unknown_cluster(ctx: WebContext, cluster: str) -> HTMLResponse:
    return error_page(
        ctx,
        404,
        "Not found",
        f"No cluster {cluster!r}: the monitor has never collected a cluster of that name.",
        [("/", "All clusters")],
    )


def _gone_or_not_found(
    ctx: WebContext, deleted_at: datetime | None, cluster: str, topic: str
) -> HTMLResponse:
    """A topic the cluster no longer has: said so (its alerts resolved as gone); one it never had: 404."""
    if deleted_at is None:
        return _not_found(ctx, f"No topic {topic!r} on cluster {cluster!r}", cluster)
    seen = deleted_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    message = f"Gone: this topic was deleted, seen {seen}. Its alerts resolved as gone"
    href = f"/clusters/{quote(cluster, safe='')}"
    return error_page(
        ctx, 200, f"Topic {topic} is gone", message + ".", [(href, f"Back to cluster {cluster}")]
    )


def _not_found(ctx: WebContext, message: str, cluster: str) -> HTMLResponse:
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
