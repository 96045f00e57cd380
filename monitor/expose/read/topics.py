"""Read layer: topics, their partitions, and the consumer groups reading them.

A topic joins the collected metadata (`topics`, the open `topic_configs` rows) with its newest
evaluation (`topic_state`) and counts its lagging groups by their offset lag on it as fresh as
the store holds it (`monitor.expose.read.fresh.LAGGING_BY_TOPIC`; `offset_lag_as_of` says how
old). A partition joins
`replication_state` (current replicas, ISR, leader, with the evaluated flags) and
`retention_headroom` (size against retention.bytes, time coverage against retention.ms, and the
most urgent lagging group). The groups reading a topic carry their offset lag on it as fresh as
the store holds it (`monitor.expose.read.fresh`). See `monitor.expose.read.queries` for the
conventions.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, text

from monitor.expose.read.derived_records import GroupTopicColumns, PartitionColumns, TopicColumns
from monitor.expose.read.fields import Described
from monitor.expose.read.fresh import LAGGING_BY_TOPIC, LAGGING_OF_TOPICS, with_fresh_lag
from monitor.expose.read.queries import (
    FIRST_PAGE,
    Listing,
    Page,
    fetch_page,
    latest_evaluation,
    like_pattern,
    records,
)
from monitor.expose.read.record_columns import select_list
from monitor.store.evaluation import latest_rows
from monitor.store.fresh_lag import fleet_read, groups_lags

TopicSort = Literal[
    "topic",
    "worst",
    "size_bytes",
    "produce_rate",
    "lagging_groups",
    "min_time_until_data_loss_seconds",
    "min_data_loss_margin_seconds",
]
_TOPIC_ORDER: dict[str, str] = {
    "topic": "topic",
    "worst": "offline_partitions DESC NULLS LAST, under_min_isr_partitions DESC NULLS LAST, "
    "min_data_loss_margin_seconds NULLS LAST, under_replicated_partitions DESC NULLS LAST, "
    "retention_shortfall_seconds DESC NULLS LAST, topic",
    "size_bytes": "size_bytes DESC NULLS LAST, topic",
    "produce_rate": "produce_rate DESC NULLS LAST, topic",
    "lagging_groups": "lagging_groups DESC, topic",
    "min_time_until_data_loss_seconds": "min_time_until_data_loss_seconds NULLS LAST, topic",
    "min_data_loss_margin_seconds": "min_data_loss_margin_seconds NULLS LAST, topic",
}
"""`worst` follows the facts that colour a topic (`monitor.expose.web.health.topic`): offline,
under min ISR, the smallest data-loss margin, under-replicated, retention shortfall."""


@dataclass(frozen=True, slots=True)
class TopicSummary(TopicColumns, Described):
    """A topic: its settings as configured now, and its newest evaluation (null before one)."""

    __entity__ = "topic"
    __overrides__ = {
        "partitions": "partitions of the topic",
        "replication_factor": "replicas per partition",
        "retention_ms": "retention.ms: how long records are kept (null when unlimited)",
        "retention_bytes": "retention.bytes: the size limit per partition (null when unlimited)",
    }

    internal: bool
    partitions: int
    replication_factor: int
    cleanup_policy: str | None
    retention_ms: int | None
    retention_bytes: int | None
    min_insync_replicas: int | None
    remote_storage: bool
    lagging_groups: int
    evaluated_at: datetime | None
    offset_lag_as_of: datetime | None = None


_TOPIC_COLUMNS = select_list(TopicColumns, "s", {"topic": "t"})
"""The topic's name from the metadata (a topic not evaluated yet has one), its numbers from the
newest evaluation."""


@dataclass(frozen=True, slots=True)
class PartitionState(PartitionColumns, Described):
    """A partition: current replicas, ISR and leader with the evaluated replication flags, and
    its retention headroom with the most urgent lagging group."""

    __entity__ = "partition"
    __overrides__ = {
        "replicas": "assigned replica broker ids, the preferred leader first",
        "isr": "in-sync replica broker ids",
        "leader": "leader broker id (null when offline)",
        "data_loss_occurred": "a group reading the partition committed below the log start "
        "offset: messages were deleted before it read them",
        "end_offset_method": "where the newest sample's end offset comes from: listed (by the "
        "leader) or last_known (the leader holds the high watermark back, under min ISR, and the "
        "last end offset listed stands in; consumers cannot read past it)",
        "end_offset_listed_at": "when a last_known end offset was listed (null when listed in the "
        "newest sample)",
    }

    leader: int | None
    replicas: list[int]
    isr: list[int]
    preferred_leader: int | None
    headroom_bytes: int | None
    lagging_groups: int
    min_time_until_data_loss_seconds: float | None
    min_data_loss_margin_seconds: float | None
    data_loss_occurred: bool
    evaluated_at: datetime | None
    end_offset_method: str | None = None
    end_offset_listed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TopicConsumer(GroupTopicColumns, Described):
    """A consumer group reading the topic, with its lag on it and its time until data loss."""

    __entity__ = "group_topic"

    evaluated_at: datetime
    offset_lag_as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class TopicDetail(Described):
    """One topic: its summary, its configuration, one page of its partitions, and every group
    reading it (most urgent first)."""

    __overrides__ = {
        "topic": "the topic's settings and evaluated numbers",
        "partitions": "one page of the topic's partitions, by number",
        "consumers": "the consumer groups reading the topic, the smallest data-loss margin first",
    }

    topic: TopicSummary
    configs: dict[str, str | None]
    partitions: Listing[PartitionState]
    consumers: list[TopicConsumer]


def _number(name: str) -> str:
    """A numeric setting from the open config rows: null when unset or negative (unlimited)."""
    value = f"max(value) FILTER (WHERE name = '{name}')"
    return f"CASE WHEN {value} ~ '^[0-9]+$' THEN ({value})::bigint END"


def _topics_sql(match: str) -> str:
    """Every column of `TopicSummary` for the topics whose name matches `match` (a fixed
    comparison: the page's names, or one name), the aggregations narrowed to them too (the
    lagging groups to the topics `:ts`, the same names as an array)."""
    only = f"AND topic {match}"
    return f"""
    SELECT {_TOPIC_COLUMNS}, t.internal, t.partition_count AS partitions, t.replication_factor,
           cfg.cleanup_policy, cfg.retention_ms, cfg.retention_bytes, cfg.min_insync_replicas,
           coalesce(cfg.remote_storage, false) AS remote_storage,
           coalesce(lg.lagging_groups, 0) AS lagging_groups,
           s.evaluated_at, lg.offset_lag_as_of
    FROM topics t
    LEFT JOIN {latest_rows("topic")} s ON s.cluster = t.cluster AND s.topic = t.topic
    LEFT JOIN (
        SELECT topic, max(value) FILTER (WHERE name = 'cleanup.policy') AS cleanup_policy,
               {_number("retention.ms")} AS retention_ms,
               {_number("retention.bytes")} AS retention_bytes,
               {_number("min.insync.replicas")}::int AS min_insync_replicas,
               bool_or(name = 'remote.storage.enable' AND value = 'true') AS remote_storage
        FROM topic_configs WHERE cluster = :c AND valid_to IS NULL {only} GROUP BY topic
    ) cfg ON cfg.topic = t.topic
    LEFT JOIN ({LAGGING_OF_TOPICS}) lg ON lg.topic = t.topic
    WHERE t.cluster = :c AND t.deleted_at IS NULL AND t.topic {match}
