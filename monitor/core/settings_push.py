"""The settings of `/metrics` and of pushing its families to Prometheus remote-write receivers and
CloudWatch (`metrics:` and `push:` of monitor.yaml). The settings model is `monitor.core.settings`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import (
    Field,
    SecretStr,
    field_validator,
)

from monitor.core.settings_base import Strict


class MetricsConfig(Strict):
    """The Prometheus `/metrics` endpoint (every metric: docs/metrics.md)."""

    partition_series: bool = Field(
        default=True, description="Serve per group-partition and per partition series."
    )
    max_partition_series: int = Field(
        default=50_000,
        ge=1,
        le=10_000_000,
        description="Cap on the partition-level series of one scrape; the most urgent are kept.",
    )
    scrape_timeout_seconds: float = Field(
        default=8,
        gt=0,
        le=120,
        description="The longest a scrape waits (for the first snapshot, or the check and fresh lag "
        "queries); keep it below Prometheus' scrape_timeout.",
    )
    build_timeout_seconds: float = Field(
        default=60,
        gt=0,
        le=600,
        description="Time one build of the snapshot may spend reading the state from PostgreSQL; "
        "builds run in the background (a scrape waits at most scrape_timeout_seconds for one).",
    )
    snapshot_check_seconds: float = Field(
        default=5,
        gt=0,
        le=3600,
        description="Seconds between checks for a new evaluation (a new one rebuilds the snapshot) and "
        "for new commits (the offset lag series of the groups with one are read fresh).",
    )


PUSH_TARGET_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


DEFAULT_PUSHED_METRICS: tuple[str, ...] = (
    "kafka_consumer_group_max_lag_in_seconds",
    "kafka_consumer_group_sum_lag_in_offsets",
    "kafka_consumer_group_topic_max_lag_in_seconds",
    "kafka_consumer_group_topic_sum_lag_in_offsets",
    "kafka_health_group_topic_append_lag_seconds",
)
"""What autoscalers and long-term dashboards read: group and group-topic aggregates."""


class _PushTarget(Strict):
    name: str = Field(pattern=PUSH_TARGET_NAME, description="Names the target in logs and metrics.")
    interval_seconds: float = Field(default=30, ge=1, le=86_400, description="Seconds between pushes.")
    clusters: list[str] = Field(
        default_factory=list, description="Clusters whose series are pushed; empty: every cluster."
    )
    metrics: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PUSHED_METRICS),
        min_length=1,
        description="State metrics (docs/metrics.md) pushed.",
    )
    timeout_seconds: float = Field(default=10, gt=0, le=300, description="One request's timeout.")


class RemoteWriteTarget(_PushTarget):
    """A Prometheus remote-write endpoint (Prometheus with --web.enable-remote-write-receiver,
    Mimir, Thanos Receive, VictoriaMetrics, Grafana Cloud...)."""

    url: str = Field(
        pattern=r"^https?://\S+$", description="The endpoint, e.g. http://prometheus:9090/api/v1/write"
    )
    external_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels added to every series (e.g. the monitor's region)."
    )
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="Extra HTTP headers, e.g. X-Scope-OrgID or Authorization."
    )
    basic_auth_username: str | None = None
    basic_auth_password: SecretStr | None = None
    queue_max_batches: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="Pushes kept while the endpoint is away; the oldest is dropped beyond this.",
    )

    @field_validator("external_labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) or name.startswith("__"):
                raise ValueError(
                    f"external label name {name!r} is not a Prometheus label name: letters, digits "
                    "and _, not starting with a digit or __"
                )
        return value


class CloudWatchTarget(_PushTarget):
    """Amazon CloudWatch PutMetricData (credentials from boto3's usual chain: environment,
    profile, instance or task role)."""

    interval_seconds: float = Field(default=60, ge=1, le=86_400, description="Seconds between pushes.")
    namespace: str = Field(default="KafkaHealth", pattern=r"^[^:\s][^:]{0,254}$")
    region: str = Field(default="us-east-1", pattern=r"^[a-z0-9-]{1,32}$")
    endpoint_url: str | None = Field(
        default=None,
        pattern=r"^https?://\S+$",
        description="Another endpoint (a VPC endpoint, a test server).",
    )
    profile: str | None = Field(default=None, description="A named profile of the AWS config files.")
    storage_resolution: Literal[1, 60] = Field(
        default=60, description="60 (standard) or 1 (high resolution, billed as such)."
    )


class PushConfig(Strict):
    """Push the state metrics where autoscalers and long-term storage read them. Off by default."""

    remote_write: list[RemoteWriteTarget] = Field(default_factory=list)
    cloudwatch: list[CloudWatchTarget] = Field(default_factory=list)

    @field_validator("cloudwatch")
    @classmethod
    def _unique_cloudwatch(cls, value: list[CloudWatchTarget]) -> list[CloudWatchTarget]:
        _unique_target_names(value)
        return value

    @field_validator("remote_write")
    @classmethod
    def _unique_remote_write(cls, value: list[RemoteWriteTarget]) -> list[RemoteWriteTarget]:
        _unique_target_names(value)
        return value

    def targets(self) -> list[RemoteWriteTarget | CloudWatchTarget]:
        return [*self.remote_write, *self.cloudwatch]

    def metric_names(self) -> set[str]:
        """Every metric some target pushes."""
        return {name for target in self.targets() for name in target.metrics}


def _unique_target_names(targets: Sequence[_PushTarget]) -> None:
    seen: set[str] = set()
    for target in targets:
        if target.name in seen:
            raise ValueError(f"push target name {target.name!r} is used twice; names must be unique")
        seen.add(target.name)
