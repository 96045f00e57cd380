"""The offset lag of groups as fresh as the store holds it, between two evaluations: read from the
latest tables (each group-partition's newest commit in `latest_commits`, the offsets job's
newest sample in `latest_group_offsets`, each partition's newest end offset in
`latest_partition_offsets` or, newer, `refreshed_end_offsets`, which the end offsets job lists
every second) for the groups asked, or for every group of a cluster summed per
topic and per group (`FRESH_GROUP_TOPICS`, `FRESH_GROUPS`: what the counts of lagging groups
read); `monitor.expose.read.fresh` says what each figure means. Also which groups had a commit
or an end offset moved since a time (`changed_since`), so that a reader keeping the lag of the
whole fleet (the `/metrics` snapshot) re-reads only those.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, text

from monitor.store.versions import UNEVALUATED_CLUSTERS

_FRESH = """
SELECT f.cluster, f.group_id, f.topic, f.partition, f.committed_offset, f.end_offset,
       greatest(f.end_offset - f.committed_offset, 0) AS offset_lag,
       f.committed_offset_as_of, f.end_offset_as_of,
       least(f.committed_offset_as_of, f.end_offset_as_of) AS offset_lag_as_of
FROM (
    SELECT o.cluster, o.group_id, o.topic, o.partition,
           CASE WHEN c.observed_at > o.sampled_at THEN c.committed_offset ELSE o.committed_offset END
               AS committed_offset,
           CASE WHEN m.streaming_since <= greatest(o.sampled_at, c.observed_at)
                THEN greatest(o.sampled_at, c.observed_at, m.read_until)
                ELSE greatest(o.sampled_at, c.observed_at) END AS committed_offset_as_of,
           CASE WHEN r.end_offset_as_of > p.end_offset_as_of THEN r.end_offset ELSE p.end_offset END
               AS end_offset,
           greatest(p.end_offset_as_of, r.end_offset_as_of) AS end_offset_as_of
    FROM (
        SELECT * FROM latest_group_offsets o WHERE {clusters}{only} AND o.gone_at IS NULL OFFSET 0
    ) o
    JOIN LATERAL (
        SELECT p.end_offset, coalesce(p.end_offset_listed_at, p.sampled_at) AS end_offset_as_of
        FROM latest_partition_offsets p
        WHERE p.cluster = o.cluster AND p.topic = o.topic AND p.partition = o.partition{probe}
    ) p ON true
    LEFT JOIN LATERAL (
        SELECT c.committed_offset, c.observed_at FROM latest_commits c
        WHERE c.cluster = o.cluster AND c.group_id = o.group_id AND c.topic = o.topic
          AND c.partition = o.partition{probe}
    ) c ON true
    LEFT JOIN LATERAL (
        SELECT r.end_offset, CASE WHEN r.missed THEN r.answered_at ELSE l.listed_at END AS end_offset_as_of
        FROM refreshed_end_offsets r JOIN end_offset_refreshes l ON l.cluster = r.cluster
        WHERE r.cluster = o.cluster AND r.topic = o.topic AND r.partition = o.partition{probe}
    ) r ON true
    LEFT JOIN commit_stream_marks m ON m.cluster = o.cluster
) f"""


FLEET_READ_WORK_MEM = "64MB"
"""PostgreSQL's `work_mem` for a read of the fresh offset lag of a whole cluster (`fleet_read`):
the hash joins and the sort of its plan held in memory. With the server's default (4 MB) at
100,000 group-partitions, the sort spilled to disk and the planner probed `latest_commits` once
per row; with this, one fleet read took 0.28 s in PostgreSQL instead of 0.66 s
(docs/bench/fresh-lag.md). A read uses up to a few times this much for its duration, and the
fleet reads are few at once (the `/metrics` fresh read one at a time, the counts kept)."""


@contextmanager
def fleet_read(conn: Connection) -> Iterator[None]:
    """Run the statements of the block with `work_mem` at least FLEET_READ_WORK_MEM (in the
    transaction only: `set_config(..., true)`), then as it was. A larger setting is kept. When the
    block raises, the transaction is the caller's to roll back, which undoes the setting."""
    previous, changed = conn.execute(
        text(
            "SELECT current_setting('work_mem'), CASE WHEN pg_size_bytes(current_setting('work_mem'))"
            " < pg_size_bytes(:m) THEN set_config('work_mem', :m, true) IS NOT NULL ELSE false END"
        ),
        {"m": FLEET_READ_WORK_MEM},
    ).one()
    yield
    if changed:
        conn.execute(text("SELECT set_config('work_mem', :m, true)"), {"m": previous})


