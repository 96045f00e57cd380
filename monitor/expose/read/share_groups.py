"""Read layer: the share groups (KIP-932) of a cluster, from the views `share_group_state` and
`share_group_lag` (each cluster's newest share-groups sample) and the `share_group_support` row
that says whether the cluster has share groups at all ("not available", with the reason, on
brokers before Kafka 4.1 or with the feature off)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import Connection, text

from monitor.core.vocabulary import most_severe_first_sql
from monitor.expose.read.fields import Described
from monitor.expose.read.queries import Page, like_pattern, next_offset, records

ENTITIES: Final = ("share_group", "share_group_topic")
"""The evaluation's entities of share groups: the rules of `alert_rules/share.yaml` are on them."""

_LAG_METHOD = (
    "how lag is known: broker (reported by the broker, Kafka 4.2+, KIP-1226), end_minus_start "
    "(end offset - start offset, an upper bound on older brokers), none (no start offset yet)"
)
_SUMMARY = {
    "group_id": "share group",
    "state": "Empty, Stable, Dead or Unknown",
    "members": "members of the share group",
    "assignor": "the server-side assignor (null when unknown)",
    "coordinator": "broker coordinating the group",
    "sampled_at": "time of the share-groups sample these values come from",
    "partitions": "share partitions the group has state for",
    "lag": "records waiting: summed over the group's share partitions (null when none is known)",
    "max_lag": "largest share-partition lag",
    "lag_method": _LAG_METHOD,
}


@dataclass(frozen=True, slots=True)
class ShareGroupSummary(Described):
    """One share group at its cluster's newest share-groups sample."""

    __overrides__ = _SUMMARY

    group_id: str
    state: str
    members: int
    assignor: str | None
    coordinator: int | None
    sampled_at: datetime
    partitions: int
    lag: int | None
    max_lag: int | None
    lag_method: str


@dataclass(frozen=True, slots=True)
class SharePartitionLag(Described):
    """One share partition of a group."""

    __overrides__ = {
        "topic": "topic",
        "partition": "partition",
        "start_offset": "share-partition start offset (SPSO): the first record not yet finished; "
        "null before the group's first fetch there",
        "end_offset": "log end offset (null when it could not be read)",
        "lag": "records from the start offset to the log end not yet finished (null when unknown)",
        "lag_method": _LAG_METHOD,
    }

    topic: str
    partition: int
    start_offset: int | None
    end_offset: int | None
    lag: int | None
    lag_method: str


@dataclass(frozen=True, slots=True)
class ShareMemberState(Described):
    """A member of a share group and the partitions it is assigned."""

    __overrides__ = {
        "member_id": "member id",
        "client_id": "client id",
        "host": "client host",
        "rack": "client rack (null when unset)",
        "assignment": 'partitions assigned now, as "topic:partition"',
    }

    member_id: str
    client_id: str
    host: str
    rack: str | None
    assignment: list[str]


@dataclass(frozen=True, slots=True)
class ShareGroupDetail(ShareGroupSummary):
    """One share group: its summary, members and share partitions."""

    __overrides__ = {
        **_SUMMARY,
        "member_list": "its members and their assignments",
        "share_partitions": "its share partitions with start offset, end offset and lag",
    }

    member_list: list[ShareMemberState]
    share_partitions: list[SharePartitionLag]


@dataclass(frozen=True, slots=True)
class ShareGroupList(Described):
    """The share groups of a cluster (a page of them), or why it has none to give."""

    __overrides__ = {
        "available": "the cluster has share groups to give (Kafka 4.1+ with the feature on); "
        "null before the first share-groups sample",
        "reason": 'why not, when not ("not available: ...")',
        "sampled_at": "time of the newest share-groups sample",
        "items": "the share groups, most records waiting first",
        "total": "share groups matching in all",
        "limit": "at most this many items",
        "offset": "items skipped",
        "next_offset": "offset of the next page (null on the last)",
    }

    available: bool | None
    reason: str | None
    sampled_at: datetime | None
    items: list[ShareGroupSummary]
    total: int
    limit: int | None
    offset: int
    next_offset: int | None = None


_COLUMNS = "group_id, state, members, assignor, coordinator, sampled_at, partitions, lag, max_lag, lag_method"


def share_groups(conn: Connection, cluster: str, page: Page, search: str | None = None) -> ShareGroupList:
    """A page of `cluster`'s share groups, most records waiting first, and whether it has any."""
    support = conn.execute(
        text("SELECT available, reason, sampled_at FROM share_group_support WHERE cluster = :c"),
        {"c": cluster},
    ).first()
    where, params = "cluster = :c", {"c": cluster, "search": like_pattern(search or "")}
    if search:
        where += " AND group_id LIKE :search"
    total = int(
        conn.execute(text(f"SELECT count(*) FROM share_group_state WHERE {where}"), params).scalar() or 0
    )
    limit = "" if page.limit is None else f"LIMIT {int(page.limit)}"
    items = records(
        conn,
        ShareGroupSummary,
        f"SELECT {_COLUMNS} FROM share_group_state WHERE {where} "
        f"ORDER BY lag DESC NULLS LAST, group_id {limit} OFFSET {int(page.offset)}",
        params,
    )
    return ShareGroupList(
        available=None if support is None else bool(support.available),
        reason=None if support is None else support.reason,
        sampled_at=None if support is None else support.sampled_at,
        items=items,
        total=total,
        limit=page.limit,
        offset=page.offset,
        next_offset=next_offset(page, len(items), total),
    )


def share_group(conn: Connection, cluster: str, group_id: str) -> ShareGroupDetail | None:
    """One share group at the newest sample, with its members and share partitions (None when
    the newest sample does not have it)."""
    params = {"c": cluster, "g": group_id}
    found = records(
        conn,
        ShareGroupSummary,
        f"SELECT {_COLUMNS} FROM share_group_state WHERE cluster = :c AND group_id = :g",
        params,
    )
    if not found:
        return None
    members = records(
        conn,
        ShareMemberState,
        "SELECT member_id, client_id, host, rack, assignment FROM share_group_members "
        "WHERE cluster = :c AND group_id = :g ORDER BY member_id LIMIT 1000",
        params,
    )
    partitions = records(
        conn,
        SharePartitionLag,
        "SELECT topic, partition, start_offset, end_offset, lag, lag_method FROM share_group_lag "
        "WHERE cluster = :c AND group_id = :g ORDER BY topic, partition LIMIT 1000",
        params,
    )
    summary = found[0]
    return ShareGroupDetail(
        **{name: getattr(summary, name) for name in ShareGroupSummary.__dataclass_fields__},
        member_list=members,
        share_partitions=partitions,
    )


def worst_open(conn: Connection, cluster: str, groups: Sequence[str]) -> dict[str, str]:
    """The severity of the most severe open finding (pending or firing) of a share-group rule on
    each of `groups` that has one: the colour of its row, as open findings colour every page."""
    if not groups:
        return {}
    rows = conn.execute(
        text(
            "SELECT DISTINCT ON (labels->>'group_id') labels->>'group_id' AS group_id, severity "
            "FROM findings WHERE cluster = :c AND state <> 'resolved' AND entity = ANY(:e) "
            "AND labels->>'group_id' = ANY(:g) "
            f"ORDER BY labels->>'group_id', {most_severe_first_sql('severity')}"
        ),
        {"c": cluster, "e": list(ENTITIES), "g": list(groups)},
    )
    return {str(r.group_id): str(r.severity) for r in rows}