"""


_KEYS = """
    SELECT t.topic, s.size_bytes, s.produce_rate, s.retention_shortfall_seconds,
           s.under_replicated_partitions, s.under_min_isr_partitions, s.offline_partitions,
           s.min_time_until_data_loss_seconds, s.min_data_loss_margin_seconds{lagging}
    FROM topics t
    LEFT JOIN topic_state s ON s.cluster = t.cluster AND s.topic = t.topic{join}
    WHERE t.cluster = :c AND t.deleted_at IS NULL
"""
"""The columns that filter and sort topics: a page is chosen from these alone, and only its
topics get the configuration and lagging-group aggregations."""


@dataclass(frozen=True, slots=True)
class _Key:
    """A row of `_KEYS`: what chooses a page of topics."""

    topic: str
    size_bytes: int | None
    produce_rate: float | None
    retention_shortfall_seconds: float | None
    under_replicated_partitions: int | None
    under_min_isr_partitions: int | None
    offline_partitions: int | None
    min_time_until_data_loss_seconds: float | None
    min_data_loss_margin_seconds: float | None
    lagging_groups: int = 0


_PROBLEMS = """(under_replicated_partitions > 0 OR offline_partitions > 0
    OR under_min_isr_partitions > 0 OR retention_shortfall_seconds > 0
    OR min_data_loss_margin_seconds IS NOT NULL)"""


def topics(
    conn: Connection,
    cluster: str,
    *,
    search: str | None = None,
    problems: bool = False,
    sort: TopicSort = "topic",
    page: Page = FIRST_PAGE,
) -> Listing[TopicSummary]:
    """The topics of `cluster` (deleted ones excluded). `search` keeps names containing it;
    `problems` keeps topics under-replicated, offline, under min ISR, short of their retention
    or with a group at risk of data loss (a data-loss margin).

    Two steps, so that a page costs the same at 100 topics and at 10,000: the page's names are
    chosen from the sort and filter columns, then only those topics are read in full."""
    by_lag = sort == "lagging_groups"
    body = _KEYS.format(
        lagging=", coalesce(lg.lagging_groups, 0) AS lagging_groups" if by_lag else "",
        join=f" LEFT JOIN ({LAGGING_BY_TOPIC}) lg ON lg.topic = t.topic" if by_lag else "",
    )
    params: dict[str, Any] = {"c": cluster}
    if search:
        body += " AND t.topic LIKE :search"
        params["search"] = like_pattern(search)
    if problems:
        body = f"SELECT * FROM ({body}) p WHERE {_PROBLEMS}"
    with fleet_read(conn) if by_lag else nullcontext():  # by lag: every group's fresh offset lag
        keys = fetch_page(conn, _Key, body, params, _TOPIC_ORDER[sort], page, None)
    if not keys.items:
        rows: list[TopicSummary] = []
    else:
        names = [k.topic for k in keys.items]
        found = records(
            conn, TopicSummary, _topics_sql("= ANY(:names)"), {"c": cluster, "names": names, "ts": names}
        )
        by_name = {t.topic: t for t in found}
        rows = [by_name[n] for n in names if n in by_name]
    return Listing(
        rows, keys.total, page.limit, page.offset, latest_evaluation(conn, cluster), keys.next_offset
    )


def freshened_topics(conn: Connection, cluster: str, listing: Listing[TopicSummary]) -> Listing[TopicSummary]:
    """A page of `topics` (kept between evaluations) with its topics' lagging groups counted again
    from the offset lag as fresh as the store holds it: one read, each time the page is shown."""
    if not listing.items:
        return listing
    rows = conn.execute(text(LAGGING_OF_TOPICS), {"c": cluster, "ts": [t.topic for t in listing.items]})
    counts = {str(r.topic): (int(r.lagging_groups), r.offset_lag_as_of) for r in rows}
    items = []
    for t in listing.items:
        lagging, as_of = counts.get(t.topic, (0, None))
        items.append(replace(t, lagging_groups=lagging, offset_lag_as_of=as_of))
    return replace(listing, items=items)


def topic(conn: Connection, cluster: str, name: str, *, page: Page = FIRST_PAGE) -> TopicDetail | None:
    """One topic with one page of its partitions (by number) and the groups reading it; None
    when the cluster has no such topic (or it was deleted)."""
    found = summary(conn, cluster, name)
    if found is None:
        return None
    return TopicDetail(
        found,
        configs(conn, cluster, name),
        topic_partitions(conn, cluster, name, page),
        consumers(conn, cluster, name),
    )


def summary(conn: Connection, cluster: str, name: str) -> TopicSummary | None:
    """One topic's settings and evaluated numbers; None when the cluster has no such topic (or
    it was deleted)."""
    found = records(conn, TopicSummary, _topics_sql("= :t"), {"c": cluster, "t": name, "ts": [name]})
    return found[0] if found else None


def configs(conn: Connection, cluster: str, name: str) -> dict[str, str | None]:
    """One topic's configuration as collected now, by name (sensitive values null)."""
    return {
        str(row.name): None if row.sensitive else row.value
        for row in conn.execute(
            text(
                "SELECT name, value, sensitive FROM topic_configs"
                " WHERE cluster = :c AND topic = :t AND valid_to IS NULL ORDER BY name"
            ),
            {"c": cluster, "t": name},
        )
    }


