"""The JSON API of clusters, brokers, topics, consumer groups, lag history and findings
(`/api/v1/...`): the read layer (`monitor.expose.read`) over HTTP, with its records as the
response models, so the OpenAPI document describes every field with its meaning.

Conventions, shared with `api.alerts`: an unknown cluster, topic or group is a 404 with the code
`cluster_not_found`, `topic_not_found` or `group_not_found`; a bad parameter is a 422 with the code
`invalid_parameter`; long lists take `limit` (at most 1000) and `offset` and answer a `Listing`
with the total and `evaluated_at`, the evaluation the numbers come from.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Query
from pydantic import BeforeValidator, StringConstraints
from sqlalchemy import Connection

from monitor.core.user_input import timestamp
from monitor.core.vocabulary import DURATION_UNITS, ConsumerStatus, Severity, parse_duration
from monitor.expose.read import clusters as read_clusters
from monitor.expose.read import history as read_history
from monitor.expose.read import lag as read_lag
from monitor.expose.read import topics as read_topics
from monitor.expose.read.cache import ClusterReads
from monitor.expose.read.clusters import BrokerState, ClusterState, Finding
from monitor.expose.read.history import GroupLagPoint, LagHistory, PartitionLagPoint
from monitor.expose.read.lag import GroupDetail, GroupPartitionLag, GroupSummary
from monitor.expose.read.queries import Listing, cluster_exists, latest_evaluation
from monitor.expose.read.topics import TopicDetail, TopicSummary
from monitor.expose.web.context import ApiError, Context, ErrorBody, WebContext, not_found
from monitor.expose.web.inputs import Paging, digits

Status = ConsumerStatus
MAX_WINDOW = timedelta(days=90)
WINDOW_EXAMPLES = "90s, 15m, 1h, 7d"


def _numbers_up_to(top: int) -> str:
    """A regular expression of the whole numbers 1..`top` written without leading zeros."""
    digits = str(top)
    shorter = "[1-9]" + (f"[0-9]{{0,{len(digits) - 2}}}" if len(digits) > 2 else "")
    arms = [shorter] if len(digits) > 1 else []
    for i, digit in enumerate(digits):
        low, high = (1 if i == 0 else 0), int(digit) - 1
        if high < low:
            continue
        rest = len(digits) - i - 1
        choice = str(low) if low == high else f"[{low}{high}]" if high == low + 1 else f"[{low}-{high}]"
        tail = "" if rest == 0 else "[0-9]" if rest == 1 else f"[0-9]{{{rest}}}"
        arms.append(digits[:i] + choice + tail)
    return "|".join([*arms, digits])


WINDOW_DOCUMENTED = (
    "^("
    + "|".join(
        f"({_numbers_up_to(int(MAX_WINDOW.total_seconds()) // seconds)}){unit}"
        for unit, seconds in reversed(DURATION_UNITS)
    )
    + ")$"
)
"""The windows `parse_window` accepts, bound included, for the OpenAPI document: one number and one
unit of the duration grammar (`monitor.core.vocabulary`), so that a regular expression can state
the bound. The handler checks with `parse_window`, so a wrong window gets a message, not a regex."""
_ONE_UNIT = re.compile(WINDOW_DOCUMENTED)

TAGS: list[dict[str, Any]] = [
    {"name": "clusters", "description": "Clusters and their brokers, with the health numbers of "
     "their newest evaluation."},
    {"name": "topics", "description": "Topics with their retention settings, size and coverage, "
     "their partitions' replication and headroom, and the groups reading them."},
    {"name": "consumer groups", "description": "Consumer groups: lag in offsets and seconds per "
     "group, topic and partition, the sliding-window status, time until data loss, history."},
    {"name": "findings", "description": "What the alert rules match now (pending and firing)."},
    {"name": "burrow", "description": "Burrow v3-compatible read endpoints, in Burrow's JSON shape."},
]  # fmt: skip


ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such cluster, topic or group"},
    422: {"model": ErrorBody, "description": "A parameter is invalid (code `invalid_parameter`)"},
    503: {"model": ErrorBody, "description": "PostgreSQL did not answer (code `database_unavailable`)"},
}

NAME = "^[^\\x00]*$"
"""Names never hold a NUL character (PostgreSQL text cannot): such a parameter is invalid."""
ClusterName = Annotated[
    str, Path(pattern=NAME, description="cluster name, as configured in the monitor", examples=["prod"])
]
TopicName = Annotated[str, Path(pattern=NAME, description="topic name", examples=["orders"])]
GroupId = Annotated[str, Path(pattern=NAME, description="consumer group id", examples=["billing"])]
RuleName = Annotated[str, StringConstraints(pattern=NAME)]
Search = Annotated[str | None, Query(max_length=249, pattern=NAME, description="keep names containing this")]

Window = Annotated[
    str,
    Query(
        max_length=9,
        description=f"how far back: {WINDOW_EXAMPLES} (at most 90d)",
        json_schema_extra={"pattern": WINDOW_DOCUMENTED},
    ),
]
Until = Annotated[
    datetime | None,
    Query(description="end of the window (ISO 8601 with offset); default: the newest evaluation"),
    BeforeValidator(lambda value: None if value is None else timestamp(value, "until")),
]
MaxPoints = Annotated[
    int,
    Query(ge=1, le=5000, description="at most this many points; longer windows are bucketed"),
    digits("max_points", 1, 5000),
]
MAX_PARTITION = 2**31 - 1
_PARTITION = digits("partition", 0, MAX_PARTITION)


def parse_window(value: str) -> timedelta:
    """`90s`, `15m`, `1h`, `7d` as a duration (at most 90 days): a duration of the one grammar,
    written with one unit."""
    try:
        seconds = parse_duration(value, allow_zero=False, examples=WINDOW_EXAMPLES)
    except ValueError as exc:
        raise ValueError(f"window: {exc}") from exc
    window = timedelta(seconds=seconds)
    if window > MAX_WINDOW:
        raise ValueError(f"window {value!r} is longer than {MAX_WINDOW.days} days")
    if _ONE_UNIT.match(value) is None:
        raise ValueError(f"window {value!r}: write one number (no leading zeros) and one unit, like 90m")
    return window


DESCRIPTION = (
    "A Kafka health monitor: consumer lag, retention and replication across Kafka clusters. "
    "Every number comes from the newest evaluation of its cluster (`evaluated_at`). Errors are "
    '`{"error": {"code": ..., "message": ...}}` with a stable code. `/v3/kafka` answers like '
    "Burrow's v3 HTTP endpoint."
)


router = APIRouter(prefix="/api/v1", responses=ERRORS)


def install(app: FastAPI) -> None:
    """Add the routes to `app`, with the descriptions of their tags and of the API."""
    app.openapi_tags = [*(app.openapi_tags or []), *TAGS]
    app.description = app.description or DESCRIPTION
    app.include_router(router)


def known_cluster(conn: Connection, cluster: str) -> None:
    if not cluster_exists(conn, cluster):
        raise _no_cluster(cluster)


def _reads(ctx: WebContext, conn: Connection, cluster: str) -> ClusterReads:
    """The kept read models of a known cluster (else a 404 `cluster_not_found`)."""
    reads = ctx.reads.of(conn, cluster)
    if reads is None:
        raise _no_cluster(cluster)
    return reads


def _no_cluster(cluster: str) -> ApiError:
    return not_found("cluster", cluster, "GET /api/v1/clusters lists the clusters")


@router.get("/clusters", tags=["clusters"], response_model=list[ClusterState])
def clusters(ctx: Context) -> list[ClusterState]:
    """Every cluster the monitor has seen, with broker, partition, group and finding counts, and
    its Kafka release with what that release cannot give."""
    with ctx.engine.connect() as conn:
        return read_clusters.clusters(conn, ctx.reads.counts.count)


@router.get("/clusters/{cluster}", tags=["clusters"], response_model=ClusterState)
def cluster(ctx: Context, cluster: ClusterName) -> ClusterState:
    """One cluster: metadata, its Kafka release with what that release cannot give, the health
    numbers of its newest evaluation, and counts."""
    with ctx.engine.connect() as conn:
        found = read_clusters.cluster(conn, cluster, ctx.reads.counts.count)
    if found is None:
        raise _no_cluster(cluster)
    return found


@router.get("/clusters/{cluster}/brokers", tags=["clusters"], response_model=list[BrokerState])
def brokers(ctx: Context, cluster: ClusterName) -> list[BrokerState]:
    """The brokers of a cluster by id, with leadership, replicas and disk usage."""
    with ctx.engine.connect() as conn:
        known_cluster(conn, cluster)
        return read_clusters.brokers(conn, cluster)


@router.get("/clusters/{cluster}/topics", tags=["topics"], response_model=Listing[TopicSummary])
def topics(
    *,
    ctx: Context,
    cluster: ClusterName,
    search: Search = None,
    problems: Annotated[
        bool,
        Query(
            description="only topics under-replicated, offline, under "
            "min ISR, short of their retention or with data at risk"
        ),
    ] = False,
    sort: read_topics.TopicSort = "topic",
    page: Paging,
) -> Listing[TopicSummary]:
    """The topics of a cluster with settings, size, coverage and replication numbers."""  # fmt: skip
    with ctx.engine.connect() as conn:
        return _reads(ctx, conn, cluster).topics(search=search, problems=problems, sort=sort, page=page)


@router.get("/clusters/{cluster}/topics/{topic}", tags=["topics"], response_model=TopicDetail)
def topic(ctx: Context, cluster: ClusterName, topic: TopicName, page: Paging) -> TopicDetail:
    """One topic: settings, configuration, a page of partitions (`limit`, `offset`) with
    replication and retention headroom, and the groups reading it with their lag and time
    until data loss."""
    with ctx.engine.connect() as conn:
        known_cluster(conn, cluster)
        found = read_topics.topic(conn, cluster, topic, page=page)
    if found is None:
        raise not_found("topic", topic, f"GET /api/v1/clusters/{cluster}/topics lists the topics")
    return found


@router.get("/clusters/{cluster}/groups", tags=["consumer groups"], response_model=Listing[GroupSummary])
def groups(
    *,
    ctx: Context,
    cluster: ClusterName,
    search: Search = None,
    status: Annotated[list[Status] | None, Query(description="only these statuses")] = None,
    lagging: Annotated[bool, Query(description="only groups with offset lag > 0")] = False,
    sort: read_lag.GroupSort = "status",
    page: Paging,
) -> Listing[GroupSummary]:
    """The consumer groups of a cluster with their lag, worst status first by default. The sort,
    the filters and the page follow the newest evaluation; the offset lag of the groups on the
    page is as fresh as the store holds it (`offset_lag_as_of` says how old)."""
    with ctx.engine.connect() as conn:
        return _reads(ctx, conn, cluster).groups(
            search=search, status=status or (), lagging=lagging, sort=sort, page=page
        )


@router.get("/clusters/{cluster}/groups/{group}", tags=["consumer groups"], response_model=GroupDetail)
def group(ctx: Context, cluster: ClusterName, group: GroupId) -> GroupDetail:
    """One consumer group: lag, state, members and their assignments, lag per topic."""
    with ctx.engine.connect() as conn:
        known_cluster(conn, cluster)
        found = read_lag.group(conn, cluster, group)
    if found is None:
        raise _no_group(cluster, group)
    return found


@router.get(
    "/clusters/{cluster}/groups/{group}/lag", tags=["consumer groups"],
    response_model=Listing[GroupPartitionLag],
)  # fmt: skip
def group_lag(
    *,
    ctx: Context,
    cluster: ClusterName,
    group: GroupId,
    topic: Annotated[str | None, Query(max_length=249, pattern=NAME, description="only this topic")] = None,
    lagging: Annotated[bool, Query(description="only partitions with offset lag > 0")] = False,
    page: Paging,
) -> Listing[GroupPartitionLag]:
    """A group's lag per partition, with how it was measured and the member that owns it."""
    with ctx.engine.connect() as conn:
        known_cluster(conn, cluster)
        listing = read_lag.group_partitions(conn, cluster, group, topic=topic, lagging=lagging, page=page)
        if listing.total == 0 and read_lag.group(conn, cluster, group) is None:
            raise _no_group(cluster, group)
    return listing


