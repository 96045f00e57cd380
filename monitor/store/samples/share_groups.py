"""Share-groups samples: share_group_states and share_group_offsets, share_group_members and
share_group_support (the tables of `monitor.store.share_groups`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, text

from monitor.core.share_groups import ShareGroupDescription
from monitor.store.samples.staging import append_rows

_STATE_COLUMNS = (
    "cluster",
    "group_id",
    "sampled_at",
    "state",
    "members",
    "assignor",
    "coordinator",
    "run_id",
)
_OFFSET_COLUMNS = (
    "cluster", "sampled_at", "group_id", "topic", "partition", "start_offset", "end_offset", "lag",
    "lag_method", "run_id",
)  # fmt: skip

OffsetRow = tuple[str, str, int, int | None, int | None, int | None, str]
"""(group, topic, partition, start offset, end offset, lag, lag method) of one share partition."""


def write_share_groups(
    conn: Connection,
    cluster: str,
    sampled_at: datetime,
    run_id: int | None,
    available: tuple[bool, str | None],
    groups: Sequence[ShareGroupDescription],
    offsets: Sequence[OffsetRow],
    *,
    idempotent: bool = False,
    listed: Sequence[str] | None = None,
) -> int:
    """One share-groups sample of `cluster`: the support row (with the share groups the listing
    named, `listed`, None when not known), the states and offsets samples and the members
    (replaced). `available` is (whether, reason). Returns the sample rows written; `idempotent` as
    for `write_offsets_batch`. Does not commit."""
    conn.execute(
        text(
            "INSERT INTO share_group_support (cluster, available, reason, sampled_at, listed) "
            "VALUES (:c, :a, :r, :t, :l) ON CONFLICT (cluster) DO UPDATE SET available = excluded.available, "
            "reason = excluded.reason, sampled_at = excluded.sampled_at, listed = excluded.listed "
            "WHERE share_group_support.sampled_at <= excluded.sampled_at"
        ),
        {
            "c": cluster, "a": available[0], "r": available[1], "t": sampled_at,
            "l": None if listed is None else list(listed),
        },
    )  # fmt: skip
    states = [
        (cluster, g.group_id, sampled_at, g.state, len(g.members), g.assignor, g.coordinator, run_id)
        for g in groups
    ]
    rows = [(cluster, sampled_at, *o, run_id) for o in offsets]
    with conn.begin_nested():
        written = append_rows(conn, "share_group_states", _STATE_COLUMNS, states, sampled_at, idempotent)
        written += append_rows(conn, "share_group_offsets", _OFFSET_COLUMNS, rows, sampled_at, idempotent)
    if not idempotent:  # a replay is older than what the members table holds
        _replace_members(conn, cluster, sampled_at, groups)
    return written


def _replace_members(
    conn: Connection, cluster: str, sampled_at: datetime, groups: Sequence[ShareGroupDescription]
) -> None:
    conn.execute(text("DELETE FROM share_group_members WHERE cluster = :c"), {"c": cluster})
    members = [
        {
            "c": cluster, "g": g.group_id, "m": m.member_id, "ci": m.client_id, "h": m.host, "r": m.rack,
            "a": [f"{t}:{p}" for t, p in m.assignment], "t": sampled_at,
        }
        for g in groups
        for m in g.members
    ]  # fmt: skip
    if members:
        conn.execute(
            text(
                "INSERT INTO share_group_members (cluster, group_id, member_id, client_id, host, rack, "
                "assignment, updated_at) VALUES (:c, :g, :m, :ci, :h, :r, :a, :t)"
            ),
            members,
        )