_PARTITION_COLUMNS = select_list(PartitionColumns, "d", dict.fromkeys(("topic", "partition"), "r"))
"""The partition's key from the metadata (a partition not evaluated yet has one), its numbers from
the newest evaluation."""


def topic_partitions(
    conn: Connection, cluster: str, name: str, page: Page = FIRST_PAGE
) -> Listing[PartitionState]:
    """The partitions of one topic by number."""
    body = f"""
        SELECT {_PARTITION_COLUMNS}, r.leader, r.replicas, r.isr, r.preferred_leader, h.headroom_bytes,
               coalesce(h.lagging_groups, 0)::int AS lagging_groups,
               h.min_time_until_data_loss_seconds, h.min_data_loss_margin_seconds,
               coalesce(h.data_loss_occurred, false) AS data_loss_occurred,
               coalesce(h.evaluated_at, r.evaluated_at) AS evaluated_at,
               o.end_offset_method, o.end_offset_listed_at
        FROM replication_state r
        LEFT JOIN retention_headroom h
            ON h.cluster = r.cluster AND h.topic = r.topic AND h.partition = r.partition
        LEFT JOIN {latest_rows("partition")} d
            ON d.cluster = r.cluster AND d.topic = r.topic AND d.partition = r.partition
        LEFT JOIN latest_partition_offsets o
            ON o.cluster = r.cluster AND o.topic = r.topic AND o.partition = r.partition
        WHERE r.cluster = :c AND r.topic = :t
    """
    params = {"c": cluster, "t": name}
    return fetch_page(conn, PartitionState, body, params, "partition", page, latest_evaluation(conn, cluster))