def _fresh_partitions(only: str, *, probe: bool, clusters: str = "o.cluster = :c") -> str:
    """The fresh offset lag of each partition of the groups on cluster `:c` (or the clusters
    `clusters` keeps: an SQL condition on `o`) that `only` keeps (SQL
    conditions on `o`, the row of `latest_group_offsets`), of which the store holds a committed
    and an end offset (a partition gone from the group is left out). `probe` makes the lookups in
    the partitions' and the commits' tables one primary key probe per partition (LIMIT 1 keeps
    the planner from turning them into a scan of the cluster's rows for a hash join): for a few
    groups. Without it the lookups are plain joins, which the planner makes one pass over the
    cluster's rows of each table: for the whole cluster. OFFSET 0 keeps the group offsets read as
    `only` says (the groups' range of the primary key, the topics' of the topic index, or the
    cluster's rows): let free, the planner read the whole cluster's through the topic index once
    per partition, 2-3 times slower than one pass (docs/bench/fresh-lag.md)."""
    return _FRESH.format(clusters=clusters, only=only, probe=" LIMIT 1" if probe else "")


FRESH_PARTITIONS = _fresh_partitions(" AND o.group_id = ANY(CAST(:gs AS text[]))", probe=True)
"""The fresh offset lag of each partition of the groups `:gs` (an array) on cluster `:c`: one
range of each group in `latest_group_offsets`' primary key and a probe per partition."""

FRESH_PARTITIONS_OF_MANY = _fresh_partitions(" AND o.group_id = ANY(CAST(:gs AS text[]))", probe=False)
"""FRESH_PARTITIONS with its lookups as joins: one pass over the cluster's partitions and commits,
for more than PROBED_GROUPS groups (50 groups of 200 partitions: 51 ms against 87 ms probed)."""

PROBED_GROUPS = 10
"""Up to this many groups, `groups_lags` probes their partitions one by one (FRESH_PARTITIONS)."""

FRESH_PARTITIONS_OF_TOPIC = _fresh_partitions(
    " AND o.group_id = ANY(CAST(:gs AS text[])) AND o.topic = :t", probe=True
)
"""FRESH_PARTITIONS of one topic `:t` only (the groups reading a topic, on its page)."""


def _group_topics(partitions: str) -> str:
    """The offset lag of `partitions` (a `_fresh_partitions`) per group and topic: the partitions,
    their lag summed and the largest, as of the oldest."""
    return f"""
SELECT cluster, group_id, topic, count(*)::int AS partitions, sum(offset_lag)::bigint AS offset_lag,
       max(offset_lag) AS max_offset_lag, min(offset_lag_as_of) AS offset_lag_as_of
FROM ({partitions}) p
GROUP BY cluster, group_id, topic"""


FRESH_GROUP_TOPICS = _group_topics(_fresh_partitions("", probe=False))
"""The fresh offset lag of every group of cluster `:c` on each topic it has committed offsets on:
one pass over the cluster's rows of the latest tables, whatever the number of groups,
never a read per group (docs/bench/fresh-lag.md has its plan)."""

FRESH_GROUP_TOPICS_OF_TOPICS = _group_topics(
    _fresh_partitions(" AND o.topic = ANY(CAST(:ts AS text[]))", probe=True)
)
"""FRESH_GROUP_TOPICS of the topics `:ts` (an array) only: their group-partitions from
`latest_group_offsets`' (cluster, topic, partition) index, and a probe per partition."""

FRESH_PARTITIONS_UNEVALUATED = _fresh_partitions(
    "", probe=False, clusters=f"o.cluster IN ({UNEVALUATED_CLUSTERS})"
)
"""The fresh offset lag of every group-partition of the clusters without an evaluation yet (with
their `cluster`): what the `/metrics` snapshot serves of them while their first evaluation runs;
one pass over those clusters' rows of the latest tables."""

FRESH_GROUP_TOPICS_UNEVALUATED = _group_topics(FRESH_PARTITIONS_UNEVALUATED)
"""FRESH_PARTITIONS_UNEVALUATED per cluster, group and topic."""

FRESH_GROUPS = f"""
SELECT group_id, count(*)::int AS topics, sum(partitions)::int AS partitions,
       sum(offset_lag)::bigint AS offset_lag,
       max(max_offset_lag) AS max_offset_lag, min(offset_lag_as_of) AS offset_lag_as_of
FROM ({FRESH_GROUP_TOPICS}) t
GROUP BY group_id"""
"""FRESH_GROUP_TOPICS summed per group: every group of cluster `:c` with committed offsets in the
store, its topics and partitions, its offset lag summed and the largest partition's."""


