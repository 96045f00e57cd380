"""Burrow v3-compatible read endpoints (`/v3/kafka/...`), so dashboards, scripts and Telegraf's
Burrow input that read Burrow can read this monitor instead.

The JSON has Burrow's shape (its HTTP endpoint documentation and `core/internal/httpserver`):
every answer carries `error`, `message` and `request` {url, host}, beside the payload key Burrow
uses. An unknown cluster, topic or group answers 404 with `error: true`, except `/status` and
`/lag`, which answer 404 with a status object whose status is `NOTFOUND`, as Burrow does.

What is ours: statuses are the evaluation's (`derived_group_partition.status`, Burrow's rules
without false STOPs; `derived_group.status`, where STOP, STALL and REWIND count as ERR). A
partition's `offsets` are the last ten commits seen in the evaluations of the past hour (a commit
is an evaluation whose committed offset changed), oldest first, padded in front with nulls like
Burrow's ring; `complete` is the share of those ten slots filled. Timestamps are epoch
milliseconds of the evaluation that saw the commit.
"""

from __future__ import annotations

import socket
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Connection, text

from monitor.core.vocabulary import NOT_FOUND_STATUS, STATUS_RANK
from monitor.expose.read import gone as read_gone
from monitor.expose.read import lag as read_lag
from monitor.expose.read import topics as read_topics
from monitor.expose.read.history import Commit, recent_commits
from monitor.expose.read.lag import GroupPartitionLag
from monitor.expose.read.queries import ALL, cluster_exists, latest_evaluation
from monitor.expose.web.api.burrow_models import (
    BurrowTopicDetail,
    ClientProfile,
    ClusterList,
    ClusterModule,
    ClusterModuleDetail,
    ConsumerDetail,
    ConsumerGroupStatus,
    ConsumerList,
    ConsumerOffset,
    ConsumerPartition,
    ConsumerStatus,
    ErrorResponse,
    PartitionStatus,
    RequestInfo,
    TopicConsumers,
    TopicList,
)
from monitor.expose.web.context import Context, WebContext

INTERVALS = 10
"""Commits kept per partition, as Burrow's default `intervals`."""
COMMIT_LOOKBACK = timedelta(hours=1)
WORSE = {NOT_FOUND_STATUS: 0, **STATUS_RANK}

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "Unknown cluster, topic or group"}
}
_STATUS_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ConsumerStatus, "description": "Unknown cluster or group: a status NOTFOUND"}
}


router = APIRouter(prefix="/v3/kafka", tags=["burrow"])


@router.get("", response_model=ClusterList)
def clusters(ctx: Context, request: Request) -> ClusterList:
    """List clusters (Burrow's `GET /v3/kafka`)."""
    with ctx.engine.connect() as conn:
        names = [str(r.name) for r in conn.execute(text("SELECT name FROM clusters ORDER BY name"))]
    return ClusterList(message="cluster list returned", clusters=names, request=_info(request))


@router.get("/{cluster}", response_model=ClusterModuleDetail, responses=_NOT_FOUND)
def cluster(ctx: Context, request: Request, cluster: str) -> ClusterModuleDetail | JSONResponse:
    """Kafka cluster detail: how the monitor reaches the cluster and how often it refreshes."""
    if not _named(cluster):
        return _error(request, "cluster module not found")
    with ctx.engine.connect() as conn:
        row = conn.execute(text("SELECT bootstrap FROM clusters WHERE name = :c"), {"c": cluster}).first()
        if row is None:
            return _error(request, "cluster module not found")
        refresh = _refresh_seconds(conn, cluster)
    module = ClusterModule(
        class_name="kafka",
        servers=[s.strip() for s in str(row.bootstrap).split(",") if s.strip()],
        client_profile=ClientProfile(name=cluster, client_id="kafka-health"),
        topic_refresh=refresh.get("metadata", 0),
        offset_refresh=refresh.get("offsets", 0),
    )
    return ClusterModuleDetail(
        message="cluster module detail returned", module=module, request=_info(request)
    )


@router.get("/{cluster}/topic", response_model=TopicList, responses=_NOT_FOUND)
def topics(ctx: Context, request: Request, cluster: str) -> TopicList | JSONResponse:
    """List the cluster's topics."""
    if not _named(cluster):
        return _error(request, "cluster not found")
    with ctx.engine.connect() as conn:
        if not cluster_exists(conn, cluster):
            return _error(request, "cluster not found")
        names = read_topics.topic_names(conn, cluster)
    return TopicList(message="topic list returned", topics=names, request=_info(request))


