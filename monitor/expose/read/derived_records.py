"""The derived columns each read record carries, typed: generated from `monitor.core.derived` by
`monitor.expose.read.record_columns` (`make records`). Do not edit; regenerate."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupColumns:
    """The columns of `derived_group` that `lag.GroupSummary` carries."""

    group_id: str
    topics: int | None
    partitions: int | None
    offset_lag: int | None
    lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    catch_up_low_seconds: float | None
    catch_up_high_seconds: float | None
    catching_up: bool | None
    time_until_data_loss_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_occurred: bool | None
    max_offset_lag: int | None
    max_lag_seconds: float | None
    status: str | None
    group_state: str | None
    members: int | None
    lag_growing: bool | None
    sampled: bool | None
    partitions_beyond_end: int | None
    consumers_needed: int | None
    advice_limited_by: str | None
    hot_topic: str | None
    hot_partition: int | None


@dataclass(frozen=True, slots=True)
class GroupTopicColumns:
    """The columns of `derived_group_topic` that `lag.GroupTopicLag` carries."""

    topic: str
    partitions: int | None
    offset_lag: int | None
    lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    catch_up_low_seconds: float | None
    catch_up_high_seconds: float | None
    catching_up: bool | None
    time_until_data_loss_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_occurred: bool | None
    max_offset_lag: int | None
    max_lag_seconds: float | None
    status: str | None
    group_state: str | None
    members: int | None
    sampled: bool | None
    partitions_beyond_end: int | None
    consumers_needed: int | None
    advice_limited_by: str | None
    hot_topic: str | None
    hot_partition: int | None


@dataclass(frozen=True, slots=True)
class GroupPartitionColumns:
    """The columns of `derived_group_partition` that `lag.GroupPartitionLag` carries."""

    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int | None
    offset_lag: int | None
    lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    catch_up_low_seconds: float | None
    catch_up_high_seconds: float | None
    catching_up: bool | None
    time_until_data_loss_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_occurred: bool | None
    lag_seconds_method: str | None
    lag_seconds_error: float | None
    time_to_read_seconds: float | None
    data_loss_limit: str | None
    status: str | None
    group_state: str | None
    members: int | None
    sampled: bool | None
    committed_beyond_end: bool | None


@dataclass(frozen=True, slots=True)
class TopicConsumerColumns:
    """The columns of `derived_group_topic` that `topics.TopicConsumer` carries."""

    group_id: str
    partitions: int | None
    offset_lag: int | None
    lag_seconds: float | None
    append_lag_seconds: float | None
    commit_lag_seconds: float | None
    time_since_last_commit_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    time_to_catch_up_seconds: float | None
    catch_up_low_seconds: float | None
    catch_up_high_seconds: float | None
    catching_up: bool | None
    time_until_data_loss_seconds: float | None
    data_loss_margin_seconds: float | None
    data_loss_occurred: bool | None
    max_offset_lag: int | None
    max_lag_seconds: float | None
    status: str | None
    group_state: str | None
    members: int | None
    sampled: bool | None
    partitions_beyond_end: int | None
    consumers_needed: int | None
    advice_limited_by: str | None
    hot_topic: str | None
    hot_partition: int | None


@dataclass(frozen=True, slots=True)
class GroupObjectiveColumns:
    """The columns of `derived_lag_objective` that `objectives.GroupObjective` carries."""

    objective: str
    lag_threshold_seconds: float
    target: float
    window_days: int
    max_lag_seconds: float | None
    minute_bad: bool | None
    burn_rate_5m: float | None
    burn_rate_30m: float | None
    burn_rate_1h: float | None
    burn_rate_6h: float | None
    burn_rate_3d: float | None
    bad_minutes: int
    recorded_minutes: int
    budget_remaining: float
    compliance: float | None
    sampled: bool | None