@dataclass(frozen=True, slots=True)
class FreshLag:
    """One group-partition's offset lag from the newest offsets stored."""

    committed_offset: int
    end_offset: int
    offset_lag: int
    committed_offset_as_of: datetime
    end_offset_as_of: datetime
    offset_lag_as_of: datetime


Key = tuple[str, int]
"""(topic, partition)"""


def groups_lags(
    conn: Connection, cluster: str, group_ids: Sequence[str], topic: str | None = None
) -> dict[str, dict[Key, FreshLag]]:
    """group id -> `partition_lags` of each of `group_ids` the store holds fresh lags of (on
    `topic` only, when given), in one query: a page of a list of groups, the groups reading a
    topic, or the groups whose commits changed (the `/metrics` snapshot); its cost follows those
    groups' partitions."""
    found: dict[str, dict[Key, FreshLag]] = {}
    if not group_ids:
        return found
    query = FRESH_PARTITIONS if len(group_ids) <= PROBED_GROUPS else FRESH_PARTITIONS_OF_MANY
    params: dict[str, object] = {"c": cluster, "gs": list(group_ids)}
    if topic is not None:
        query, params = FRESH_PARTITIONS_OF_TOPIC, {**params, "t": topic}
    # All rows at once and unpacked by position: the whole fleet's groups every few seconds for
    # the /metrics snapshot (10,000 rows: 60 ms of Python fetched one by one and read by name).
    with fleet_read(conn) if query is FRESH_PARTITIONS_OF_MANY else nullcontext():
        rows = conn.execute(text(query), params).all()
    for _, group_id, topic, partition, committed, end, lag, committed_as_of, end_as_of, lag_as_of in rows:
        partitions = found.get(group_id)
        if partitions is None:
            partitions = found[group_id] = {}
        partitions[(topic, partition)] = FreshLag(committed, end, lag, committed_as_of, end_as_of, lag_as_of)
    return found


COMMITTED_SINCE = """
SELECT DISTINCT c.name AS cluster, o.group_id
FROM clusters c
CROSS JOIN LATERAL (
    SELECT o.group_id FROM commit_observations o
    WHERE o.cluster = c.name AND o.observed_at > :since
    OFFSET 0
) o"""
"""The groups with a commit observed after `:since`, in each cluster: a range of the cluster's
newest rows in `commit_observations`' (cluster, observed_at) index (in the partitions of the days
after `:since` only), so its cost follows the commits since then, not the fleet. OFFSET 0 keeps
the subquery a probe per cluster: pulled up, it became one scan of the whole index on the time
alone, merged with the clusters (docs/bench/fresh-lag.md)."""


COMMITTED_SINCE_LATEST = """
SELECT DISTINCT l.cluster, l.group_id
FROM latest_commits l
JOIN clusters c ON c.name = l.cluster
WHERE l.observed_at > :since"""
"""COMMITTED_SINCE from each group-partition's newest observation (`latest_commits`, which
keeps the newest): one pass over a row per group-partition, for a look-back long enough that
the commits since outnumber them. The first read after a build looks back minutes: at 10,000
group-partitions each committing every 10 s, 455 ms over 194,000 observations against 6 ms."""


ENDS_MOVED_SINCE = """
SELECT DISTINCT r.cluster, o.group_id
FROM refreshed_end_offsets r
JOIN latest_group_offsets o ON o.cluster = r.cluster AND o.topic = r.topic AND o.partition = r.partition
WHERE r.answered_at > :since AND NOT r.missed AND o.gone_at IS NULL"""
"""The groups reading a partition whose end offset the end offsets job found moved after `:since`:
a pass over the refreshed end offsets (a row per partition of the fleet) and a range of
`latest_group_offsets`' (cluster, topic, partition) index per partition that moved."""


def changed_since(conn: Connection, since: datetime, *, long_look_back: bool = False) -> dict[str, list[str]]:
    """cluster -> the groups whose fresh offset lag may have changed after `since`: a commit
    observed since (the commit stream's, or the offsets job's when the stream is off), or an end
    offset of one of their partitions listed moved since (the end offsets job's). The commits
    are found among the observations since `since`, or with `long_look_back` (a look-back of
    minutes) among each group-partition's newest (COMMITTED_SINCE_LATEST): the same groups."""
    changed: dict[str, set[str]] = {}
    for statement in (COMMITTED_SINCE_LATEST if long_look_back else COMMITTED_SINCE, ENDS_MOVED_SINCE):
        for r in conn.execute(text(statement), {"since": since}):
            changed.setdefault(str(r.cluster), set()).add(str(r.group_id))
    return {cluster: sorted(groups) for cluster, groups in changed.items()}
