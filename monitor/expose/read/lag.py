"""Read layer: consumer groups, their members, and their lag per topic and per partition, from
the newest evaluation's rows of `derived_group`, `derived_group_topic` and `derived_group_partition`
(what the `group_lag`, `group_topic_lag` and `group_partition_lag` views show; the records carry
the columns `record_columns` gives them), with one group's offset lag (its committed and end
offsets, per partition, per topic and summed) as fresh as the store holds it
(`monitor.expose.read.fresh`, `offset_lag_as_of`). The lists of groups sort and page by the
evaluation's offset lag, then show the fresh offset lag of the groups on the page
(`freshened_groups`); their `lagging` filter keeps the groups lagging by the fresh offset lag
(`fresh.LAGGING_GROUP_IDS`). Before a cluster's first evaluation, its list is the groups the
store has committed offsets of, with their offset lag and nothing the evaluation gives. The lag
over time is `monitor.expose.read.history`. See `monitor.expose.read.queries` for the conventions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, text

from monitor.core.vocabulary import lagging_sql, worst_status_first
from monitor.expose.read.derived_records import GroupColumns, GroupPartitionColumns, GroupTopicColumns
from monitor.expose.read.fields import Described
from monitor.expose.read.fresh import LAGGING_GROUP_IDS, partition_lags, with_fresh_lag
from monitor.expose.read.objectives import GroupObjective, group_objectives
from monitor.expose.read.queries import (
    FIRST_PAGE,
    Listing,
    Page,
    fetch_page,
    latest_evaluation,
    like_pattern,
    records,
)
from monitor.expose.read.record_columns import column_names, select_list
from monitor.store.evaluation import latest_rows
from monitor.store.fresh_lag import FRESH_GROUPS, FRESH_PARTITIONS, FreshLag, Key, fleet_read, groups_lags

WORST_STATUS_FIRST = worst_status_first()
"""A SQL sort key: the worst consumer status first (the vocabulary's order, best to worst)."""

GroupSort = Literal[
    "status",
    "worst",
    "group_id",
    "offset_lag",
    "lag_seconds",
    "time_until_data_loss_seconds",
    "data_loss_margin_seconds",
]
_GROUP_ORDER: dict[str, str] = {
    "status": f"{WORST_STATUS_FIRST}, max_lag_seconds DESC NULLS LAST, group_id",
    "worst": f"data_loss_occurred DESC NULLS LAST, {WORST_STATUS_FIRST}, "
    "data_loss_margin_seconds NULLS LAST, max_lag_seconds DESC NULLS LAST, group_id",
    "group_id": "group_id",
    "offset_lag": "offset_lag DESC NULLS LAST, group_id",
    "lag_seconds": "lag_seconds DESC NULLS LAST, group_id",
    "time_until_data_loss_seconds": "time_until_data_loss_seconds NULLS LAST, group_id",
    "data_loss_margin_seconds": "data_loss_margin_seconds NULLS LAST, group_id",
}
"""`worst` follows the facts that colour a group (`monitor.expose.web.health.group`): data lost,
the worst status, the smallest data-loss margin, the largest lag in seconds."""

_FRESH = ("committed_offset", "end_offset", "offset_lag")
"""The columns of a group's partition read as fresh as the store holds them (`fresh`)."""


@dataclass(frozen=True, slots=True)
class GroupSummary(GroupColumns, Described):
    """A consumer group's lag summed over its partitions, with its state and worst status."""

    __entity__ = "group"

    evaluated_at: datetime | None
    offset_lag_as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class GroupMember(Described):
    """A member of a consumer group and the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: list[str]
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class GroupTopicLag(GroupTopicColumns, Described):
    """A group's lag on one topic, summed over the topic's partitions."""

    __entity__ = "group_topic"

    offset_lag_as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class GroupPartitionLag(GroupPartitionColumns, Described):
    """A group's lag on one partition, and the member it is assigned to."""

    __entity__ = "group_partition"

    owner: str | None
    client_id: str | None
    committed_offset_as_of: datetime | None = None
    end_offset_as_of: datetime | None = None
    offset_lag_as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class GroupDetail(Described):
    """One group: its summary, its members, and its lag per topic (most urgent first: data lost,
    then the smallest data-loss margin, then the largest lag)."""

    __overrides__ = {
        "group": "the group's lag summed over its partitions",
        "topics": "lag per topic",
        "objectives": "the lag objectives the group is held to (evaluate.objectives_file), by name: "
        "burn rates and the error budget left",
    }

    group: GroupSummary
    members: list[GroupMember]
    topics: list[GroupTopicLag]
    objectives: list[GroupObjective] = field(default_factory=list)


def _group_lag_query(where: Sequence[str]) -> str:
    """The groups of the newest evaluation of cluster `:c` (as `GroupSummary` fields) meeting
    every condition of `where`."""
    columns = f"{select_list(GroupColumns)}, evaluated_at"
    return f"SELECT {columns} FROM {latest_rows('group')} g WHERE {' AND '.join(['cluster = :c', *where])}"


_STORED = ("group_id", "topics", "partitions", "offset_lag", "max_offset_lag")
"""The columns of a group the store gives before an evaluation (`FRESH_GROUPS`)."""


def _stored_groups_query(where: Sequence[str]) -> str:
    """The groups of cluster `:c` with committed offsets in the store (as `GroupSummary` fields:
    what the evaluation gives null) meeting every condition of `where`: a list before the first
    evaluation."""
    columns = ", ".join(c if c in _STORED else f"NULL AS {c}" for c in column_names(GroupColumns))
    return f"""
        SELECT * FROM (
            SELECT {columns}, CAST(NULL AS timestamptz) AS evaluated_at, offset_lag_as_of
            FROM ({FRESH_GROUPS}) f
        ) g WHERE {" AND ".join(["true", *where])}"""


def groups(
    conn: Connection,
    cluster: str,
    *,
    search: str | None = None,
    status: Sequence[str] = (),
    lagging: bool = False,
    sort: GroupSort = "status",
    page: Page = FIRST_PAGE,
) -> Listing[GroupSummary]:
    """The evaluated consumer groups of `cluster` (before its first evaluation, those with
    committed offsets in the store), worst status first by default. `search` keeps ids containing
    it, `status` the given statuses, `lagging` groups with offset lag > 0 (as fresh as the store
    holds it: `fresh.GROUP_LAGS`)."""
    where, params = list[str](), dict[str, Any](c=cluster)
    if search:
        where.append("group_id LIKE :search")
        params["search"] = like_pattern(search)
    if status:
        where.append("status = ANY(:status)")
        params["status"] = list(status)
    if lagging:
        where.append(f"group_id IN ({LAGGING_GROUP_IDS})")
    evaluated_at = latest_evaluation(conn, cluster)
    body = _group_lag_query(where) if evaluated_at is not None else _stored_groups_query(where)
    with fleet_read(conn) if lagging else nullcontext():  # lagging: every group's fresh offset lag
        return fetch_page(conn, GroupSummary, body, params, _GROUP_ORDER[sort], page, evaluated_at)


def group(conn: Connection, cluster: str, group_id: str) -> GroupDetail | None:
    """One group as of the newest evaluation. A group no evaluation has yet (a new group, or any
    group before its cluster's first evaluation) as the store holds its offsets: its topics and
    partitions with their offset lag, the evaluation's columns empty. None when neither has it."""
    params = {"c": cluster, "g": group_id}
    found = records(conn, GroupSummary, _group_lag_query(["group_id = :g"]), params)
    lags = partition_lags(conn, cluster, group_id)
    if not found and not lags:
        return None
    members = records(
        conn,
        GroupMember,
        "SELECT member_id, client_id, host, group_instance_id, assignment, updated_at"
        " FROM group_members WHERE cluster = :c AND group_id = :g ORDER BY member_id",
        params,
    )
    if not found:
        return _stored_group(group_id, members, lags)
    topics = records(
        conn,
        GroupTopicLag,
        f"SELECT {select_list(GroupTopicColumns)} FROM {latest_rows('group_topic')} t"
        " WHERE cluster = :c AND group_id = :g"
        " ORDER BY data_loss_occurred DESC NULLS LAST, data_loss_margin_seconds NULLS LAST,"
        " offset_lag DESC NULLS LAST, topic",
        params,
    )
    objectives = group_objectives(conn, cluster, group_id)
    return freshened(GroupDetail(found[0], members, topics, objectives), lags)


def _stored_group(group_id: str, members: list[GroupMember], lags: dict[Key, FreshLag]) -> GroupDetail:
    """A group not evaluated yet, from the offset lag of its partitions the store holds (`lags`),
    summed per topic and for the group by `freshened`; its topics by offset lag, then name."""
    partitions = Counter(topic for topic, _ in lags)
    blank = GroupDetail(
        GroupSummary(group_id=group_id, topics=len(partitions), partitions=len(lags), evaluated_at=None),
        members,
        [GroupTopicLag(group_id=group_id, topic=topic, partitions=n) for topic, n in partitions.items()],
        [],
    )
    detail = freshened(blank, lags)
    return replace(detail, topics=sorted(detail.topics, key=lambda t: (-(t.offset_lag or 0), t.topic)))


def freshened(detail: GroupDetail, lags: dict[Key, FreshLag]) -> GroupDetail:
    """`detail` with the offset lag of `lags` (`fresh.partition_lags`): summed per topic and for
    the group, as of the oldest partition; a topic without fresh lags keeps the evaluation's,
    as of the evaluation."""
    evaluated_at = detail.group.evaluated_at
    by_topic: dict[str, list[FreshLag]] = {}
    for (topic, _), lag in lags.items():
        by_topic.setdefault(topic, []).append(lag)
    topics = [with_fresh_lag(t, by_topic.get(t.topic, []), evaluated_at) for t in detail.topics]
    group = with_fresh_lag(detail.group, lags.values(), evaluated_at)
    return replace(detail, group=group, topics=topics)


def freshened_groups(conn: Connection, cluster: str, listing: Listing[GroupSummary]) -> Listing[GroupSummary]:
    """A page of `groups` (picked and ordered by the evaluation's lag) with the fresh offset lag of
    the groups on it: one query over the page's groups, read each time the page is shown."""
    lags = groups_lags(conn, cluster, [g.group_id for g in listing.items])
    items = [with_fresh_lag(g, lags.get(g.group_id, {}).values(), g.evaluated_at) for g in listing.items]
    return replace(listing, items=items)


def freshened_partitions(
    partitions: Sequence[GroupPartitionLag], lags: dict[Key, FreshLag]
) -> list[GroupPartitionLag]:
    """`partitions` with the committed offset, end offset and offset lag of `lags` where it has
    them (the page's kept partitions, made fresh when it is shown)."""
    out = []
    for p in partitions:
        lag = lags.get((p.topic, p.partition))
        out.append(
            p
            if lag is None
            else replace(
                p,
                committed_offset=lag.committed_offset,
                end_offset=lag.end_offset,
                offset_lag=lag.offset_lag,
                committed_offset_as_of=lag.committed_offset_as_of,
                end_offset_as_of=lag.end_offset_as_of,
                offset_lag_as_of=lag.offset_lag_as_of,
            )
        )
    return out


def group_known(conn: Connection, cluster: str, group_id: str) -> bool:
    """Whether any stored evaluation has the group, raw or rolled up (its history outlives its
    latest row)."""
    found = conn.execute(
        text("SELECT 1 FROM group_lag_history WHERE cluster = :c AND group_id = :g LIMIT 1"),
        {"c": cluster, "g": group_id},
    ).first()
    return found is not None


def group_ids(conn: Connection, cluster: str) -> list[str]:
    """Ids of the groups of the newest evaluation of `cluster`, sorted."""
    rows = conn.execute(
        text("SELECT group_id FROM group_lag WHERE cluster = :c ORDER BY group_id"), {"c": cluster}
    )
    return [str(row.group_id) for row in rows]


def group_partitions(
    conn: Connection,
    cluster: str,
    group_id: str,
    *,
    topic: str | None = None,
    lagging: bool = False,
    page: Page = FIRST_PAGE,
) -> Listing[GroupPartitionLag]:
    """A group's lag per partition by topic and partition, with the owning member; the committed
    offset, end offset and offset lag fresh where the store holds them (`fresh`), else the
    evaluation's (`offset_lag_as_of` says which: then it is `evaluated_at`).

    A group no evaluation has yet (a new group, or any group before its cluster's first
    evaluation) is listed from the offsets the store holds: its partitions with their committed
    offset, end offset and offset lag, the evaluation's columns (lag in seconds, status ...)
    empty until it is evaluated. So the lag of every group is served as soon as the collector
    stored it, while the evaluation starts."""
    params = dict[str, Any](c=cluster, g=group_id, gs=[group_id])
    only_topic = ""
    if topic is not None:
        only_topic = " AND g.topic = :t"
        params["t"] = topic
    evaluated = f"SELECT * FROM {latest_rows('group_partition')} g WHERE g.cluster = :c AND g.group_id = :g"
    # The store's rows alone only for a group not evaluated (PostgreSQL runs the EXISTS once).
    where = [f"g.topic IS NOT NULL OR NOT EXISTS ({evaluated})"]
    if topic is not None:
        where.append("f.topic IS NULL OR f.topic = :t")
    if lagging:
        where.append(lagging_sql("coalesce(f.offset_lag, g.offset_lag)"))
    keys = ("group_id", "topic", "partition", *_FRESH)
    columns = ", ".join(
        f"coalesce(f.{c}, g.{c}) AS {c}" if c in keys else f"g.{c}"
        for c in column_names(GroupPartitionColumns)
    )
    body = f"""
        SELECT {columns}, o.host AS owner, o.client_id,
               f.committed_offset_as_of, f.end_offset_as_of,
               coalesce(f.offset_lag_as_of, g.evaluated_at) AS offset_lag_as_of
        FROM ({evaluated}{only_topic}) g
        FULL JOIN ({FRESH_PARTITIONS}) f ON f.topic = g.topic AND f.partition = g.partition
        LEFT JOIN LATERAL (
            SELECT m.host, m.client_id FROM group_members m
            WHERE m.cluster = :c AND m.group_id = :g
              AND coalesce(g.topic, f.topic) || ':' || coalesce(g.partition, f.partition) = ANY(m.assignment)
            ORDER BY m.member_id LIMIT 1
        ) o ON true
        WHERE {" AND ".join(f"({w})" for w in where)}
    """
    evaluated_at = latest_evaluation(conn, cluster)
    return fetch_page(conn, GroupPartitionLag, body, params, "topic, partition", page, evaluated_at)
