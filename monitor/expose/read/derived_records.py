"""The derived columns each read record carries, typed: generated from `monitor.core.derived` by
`monitor.expose.read.record_columns` (`make records`). Do not edit; regenerate."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupColumns:
    """The columns of `derived_group` read into `lag.GroupSummary`."""

    group_id: str
    topics: int | None = None
    partitions: int | None = None
    offset_lag: int | None = None
    lag_seconds: float | None = None
    append_lag_seconds: float | None = None
    commit_lag_seconds: float | None = None
    time_since_last_commit_seconds: float | None = None
    consume_rate: float | None = None
    produce_rate: float | None = None
    time_to_catch_up_seconds: float | None = None
    catch_up_low_seconds: float | None = None
    catch_up_high_seconds: float | None = None
    catching_up: bool | None = None
    time_until_data_loss_seconds: float | None = None
    data_loss_margin_seconds: float | None = None
    data_loss_occurred: bool | None = None
    max_offset_lag: int | None = None
    max_lag_seconds: float | None = None
    status: str | None = None
    group_state: str | None = None
    members: int | None = None
    lag_growing: bool | None = None
    sampled: bool | None = None
    partitions_beyond_end: int | None = None
    consumers_needed: int | None = None
    advice_limited_by: str | None = None
    hot_topic: str | None = None
    hot_partition: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupTopicColumns:
    """The columns of `derived_group_topic` read into `lag.GroupTopicLag` and `topics.TopicConsumer`."""

    group_id: str
    topic: str
    partitions: int | None = None
    offset_lag: int | None = None
    lag_seconds: float | None = None
    append_lag_seconds: float | None = None
    commit_lag_seconds: float | None = None
    time_since_last_commit_seconds: float | None = None
    consume_rate: float | None = None
    produce_rate: float | None = None
    time_to_catch_up_seconds: float | None = None
    catch_up_low_seconds: float | None = None
    catch_up_high_seconds: float | None = None
    catching_up: bool | None = None
    time_until_data_loss_seconds: float | None = None
    data_loss_margin_seconds: float | None = None
    data_loss_occurred: bool | None = None
    max_offset_lag: int | None = None
    max_lag_seconds: float | None = None
    status: str | None = None
    group_state: str | None = None
    members: int | None = None
    sampled: bool | None = None
    partitions_beyond_end: int | None = None
    consumers_needed: int | None = None
    advice_limited_by: str | None = None
    hot_topic: str | None = None
    hot_partition: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPartitionColumns:
    """The columns of `derived_group_partition` read into `lag.GroupPartitionLag`."""

    group_id: str
    topic: str
    partition: int
    committed_offset: int | None = None
    end_offset: int | None = None
    offset_lag: int | None = None
    lag_seconds: float | None = None
    append_lag_seconds: float | None = None
    commit_lag_seconds: float | None = None
    time_since_last_commit_seconds: float | None = None
    consume_rate: float | None = None
    produce_rate: float | None = None
    time_to_catch_up_seconds: float | None = None
    catch_up_low_seconds: float | None = None
    catch_up_high_seconds: float | None = None
    catching_up: bool | None = None
    time_until_data_loss_seconds: float | None = None
    data_loss_margin_seconds: float | None = None
    data_loss_occurred: bool | None = None
    lag_seconds_method: str | None = None
    lag_seconds_error: float | None = None
    time_to_read_seconds: float | None = None
    data_loss_limit: str | None = None
    status: str | None = None
    group_state: str | None = None
    members: int | None = None
    sampled: bool | None = None
    committed_beyond_end: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicColumns:
    """The columns of `derived_topic` read into `topics.TopicSummary`."""

    topic: str
    produce_rate: float | None = None
    produce_bytes_rate: float | None = None
    size_bytes: int | None = None
    max_size_ratio: float | None = None
    min_time_coverage_seconds: float | None = None
    retention_shortfall_seconds: float | None = None
    max_replicas_lost: int | None = None
    under_replicated_partitions: int | None = None
    under_min_isr_partitions: int | None = None
    offline_partitions: int | None = None
    min_time_until_data_loss_seconds: float | None = None
    min_data_loss_margin_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionColumns:
    """The columns of `derived_partition` read into `topics.PartitionState`."""

    topic: str
    partition: int
    start_offset: int | None = None
    end_offset: int | None = None
    produce_rate: float | None = None
    produce_bytes_rate: float | None = None
    size_bytes: int | None = None
    retention_bytes: int | None = None
    retention_ms: int | None = None
    size_ratio: float | None = None
    time_coverage_seconds: float | None = None
    retention_shortfall_seconds: float | None = None
    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    replicas_lost: int | None = None
    under_replicated: bool | None = None
    under_min_isr: bool | None = None
    offline: bool | None = None
    non_preferred_leader: bool | None = None
    replicas_sharing_rack: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterColumns:
    """The columns of `derived_cluster` read into `clusters.ClusterState`."""

    brokers: int | None = None
    brokers_down: int | None = None
    partitions: int | None = None
    offline_partitions: int | None = None
    under_replicated_partitions: int | None = None
    under_min_isr_partitions: int | None = None
    max_leader_imbalance: float | None = None
    collection_age_seconds: float | None = None
    unreachable: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerColumns:
    """The columns of `derived_broker` read into `clusters.BrokerState`."""

    broker_id: int
    leaders: int | None = None
    fair_share_leaders: float | None = None
    leader_imbalance: float | None = None
    non_preferred_leaders: int | None = None
    replicas: int | None = None
    disk_total_bytes: int | None = None
    disk_usable_bytes: int | None = None
    disk_used_ratio: float | None = None
    probe_successes: int | None = None
    probe_failures: int | None = None
    probe_failing: bool | None = None
    probe_produce_latency_seconds: float | None = None
    probe_end_to_end_latency_seconds: float | None = None
    probe_commit_latency_seconds: float | None = None
    unregistered: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupObjectiveColumns:
    """The columns of `derived_lag_objective` read into `objectives.GroupObjective`."""

    objective: str
    group_id: str
    lag_threshold_seconds: float
    target: float
    window_days: int
    max_lag_seconds: float | None = None
    minute_bad: bool | None = None
    burn_rate_5m: float | None = None
    burn_rate_30m: float | None = None
    burn_rate_1h: float | None = None
    burn_rate_6h: float | None = None
    burn_rate_3d: float | None = None
    bad_minutes: int
    recorded_minutes: int
    budget_remaining: float
    compliance: float | None = None
    sampled: bool | None = None