@router.get(
    "/clusters/{cluster}/groups/{group}/history", tags=["consumer groups"],
    response_model=LagHistory[GroupLagPoint],
)  # fmt: skip
def group_history(
    ctx: Context,
    cluster: ClusterName,
    group: GroupId,
    window: Window = "1h",
    until: Until = None,
    max_points: MaxPoints = 500,
) -> LagHistory[GroupLagPoint]:
    """A group's lag over `window` up to `until`, oldest first, in at most `max_points`."""  # fmt: skip
    with ctx.engine.connect() as conn:
        since, end = _group_window(ctx, conn, cluster, group, window, until)
        return read_history.group_history(conn, cluster, group, since, end, max_points)


@router.get(
    "/clusters/{cluster}/groups/{group}/lag/{topic}/{partition}/history", tags=["consumer groups"],
    response_model=LagHistory[PartitionLagPoint],
)  # fmt: skip
def partition_history(
    ctx: Context,
    cluster: ClusterName,
    group: GroupId,
    topic: TopicName,
    partition: Annotated[int, Path(ge=0, le=MAX_PARTITION, description="partition number"), _PARTITION],
    window: Window = "1h",
    until: Until = None,
    max_points: MaxPoints = 500,
) -> LagHistory[PartitionLagPoint]:
    """A group's lag on one partition over `window` up to `until`, oldest first."""  # fmt: skip
    with ctx.engine.connect() as conn:
        since, end = _group_window(ctx, conn, cluster, group, window, until)
        return read_history.partition_history(conn, cluster, group, topic, partition, since, end, max_points)


