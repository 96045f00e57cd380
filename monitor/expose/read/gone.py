"""What the cluster no longer has, as the pages say it: a consumer group whose committed offsets
are all gone (`latest_group_offsets.gone_at`), a deleted topic (`topics.deleted_at`), brokers
unregistered from the controller (`brokers.unregistered_at`), and the partitions of a group whose
committed offset is beyond the log end in the newest evaluation
(vocabulary.COMMITTED_BEYOND_END)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, text

from monitor.core.vocabulary import RESOLVED_GONE
from monitor.store.evaluation import latest_rows


def group_gone_since(conn: Connection, cluster: str, group_id: str) -> datetime | None:
    """When the cluster was seen to no longer have any committed offset of the group (None while
    it has one, or when the group was never sampled)."""
    since: datetime | None = conn.execute(
        text(
            "SELECT CASE WHEN bool_and(gone_at IS NOT NULL) THEN max(gone_at) END"
            " FROM latest_group_offsets WHERE cluster = :cluster AND group_id = :group_id"
        ),
        {"cluster": cluster, "group_id": group_id},
    ).scalar()
    return since


def topic_deleted_at(conn: Connection, cluster: str, topic: str) -> datetime | None:
    """When the topic was seen deleted (None while it exists)."""
    deleted: datetime | None = conn.execute(
        text("SELECT deleted_at FROM topics WHERE cluster = :cluster AND topic = :topic"),
        {"cluster": cluster, "topic": topic},
    ).scalar()
    return deleted


def unregistered_brokers(conn: Connection, cluster: str) -> dict[int, datetime]:
    """broker id -> when the controller was seen to no longer have it registered."""
    rows = conn.execute(
        text(
            "SELECT broker_id, unregistered_at FROM brokers"
            " WHERE cluster = :cluster AND unregistered_at IS NOT NULL"
        ),
        {"cluster": cluster},
    )
    return {int(r.broker_id): r.unregistered_at for r in rows}


def beyond_end(conn: Connection, cluster: str, group_id: str) -> set[tuple[str, int]]:
    """(topic, partition) of the group whose committed offset is beyond the log end in the
    cluster's newest evaluation."""
    rows = conn.execute(
        text(
            f"SELECT d.topic, d.partition FROM {latest_rows('group_partition')} d"
            " WHERE d.cluster = :cluster AND d.group_id = :group_id AND d.committed_beyond_end"
        ),
        {"cluster": cluster, "group_id": group_id},
    )
    return {(str(r.topic), int(r.partition)) for r in rows}


@dataclass(frozen=True, slots=True)
class GoneAlert:
    """An alert that resolved because the cluster no longer has its entity."""

    rule: str
    cluster: str
    entity_key: str
    summary: str
    resolved_at: datetime


def alerts_resolved_gone(conn: Connection, since: datetime, limit: int) -> list[GoneAlert]:
    """The alerts resolved as gone since `since`, newest first, at most `limit`."""
    rows = conn.execute(
        text(
            "SELECT rule, cluster, entity_key, summary, resolved_at FROM alerts"
            " WHERE state = 'resolved' AND resolved_reason = :gone AND resolved_at >= :since"
            " ORDER BY resolved_at DESC, id DESC LIMIT :limit"
        ),
        {"gone": RESOLVED_GONE, "since": since, "limit": limit},
    )
    return [GoneAlert(r.rule, r.cluster, r.entity_key, r.summary, r.resolved_at) for r in rows]
