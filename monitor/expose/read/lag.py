"""Read layer: consumer groups, their members, and their lag per topic and per partition, from
`group_lag`, `group_topic_lag` and `group_partition_lag` (the newest evaluation of the cluster).
The lag over time is `monitor.expose.read.history`. See `monitor.expose.read.queries` for the
conventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, text

from monitor.core.vocabulary import CONSUMER_STATUSES
from monitor.expose.read.fields import Described
from monitor.expose.read.queries import (
    FIRST_PAGE,
    Listing,
    Page,
    fetch_page,
    latest_evaluation,
    like_pattern,
    records,
)

WORST_STATUS_FIRST = f"array_position(ARRAY{list(CONSUMER_STATUSES)!r}, status) DESC NULLS LAST"
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

_LAG = """offset_lag, lag_seconds, append_lag_seconds, commit_lag_seconds,
    time_since_last_commit_seconds, consume_rate, produce_rate, time_to_catch_up_seconds,
    time_until_data_loss_seconds, data_loss_margin_seconds, data_loss_occurred, status"""

_FORECAST = "catch_up_low_seconds, catch_up_high_seconds, catching_up"
"""The catch-up forecast's columns beyond time_to_catch_up_seconds (the group views have them)."""


@dataclass(frozen=True, slots=True)
class GroupSummary(Described):
    """A consumer group's lag summed over its partitions, with its state and worst status."""

    __entity__ = "group"

    group_id: str
    group_state: str | None
    members: int | None
    topics: int | None
    partitions: int | None
    offset_lag: int | None
    max_offset_lag: int | None
    lag_seconds: float | None
    max_lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    time_until_data_loss_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_occurred: bool | None
    status: str | None
    lag_growing: bool | None
    partitions_beyond_end: int | None
    evaluated_at: datetime
    catch_up_low_seconds: float | None
    catch_up_high_seconds: float | None
    catching_up: bool | None


_GROUP_FIELDS = tuple(GroupSummary.__dataclass_fields__)


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
class GroupTopicLag(Described):
    """A group's lag on one topic, summed over the topic's partitions."""

    __entity__ = "group_topic"

    topic: str
    partitions: int | None
    offset_lag: int | None
    max_offset_lag: int | None
    lag_seconds: float | None
    max_lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    time_until_data_loss_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_occurred: bool | None
    status: str | None
    catch_up_low_seconds: float | None
    catch_up_high_seconds: float | None
    catching_up: bool | None


@dataclass(frozen=True, slots=True)
class GroupPartitionLag(Described):
    """A group's lag on one partition, and the member it is assigned to."""

    __entity__ = "group_partition"

    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int | None
    offset_lag: int | None
    lag_seconds: float | None
    lag_seconds_method: str | None
    lag_seconds_error: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    time_until_data_loss_seconds: float | None
    time_to_read_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_limit: str | None
    data_loss_occurred: bool | None
    status: str | None
    owner: str | None
    client_id: str | None


@dataclass(frozen=True, slots=True)
class GroupDetail(Described):
    """One group: its summary, its members, and its lag per topic (most urgent first: data lost,
    then the smallest data-loss margin, then the largest lag)."""

    __overrides__ = {"group": "the group's lag summed over its partitions", "topics": "lag per topic"}

    group: GroupSummary
    members: list[GroupMember]
    topics: list[GroupTopicLag]


def _group_lag_query(where: Sequence[str]) -> str:
    """The rows of `group_lag` (as `GroupSummary` fields) meeting every condition of `where`."""
    return f"SELECT {', '.join(_GROUP_FIELDS)} FROM group_lag WHERE {' AND '.join(where)}"


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
    """The evaluated consumer groups of `cluster`, worst status first by default. `search` keeps
    ids containing it, `status` the given statuses, `lagging` groups with offset lag > 0."""
    where, params = ["cluster = :c"], dict[str, Any](c=cluster)
    if search:
        where.append("group_id LIKE :search")
        params["search"] = like_pattern(search)
    if status:
        where.append("status = ANY(:status)")
        params["status"] = list(status)
    if lagging:
        where.append("offset_lag > 0")
    body = _group_lag_query(where)
    evaluated_at = latest_evaluation(conn, cluster)
    return fetch_page(conn, GroupSummary, body, params, _GROUP_ORDER[sort], page, evaluated_at)


def group(conn: Connection, cluster: str, group_id: str) -> GroupDetail | None:
    """One group as of the newest evaluation, or None when that evaluation does not have it."""
    params = {"c": cluster, "g": group_id}
    found = records(conn, GroupSummary, _group_lag_query(["cluster = :c", "group_id = :g"]), params)
    if not found:
        return None
    members = records(
        conn,
        GroupMember,
        "SELECT member_id, client_id, host, group_instance_id, assignment, updated_at"
        " FROM group_members WHERE cluster = :c AND group_id = :g ORDER BY member_id",
        params,
    )
    topics = records(
        conn,
        GroupTopicLag,
        f"SELECT topic, partitions, max_offset_lag, max_lag_seconds, {_LAG}, {_FORECAST} FROM group_topic_lag"
        " WHERE cluster = :c AND group_id = :g"
        " ORDER BY data_loss_occurred DESC NULLS LAST, data_loss_margin_seconds NULLS LAST,"
        " offset_lag DESC NULLS LAST, topic",
        params,
    )
    return GroupDetail(found[0], members, topics)


def group_known(conn: Connection, cluster: str, group_id: str) -> bool:
    """Whether any stored evaluation has the group (its history outlives its latest row)."""
    found = conn.execute(
        text("SELECT 1 FROM derived_group WHERE cluster = :c AND group_id = :g LIMIT 1"),
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
    """A group's lag per partition by topic and partition, with the owning member."""
    where, params = ["g.cluster = :c", "g.group_id = :g"], {"c": cluster, "g": group_id}
    if topic is not None:
        where.append("g.topic = :t")
        params["t"] = topic
    if lagging:
        where.append("g.offset_lag > 0")
    body = f"""
        SELECT g.topic, g.partition, g.committed_offset, g.end_offset, g.lag_seconds_method,
               g.lag_seconds_error, g.data_loss_limit, g.time_to_read_seconds, o.host AS owner, o.client_id,
               {", ".join(f"g.{c.strip()}" for c in _LAG.split(","))}
        FROM group_partition_lag g
        LEFT JOIN LATERAL (
            SELECT m.host, m.client_id FROM group_members m
            WHERE m.cluster = g.cluster AND m.group_id = g.group_id
              AND g.topic || ':' || g.partition = ANY(m.assignment)
            ORDER BY m.member_id LIMIT 1
        ) o ON true
        WHERE {" AND ".join(where)}
    """
    evaluated_at = latest_evaluation(conn, cluster)
    return fetch_page(conn, GroupPartitionLag, body, params, "topic, partition", page, evaluated_at)