@router.get("/{cluster}/topic/{topic}", response_model=BurrowTopicDetail, responses=_NOT_FOUND)
def topic(ctx: Context, request: Request, cluster: str, topic: str) -> BurrowTopicDetail | JSONResponse:
    """A topic's log end offset per partition, indexed by partition."""
    if not _named(cluster, topic):
        return _error(request, "cluster or topic not found")
    with ctx.engine.connect() as conn:
        offsets = read_topics.end_offsets(conn, cluster, topic)
    if offsets is None:
        return _error(request, "cluster or topic not found")
    return BurrowTopicDetail(message="topic offsets returned", offsets=offsets, request=_info(request))


@router.get("/{cluster}/topic/{topic}/consumers", response_model=TopicConsumers, responses=_NOT_FOUND)
def topic_consumers(
    ctx: Context, request: Request, cluster: str, topic: str
) -> TopicConsumers | JSONResponse:
    """The consumer groups with committed offsets on a topic."""
    if not _named(cluster, topic):
        return _error(request, "cluster not found")
    with ctx.engine.connect() as conn:
        if not cluster_exists(conn, cluster):
            return _error(request, "cluster not found")
        groups = sorted(c.group_id for c in read_topics.consumers(conn, cluster, topic, fresh=False))
    return TopicConsumers(message="consumers of topic returned", consumers=groups, request=_info(request))


@router.get("/{cluster}/consumer", response_model=ConsumerList, responses=_NOT_FOUND)
def consumers(ctx: Context, request: Request, cluster: str) -> ConsumerList | JSONResponse:
    """List the cluster's consumer groups."""
    if not _named(cluster):
        return _error(request, "cluster not found")
    with ctx.engine.connect() as conn:
        if not cluster_exists(conn, cluster):
            return _error(request, "cluster not found")
        groups = read_lag.group_ids(conn, cluster)
    return ConsumerList(message="consumer list returned", consumers=groups, request=_info(request))


@router.get("/{cluster}/consumer/{group}", response_model=ConsumerDetail, responses=_NOT_FOUND)
def consumer(ctx: Context, request: Request, cluster: str, group: str) -> ConsumerDetail | JSONResponse:
    """A group's recent commits and current lag per topic and partition (index = partition)."""
    if not _named(cluster, group):
        return _error(request, "cluster or consumer not found")
    with ctx.engine.connect() as conn:
        found = _group_offsets(conn, cluster, group)
    if found is None:
        return _error(request, "cluster or consumer not found")
    partitions, commits, sizes = found
    topics: dict[str, list[ConsumerPartition]] = {
        name: [ConsumerPartition(offsets=[None] * INTERVALS) for _ in range(size)]
        for name, size in sizes.items()
    }
    for p in partitions:
        topics[p.topic][p.partition] = ConsumerPartition(
            offsets=_ring(commits.get((p.topic, p.partition), [])), owner=p.owner or "",
            client_id=p.client_id or "", current_lag=p.offset_lag or 0,
        )  # fmt: skip
    return ConsumerDetail(message="consumer detail returned", topics=topics, request=_info(request))


@router.get(
    "/{cluster}/consumer/{group}/status", response_model=ConsumerStatus,
    responses=_STATUS_NOT_FOUND,
)  # fmt: skip
def status(ctx: Context, request: Request, cluster: str, group: str) -> ConsumerStatus | JSONResponse:
    """The group's status with only the partitions that are not OK."""
    return _status(ctx, request, cluster, group, show_all=False)


@router.get(
    "/{cluster}/consumer/{group}/lag", response_model=ConsumerStatus,
    responses=_STATUS_NOT_FOUND,
)  # fmt: skip
def lag(ctx: Context, request: Request, cluster: str, group: str) -> ConsumerStatus | JSONResponse:
    """The group's status with every partition it consumes."""
    return _status(ctx, request, cluster, group, show_all=True)


def _status(
    ctx: WebContext, request: Request, cluster: str, group: str, show_all: bool
) -> ConsumerStatus | JSONResponse:
    if not _named(cluster, group):
        return _not_found_status(request, cluster, group)
    with ctx.engine.connect() as conn:
        found = _group_offsets(conn, cluster, group)
        group_status = conn.execute(
            text("SELECT status FROM group_lag WHERE cluster = :c AND group_id = :g"),
            {"c": cluster, "g": group},
        ).scalar()
        beyond = read_gone.beyond_end(conn, cluster, group)
    if found is None:
        return _not_found_status(request, cluster, group)
    partitions, commits, _ = found
    evaluated = [
        _partition_status(p, commits.get((p.topic, p.partition), []), (p.topic, p.partition) in beyond)
        for p in partitions
    ]
    maxlag: PartitionStatus | None = None
    for entry in evaluated:
        if maxlag is None or entry.current_lag > maxlag.current_lag:
            maxlag = entry
    complete = sum(1 for e in evaluated if e.complete == 1.0) / len(evaluated) if evaluated else 0.0
    worst = max((e.status for e in evaluated), key=WORSE.__getitem__, default="OK")
    worst = "ERR" if WORSE[worst] > WORSE["ERR"] else worst
    body = ConsumerGroupStatus(
        cluster=cluster, group=group, status=_at_least_warn(group_status or worst, bool(beyond)),
        complete=complete, partitions=[e for e in evaluated if show_all or e.status != "OK"],
        partition_count=len(evaluated), maxlag=maxlag, totallag=sum(e.current_lag for e in evaluated),
        partitions_beyond_end=sum(e.committed_beyond_end for e in evaluated),
    )  # fmt: skip
    return ConsumerStatus(message="consumer status returned", status=body, request=_info(request))