def consumers(conn: Connection, cluster: str, name: str, *, fresh: bool = True) -> list[TopicConsumer]:
    """The groups with committed offsets on topic `name`: data lost first, then the smallest
    data-loss margin, then the largest lag (the evaluation's), each with its offset lag on the
    topic as fresh as the store holds it (as the lists of groups show it), unless not `fresh`
    (the evaluation's, for a caller that reads only which groups they are)."""
    found = records(
        conn,
        TopicConsumer,
        f"""
        SELECT {select_list(GroupTopicColumns)}, evaluated_at
        FROM {latest_rows("group_topic")} t WHERE cluster = :c AND topic = :t
        ORDER BY data_loss_occurred DESC NULLS LAST, data_loss_margin_seconds NULLS LAST,
                 offset_lag DESC NULLS LAST, group_id
        """,
        {"c": cluster, "t": name},
    )
    if not fresh:
        return found
    lags = groups_lags(conn, cluster, [c.group_id for c in found], topic=name)
    return [with_fresh_lag(c, lags.get(c.group_id, {}).values(), c.evaluated_at) for c in found]


def topic_names(conn: Connection, cluster: str) -> list[str]:
    """Names of the topics of `cluster` (deleted ones excluded), sorted."""
    rows = conn.execute(
        text("SELECT topic FROM topics WHERE cluster = :c AND deleted_at IS NULL ORDER BY topic"),
        {"c": cluster},
    )
    return [str(row.topic) for row in rows]


def end_offsets(conn: Connection, cluster: str, name: str) -> list[int] | None:
    """The log end offset of each partition of a topic, indexed by partition, from the newest
    evaluation (0 where it has none); None for an unknown topic."""
    counted = conn.execute(
        text("SELECT partition_count FROM topics WHERE cluster = :c AND topic = :t AND deleted_at IS NULL"),
        {"c": cluster, "t": name},
    ).scalar()
    if counted is None:
        return None
    rows: dict[int, Any] = {
        int(row.partition): row.end_offset
        for row in conn.execute(
            text(
                f"SELECT d.partition, d.end_offset FROM {latest_rows('partition')} d"
                " WHERE d.cluster = :c AND d.topic = :t"
            ),
            {"c": cluster, "t": name},
        )
    }
    size = max([int(counted), *(p + 1 for p in rows)])
    return [int(rows.get(p) or 0) for p in range(size)]
