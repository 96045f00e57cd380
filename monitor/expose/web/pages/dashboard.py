"""The dashboard's overview and cluster pages.

Server-rendered from `templates/web/`, with charts drawn on the server (`charts`), so a page is
one request and shows what is wrong before anyone reads: every row and card is red, amber or
green (`health`), worst first. Every page says which evaluation its numbers come from and how old
that is, marked stale past the context's `stale_after`. An unknown cluster is a 404 page that says
what was not found. The topic and group pages are `pages.topic` and `pages.group`; what the pages
share is `pages.toolkit`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from sqlalchemy import Connection

from monitor.act import repair_request
from monitor.expose.read import clusters as read_clusters
from monitor.expose.read import dashboard as read_pages
from monitor.expose.read import gone as read_gone
from monitor.expose.read import probe as read_probe
from monitor.expose.read import queries
from monitor.expose.read import share_groups as read_share
from monitor.expose.read.fresh import Counter
from monitor.expose.read.queries import Page
from monitor.expose.web import charts, health
from monitor.expose.web.context import Context, WebContext
from monitor.expose.web.pages.toolkit import (
    WORST_CANDIDATES,
    WORST_ROWS,
    flags_of,
    freshness,
    judge_groups,
    judged_share_group,
    judged_topics,
    render,
    row,
    unknown_cluster,
    with_worst_status,
)

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def overview(ctx: Context) -> HTMLResponse:
    now = ctx.clock.now()
    with ctx.engine.connect() as conn:
        states = read_clusters.clusters(conn, ctx.reads.counts.count)
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
        view = (
            reads.get("cluster page", lambda c: _cluster_view(c, cluster, ctx.reads.counts.count))
            if reads
            else None
        )
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
        state = read_clusters.counted(conn, view.state, ctx.reads.counts.count)
    card = _card(state, trouble, view.brokers, flags, now, ctx)
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


def _cluster_view(conn: Connection, cluster: str, count: Counter) -> _ClusterView | None:
    state = read_clusters.cluster(conn, cluster, count)
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


def _broker_flags(ctx: WebContext, conn: Connection, cluster: str) -> health.Flags:
    """`flags_of` the brokers of `cluster` (no flags for a cluster gone since it was listed)."""
    reads = ctx.reads.of(conn, cluster)
    return flags_of(ctx, reads) if reads is not None else health.NO_FLAGS