@router.get("/findings", tags=["findings"], response_model=Listing[Finding])
def findings(
    *,
    ctx: Context,
    cluster: Annotated[str | None, Query(pattern=NAME, description="only this cluster")] = None,
    severity: Annotated[list[Severity] | None, Query(description="only these severities")] = None,
    rule: Annotated[list[RuleName] | None, Query(description="only these rules")] = None,
    page: Paging,
) -> Listing[Finding]:
    """Open findings (pending and firing), most severe first, then oldest first."""
    with ctx.engine.connect() as conn:
        if cluster is not None:
            known_cluster(conn, cluster)
        return read_clusters.findings(
            conn, cluster=cluster, severity=severity or (), rule=rule or (), page=page
        )


def _window(
    ctx: WebContext, conn: Connection, cluster: str, window: str, until: datetime | None
) -> tuple[datetime, datetime]:
    """(until - window, until], `until` defaulting to the cluster's newest evaluation."""
    known_cluster(conn, cluster)
    try:
        length = parse_window(window)
    except ValueError as exc:
        raise ApiError(422, "invalid_parameter", str(exc)) from exc
    end = until or latest_evaluation(conn, cluster) or ctx.clock.now()
    return end - length, end


def _group_window(
    ctx: WebContext, conn: Connection, cluster: str, group: str, window: str, until: datetime | None
) -> tuple[datetime, datetime]:
    """`_window` of a group some evaluation has seen (else a 404 `group_not_found`)."""
    since, end = _window(ctx, conn, cluster, window, until)
    if not read_lag.group_known(conn, cluster, group):
        raise _no_group(cluster, group)
    return since, end


def _no_group(cluster: str, group: str) -> ApiError:
    return not_found("group", group, f"GET /api/v1/clusters/{cluster}/groups lists the groups")