def _group_offsets(
    conn: Connection, cluster: str, group: str
) -> tuple[list[GroupPartitionLag], dict[tuple[str, int], list[Commit]], dict[str, int]] | None:
    """A group's partitions, recent commits and the partition count of each of its topics; None
    when the cluster or (in its newest evaluation) the group is unknown."""
    evaluated_at = latest_evaluation(conn, cluster)
    if evaluated_at is None:
        return None
    partitions = read_lag.group_partitions(conn, cluster, group, page=ALL).items
    if not partitions:
        return None
    commits = recent_commits(conn, cluster, group, evaluated_at - COMMIT_LOOKBACK, INTERVALS)
    sizes: dict[str, int] = {}
    for p in partitions:
        sizes[p.topic] = max(sizes.get(p.topic, 0), p.partition + 1)
    for row in conn.execute(
        text("SELECT topic, partition_count FROM topics WHERE cluster = :c AND topic = ANY(:t)"),
        {"c": cluster, "t": list(sizes)},
    ):
        sizes[str(row.topic)] = max(sizes[str(row.topic)], int(row.partition_count))
    return partitions, commits, sizes


def _partition_status(p: GroupPartitionLag, commits: list[Commit], beyond_end: bool) -> PartitionStatus:
    return PartitionStatus(
        topic=p.topic, partition=p.partition, owner=p.owner or "", client_id=p.client_id or "",
        status=_at_least_warn(p.status or "OK", beyond_end), start=_offset(commits[0]) if commits else None,
        end=_offset(commits[-1]) if commits else None, current_lag=p.offset_lag or 0,
        complete=min(len(commits), INTERVALS) / INTERVALS, committed_beyond_end=beyond_end,
    )  # fmt: skip


def _at_least_warn(status: str, beyond_end: bool) -> str:
    """A status with offsets committed beyond the log end: never OK (lag 0 is not caught up)."""
    return "WARN" if beyond_end and status == "OK" else status


def _offset(commit: Commit) -> ConsumerOffset:
    return ConsumerOffset(offset=commit.offset, timestamp=_millis(commit.seen_at), lag=commit.lag)


def _ring(commits: list[Commit]) -> list[ConsumerOffset | None]:
    """Burrow's ring of `INTERVALS` slots: the newest commits last, empty slots first."""
    kept = [_offset(c) for c in commits[-INTERVALS:]]
    return [None] * (INTERVALS - len(kept)) + kept


def _millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _refresh_seconds(conn: Connection, cluster: str) -> dict[str, int]:
    """Seconds between the last two runs of each collection job (0 when it ran once or never)."""
    rows = conn.execute(
        text(
            """
            SELECT job, extract(epoch FROM max(started_at) - min(started_at)) AS gap FROM (
                SELECT job, started_at, row_number() OVER (PARTITION BY job ORDER BY started_at DESC) AS n
                FROM collection_runs WHERE cluster = :c AND job IN ('metadata', 'offsets')
            ) r WHERE n <= 2 GROUP BY job
            """
        ),
        {"c": cluster},
    )
    return {str(row.job): round(float(row.gap or 0)) for row in rows}


def _named(*names: str) -> bool:
    """Whether every name could name something: none holds a NUL (PostgreSQL text cannot)."""
    return all("\x00" not in name for name in names)


def _not_found_status(request: Request, cluster: str, group: str) -> JSONResponse:
    body = ConsumerGroupStatus(cluster=cluster, group=group, status="NOTFOUND", complete=1.0)
    answer = ConsumerStatus(message="consumer status returned", status=body, request=_info(request))
    return JSONResponse(answer.model_dump(by_alias=True), status_code=404)


def _info(request: Request) -> RequestInfo:
    return RequestInfo(url=request.url.path, host=socket.gethostname())


def _error(request: Request, message: str) -> JSONResponse:
    body = ErrorResponse(error=True, message=message, request=_info(request))
    return JSONResponse(body.model_dump(by_alias=True), status_code=404)
