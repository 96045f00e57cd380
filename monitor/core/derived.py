"""The derived columns of each entity: the contract between the transforms, the rules, the
`derived_*` tables and the UI. Names follow DOMAIN.md.

Every entity table also has `evaluated_at` (timestamp) and `cluster` (string). A rule's condition
may use exactly the columns listed for its entity (plus those two).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from monitor.core import objective_columns


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # Spark SQL type name: string, int, bigint, double, boolean, timestamp
    meaning: str


def _cols(*spec: tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(n, t, m) for n, t, m in spec)


_LAG = (
    ("offset_lag", "bigint", "max(end - committed, 0), summed over partitions for roll-ups"),
    (
        "lag_seconds",
        "double",
        "age of the oldest unconsumed message: now - append_time(committed); 0 when caught up",
    ),
    (
        "append_lag_seconds",
        "double",
        "append_time(end - 1) - append_time(committed - 1): grows while producers produce, even if every consumer died",
    ),
    ("commit_lag_seconds", "double", "commit time - append_time(committed - 1) at the last observed commit"),
    (
        "time_since_last_commit_seconds",
        "double",
        "now - the last time the committed offset was seen to change",
    ),
    ("consume_rate", "double", "messages/s the group consumed over the evaluation window"),
    ("produce_rate", "double", "messages/s appended to the partition(s) over the evaluation window"),
    (
        "time_to_catch_up_seconds",
        "double",
        "offset_lag / (consume_rate - produce_rate) when the group gains on the producers, else null",
    ),
    (
        "catch_up_low_seconds",
        "double",
        "the catch-up forecast's optimistic end: offset_lag / (consume_rate - produce_rate + the "
        "spread), the spread being 2 standard errors of the lag's trend over the evaluation window; "
        "0 when caught up; null when not catching up. Roll-ups: the largest",
    ),
    (
        "catch_up_high_seconds",
        "double",
        "the catch-up forecast's pessimistic end: offset_lag / (consume_rate - produce_rate - the "
        "spread); 0 when caught up; null when the spread does not rule out not catching up. "
        "Roll-ups: the largest",
    ),
    (
        "catching_up",
        "boolean",
        "lagging and consume_rate > produce_rate (false: not catching up at the current rates); "
        "null when caught up or a rate is unknown. Roll-ups: every lagging partition catching up",
    ),
    (
        "time_until_data_loss_seconds",
        "double",
        "time until the oldest unconsumed message is deleted by retention (the earlier of the time and size limits), whether or not the group reads it first; null when not lagging or no limit applies",
    ),
    (
        "data_loss_margin_seconds",
        "double",
        "the data-loss risk: time_until_data_loss_seconds minus the time the group needs to read its "
        "backlog (offset_lag / consume_rate); time_until_data_loss_seconds itself when it makes no "
        "progress; null when it is not at risk (caught up, or keeping up and reading its backlog before "
        "the oldest unread message is deleted, or no retention limit) or no consume rate is known yet; "
        "negative: retention deletes messages before the group reads them. Roll-ups: the smallest",
    ),
    (
        "data_loss_occurred",
        "boolean",
        "committed < log start offset: messages were deleted before the group read them",
    ),
)

_SAMPLED = (
    "sampled",
    "boolean",
    "the newest offsets run sampled it (every partition of a roll-up): false when a partial run "
    "could not, and its values are carried from an older sample; rules neither match nor resolve it",
)

GROUP_PARTITION = _cols(
    ("group_id", "string", "consumer group"),
    ("topic", "string", "topic"),
    ("partition", "int", "partition"),
    ("committed_offset", "bigint", "the next offset the group will read"),
    ("end_offset", "bigint", "log end offset"),
    *_LAG,
    ("lag_seconds_method", "string", "exact | interpolated | none: how lag_seconds was measured"),
    ("lag_seconds_error", "double", "bound of the interpolation error in seconds (null when exact)"),
    (
        "time_to_read_seconds",
        "double",
        "offset_lag / consume_rate: time the group needs to read its backlog at the rate it consumed "
        "over the evaluation window; 0 when caught up; null when it makes no progress or has no rate yet",
    ),
    (
        "data_loss_limit",
        "string",
        "time | size: which retention limit deletes the oldest unconsumed message first",
    ),
    (
        "status",
        "string",
        "sliding-window status: OK, WARN, ERR, STOP, STALL, REWIND (Burrow's rules, without false "
        "STOPs; WARN: falling behind, the lag rising over the window beyond its noise)",
    ),
    (
        "group_state",
        "string",
        "Stable, PreparingRebalance, CompletingRebalance, Empty, Dead, Unknown; KIP-848 groups also "
        "Assigning, Reconciling",
    ),
    ("members", "int", "members of the group"),
    _SAMPLED,
    (
        "committed_beyond_end",
        "boolean",
        "committed offset above the log end offset (the newest known): offset_lag reads 0 but the group "
        "is not caught up (vocabulary.COMMITTED_BEYOND_END)",
    ),
)

_BEYOND_END = (
    "partitions_beyond_end",
    "int",
    "partitions whose committed offset is above the log end offset (committed_beyond_end)",
)

ADVICE_HORIZON = timedelta(minutes=30)
"""The consumer advice reads a backlog that no retention deletion threatens within this long."""

_ADVICE = (
    (
        "consumers_needed",
        "int",
        "consumer advice: the consumers the group needs to read its backlog, and what arrives meanwhile, "
        f"before retention deletes unread messages (or within {ADVICE_HORIZON.seconds // 60} min when no deletion is ahead), at the "
        "rate one of its consumers reads over the window (consume_rate / its members, at most one per "
        "partition); at most its partitions; null when not lagging, without a consume rate or without "
        "members. On a group-topic: its group's",
    ),
    (
        "advice_limited_by",
        "string",
        "partitions: even spread evenly, the group needs more consumers than it has partitions; "
        "hot_partition: one partition alone needs more than one consumer reads; null otherwise",
    ),
    ("hot_topic", "string", "the topic of the hot partition (advice_limited_by = hot_partition), else null"),
    ("hot_partition", "int", "the hot partition (advice_limited_by = hot_partition), else null"),
)

GROUP_TOPIC = _cols(
    ("group_id", "string", "consumer group"),
    ("topic", "string", "topic"),
    ("partitions", "int", "partitions the group has committed on"),
    *_LAG,
    ("max_offset_lag", "bigint", "largest partition offset lag"),
    ("max_lag_seconds", "double", "largest partition lag in seconds"),
    ("status", "string", "worst partition status"),
    ("group_state", "string", "state of the group"),
    ("members", "int", "members of the group"),
    _SAMPLED,
    _BEYOND_END,
    *_ADVICE,
)

GROUP = _cols(
    ("group_id", "string", "consumer group"),
    ("topics", "int", "topics the group has committed on"),
    ("partitions", "int", "partitions the group has committed on"),
    *_LAG,
    ("max_offset_lag", "bigint", "largest partition offset lag"),
    ("max_lag_seconds", "double", "largest partition lag in seconds"),
    ("status", "string", "worst partition status: ERR covers STOP, STALL and REWIND"),
    ("group_state", "string", "state of the group"),
    ("members", "int", "members of the group"),
    ("lag_growing", "boolean", "offset_lag is higher than at the start of the evaluation window"),
    _SAMPLED,
    _BEYOND_END,
    *_ADVICE,
)

PARTITION = _cols(
    ("topic", "string", "topic"),
    ("partition", "int", "partition"),
    ("start_offset", "bigint", "log start offset"),
    ("end_offset", "bigint", "log end offset"),
    ("produce_rate", "double", "messages/s appended over the evaluation window"),
    (
        "produce_bytes_rate",
        "double",
        "bytes/s the partition grew over the evaluation window (leader replica size)",
    ),
    ("size_bytes", "bigint", "size of the leader replica"),
    ("retention_bytes", "bigint", "retention.bytes (null when unlimited)"),
    ("retention_ms", "bigint", "retention.ms (null when unlimited)"),
    ("size_ratio", "double", "size_bytes / retention_bytes (null when unlimited)"),
    (
        "time_coverage_seconds",
        "double",
        "now - timestamp of the oldest retained record: history actually on disk",
    ),
    (
        "retention_shortfall_seconds",
        "double",
        "retention.ms/1000 - time_coverage_seconds when the size limit deletes first, else 0",
    ),
    ("leader", "int", "leader broker (null when offline)"),
    ("replication_factor", "int", "assigned replicas"),
    ("isr", "int", "in-sync replicas"),
    ("min_insync_replicas", "int", "min.insync.replicas of the topic"),
    ("replicas_lost", "int", "replication_factor - isr"),
    ("under_replicated", "boolean", "isr < replication_factor"),
    ("under_min_isr", "boolean", "isr < min.insync.replicas: acks=all producers fail"),
    ("offline", "boolean", "no leader"),
    ("non_preferred_leader", "boolean", "leader is not the first assigned replica"),
    (
        "replicas_sharing_rack",
        "int",
        "replicas beyond the first in a rack that already holds one (0 when racks are unknown)",
    ),
)

TOPIC = _cols(
    ("topic", "string", "topic"),
    ("partitions", "int", "partitions"),
    ("produce_rate", "double", "messages/s appended to the topic"),
    ("produce_bytes_rate", "double", "bytes/s the topic grew"),
    ("size_bytes", "bigint", "sum of leader replica sizes"),
    ("max_size_ratio", "double", "largest partition size / retention.bytes"),
    ("min_time_coverage_seconds", "double", "smallest partition time coverage"),
    ("retention_ms", "bigint", "retention.ms"),
    ("retention_bytes", "bigint", "retention.bytes"),
    ("retention_shortfall_seconds", "double", "largest partition retention shortfall"),
    ("max_replicas_lost", "int", "largest replicas_lost of a partition"),
    ("under_replicated_partitions", "int", "partitions with isr < replication factor"),
    ("under_min_isr_partitions", "int", "partitions under min.insync.replicas"),
    ("offline_partitions", "int", "partitions with no leader"),
    (
        "min_time_until_data_loss_seconds",
        "double",
        "soonest deletion of an unread message of any lagging group on the topic",
    ),
    ("min_data_loss_margin_seconds", "double", "smallest data_loss_margin_seconds of a group on the topic"),
)

BROKER = _cols(
    ("broker_id", "int", "broker"),
    ("rack", "string", "rack (null when unset)"),
    ("up", "boolean", "in the cluster metadata"),
    (
        "down",
        "boolean",
        "was in the cluster and is gone from the metadata, still registered with the controller",
    ),
    ("leaders", "int", "partitions this broker leads"),
    ("fair_share_leaders", "double", "partitions / live brokers"),
    ("leader_imbalance", "double", "leaders / fair share (1.0 = balanced)"),
    ("non_preferred_leaders", "int", "partitions led here whose preferred leader is another broker"),
    ("replicas", "int", "replicas hosted"),
    ("disk_total_bytes", "bigint", "sum over log dirs of total bytes"),
    ("disk_usable_bytes", "bigint", "sum over log dirs of usable bytes"),
    ("disk_used_ratio", "double", "1 - usable / total"),
    (
        "probe_successes",
        "int",
        "end-to-end probe messages through this broker that made the round trip in the window",
    ),
    ("probe_failures", "int", "end-to-end probe messages through this broker that failed in the window"),
    (
        "probe_failing",
        "boolean",
        "the newest end-to-end probe round failed on this broker (it does not lead its probe "
        "partition, or producing, consuming or committing failed); null when the probe is off",
    ),
    ("probe_produce_latency_seconds", "double", "newest probe round: time until acks=all acknowledged"),
    (
        "probe_end_to_end_latency_seconds",
        "double",
        "newest probe round: time from producing the message to consuming it back",
    ),
    ("probe_commit_latency_seconds", "double", "newest probe round: time the offset commit took"),
    (
        "unregistered",
        "boolean",
        "unregistered from the controller (decommissioned): gone from the cluster, neither up nor down",
    ),
)

CLUSTER = _cols(
    ("brokers", "int", "brokers known, not unregistered"),
    ("brokers_down", "int", "brokers known but gone from the metadata, still registered"),
    ("partitions", "int", "partitions"),
    ("offline_partitions", "int", "partitions with no leader"),
    ("under_replicated_partitions", "int", "partitions with isr < replication factor"),
    ("under_min_isr_partitions", "int", "partitions under min.insync.replicas"),
    ("max_leader_imbalance", "double", "largest broker leader_imbalance"),
    ("collection_age_seconds", "double", "seconds since the last successful offsets collection"),
    ("unreachable", "boolean", "the last collection runs failed to reach the cluster"),
)

_SHARE_LAG = (
    (
        "lag",
        "bigint",
        "records from the share-partition start offset (SPSO) to the log end not yet acknowledged, "
        "summed over partitions: the broker's count where it reports one (Kafka 4.2+), else end - SPSO, "
        "an upper bound (lag_method)",
    ),
    ("max_lag", "bigint", "largest share-partition lag"),
    (
        "lag_method",
        "string",
        "broker | end_minus_start | none: how the lag is known (end_minus_start when any partition's is)",
    ),
    ("lag_growing", "boolean", "lag is higher than at the start of the evaluation window"),
    (
        "produce_rate",
        "double",
        "records/s appended to the share partitions over the evaluation window (records arriving)",
    ),
    (
        "consume_rate",
        "double",
        "records/s the share-partition start offsets advanced over the evaluation window (records finished)",
    ),
    (
        "backlog_seconds",
        "double",
        "lag / produce_rate: seconds of production the group has not finished (an estimate of the oldest "
        "waiting record's age while producers are steady; per topic, the largest for a group); null "
        "when nothing arrives",
    ),
    (
        "stalled_seconds",
        "double",
        "how long a share-partition start offset has not moved while records arrived after it and wait "
        "(lag > 0); 0 when none is; the longest partition, counted within the evaluation window",
    ),
    ("stalled_partitions", "int", "share partitions whose start offset stands still while records arrive"),
    ("partitions", "int", "share partitions of the group (with a start offset or not)"),
    ("group_state", "string", "the share group's state: Empty, Stable, Dead, Unknown"),
    ("members", "int", "members of the share group"),
    (
        "sampled",
        "boolean",
        "the newest share-groups run sampled it: false when it did not, and its values are carried from "
        "an older sample; rules neither match nor resolve it",
    ),
)

SHARE_GROUP_TOPIC = _cols(
    ("group_id", "string", "share group (KIP-932)"),
    ("topic", "string", "topic"),
    *_SHARE_LAG,
)

SHARE_GROUP = _cols(
    ("group_id", "string", "share group (KIP-932)"),
    ("topics", "int", "topics of its share partitions"),
    *_SHARE_LAG,
)

LAG_OBJECTIVE = _cols(*objective_columns.COLUMNS, _SAMPLED)

ENTITIES: dict[str, tuple[Column, ...]] = {
    "group_partition": GROUP_PARTITION,
    "group_topic": GROUP_TOPIC,
    "group": GROUP,
    "partition": PARTITION,
    "topic": TOPIC,
    "share_group_topic": SHARE_GROUP_TOPIC,
    "share_group": SHARE_GROUP,
    "lag_objective": LAG_OBJECTIVE,
    "broker": BROKER,
    "cluster": CLUSTER,
}
"""Entity name -> its derived columns (besides `evaluated_at` and `cluster`)."""

KEYS: dict[str, tuple[str, ...]] = {
    "group_partition": ("group_id", "topic", "partition"),
    "group_topic": ("group_id", "topic"),
    "group": ("group_id",),
    "partition": ("topic", "partition"),
    "topic": ("topic",),
    "share_group_topic": ("group_id", "topic"),
    "share_group": ("group_id",),
    "lag_objective": ("objective", "group_id"),
    "broker": ("broker_id",),
    "cluster": (),
}
"""Entity name -> the columns (besides `cluster`) that identify one entity."""

SOURCES: dict[str, tuple[str, ...]] = {
    "group_partition": ("offsets",),
    "group_topic": ("offsets",),
    "group": ("offsets",),
    "partition": ("metadata", "offsets", "log_dirs"),
    "topic": ("metadata", "offsets", "log_dirs"),
    "share_group_topic": ("share_groups",),
    "share_group": ("share_groups",),
    "lag_objective": ("offsets",),
    "broker": ("metadata", "log_dirs", "probe"),
    "cluster": (),
}
"""Entity name -> the collection jobs (`collection_runs.job`) whose samples its rows are derived
from. A rule's match is as new as the newest of those samples: a finding's `for` is measured from
there (store.findings). The cluster's own columns say how long collection has been failing or
stale, which only the evaluation time tells: none. Topic settings (the configs job) change
rarely and are not counted."""

_METADATA = ("metadata",)
_LOG_DIRS = ("log_dirs",)
_REPLICATION = dict.fromkeys(
    ("leader", "replication_factor", "isr", "min_insync_replicas", "replicas_lost", "under_replicated",
     "under_min_isr", "offline", "non_preferred_leader", "replicas_sharing_rack"),
    _METADATA,
)  # fmt: skip
COLUMN_SOURCES: dict[str, dict[str, tuple[str, ...]]] = {
    "partition": {**_REPLICATION, "size_bytes": _LOG_DIRS, "size_ratio": _LOG_DIRS},
    "topic": dict.fromkeys(
        ("max_replicas_lost", "under_replicated_partitions", "under_min_isr_partitions", "offline_partitions"),
        _METADATA,
    ),
    "broker": {
        **dict.fromkeys(
            ("rack", "up", "down", "leaders", "fair_share_leaders", "leader_imbalance", "non_preferred_leaders",
             "replicas", "unregistered"),
            _METADATA,
        ),
        **dict.fromkeys(("disk_total_bytes", "disk_usable_bytes", "disk_used_ratio"), _LOG_DIRS),
        **{c.name: ("probe",) for c in BROKER if c.name.startswith("probe_")},
    },
}  # fmt: skip
"""Entity name -> its columns that come from fewer of its SOURCES jobs (a subset): a broker's
`down` is known from the metadata runs alone, so a rule reading only it counts its `for` from the
metadata run that showed the broker gone, not from a log-dirs run that ended later (`sources_of`).
A column not listed here comes from all its entity's SOURCES."""


def sources_of(entity: str, columns: Iterable[str]) -> tuple[str, ...]:
    """The collection jobs whose samples `columns` of `entity` come from (COLUMN_SOURCES, else
    SOURCES), in SOURCES' order. The key and common columns name the entity, not its state: they
    add nothing; with no other column, all the entity's SOURCES."""
    naming = {c.name for c in COMMON} | set(KEYS[entity])
    narrowed = COLUMN_SOURCES.get(entity, {})
    state = [c for c in columns if c not in naming]
    if not state:
        return SOURCES[entity]
    jobs = {job for column in state for job in narrowed.get(column, SOURCES[entity])}
    return tuple(job for job in SOURCES[entity] if job in jobs)


COMMON = _cols(
    ("evaluated_at", "timestamp", "the evaluation time"),
    ("cluster", "string", "cluster name"),
)


def columns_of(entity: str) -> dict[str, Column]:
    """Every column a rule on `entity` may use, by name."""
    return {c.name: c for c in (*COMMON, *ENTITIES[entity])}


def table_of(entity: str) -> str:
    return f"derived_{entity}"
