"""One settings model for the whole service, validated at start and passed down.

Sources, highest priority first: environment variables (``KAFKA_HEALTH_<SECTION>__<KEY>``, plus the
conventional ``DATABASE_URL``), then the YAML file, then the defaults below. The defaults are the
embedded development stack: the local Kafka cluster started by ``kafka-health dev-cluster`` and
the project-local PostgreSQL started when ``DATABASE_URL`` is unset.

Every error names the key path, the line in the YAML file where there is one, and the fix.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

# The cluster `security` model has its own module; its names are part of the settings.
from monitor.core.cluster_security import SaslMechanism as SaslMechanism
from monitor.core.cluster_security import Security as Security
from monitor.core.cluster_security import SecurityProtocol as SecurityProtocol
from monitor.core.errors import ConfigError

# The database, web UI and /metrics sections have their own modules; their names are part of the settings.
from monitor.core.settings_base import NameFilter as NameFilter
from monitor.core.settings_base import Strict as Strict
from monitor.core.settings_base import compile_name_pattern as compile_name_pattern
from monitor.core.settings_base import compile_patterns as compile_patterns
from monitor.core.settings_push import DEFAULT_PUSHED_METRICS as DEFAULT_PUSHED_METRICS
from monitor.core.settings_push import PUSH_TARGET_NAME as PUSH_TARGET_NAME
from monitor.core.settings_push import CloudWatchTarget as CloudWatchTarget
from monitor.core.settings_push import MetricsConfig as MetricsConfig
from monitor.core.settings_push import PushConfig as PushConfig
from monitor.core.settings_push import RemoteWriteTarget as RemoteWriteTarget
from monitor.core.settings_store import DEFAULT_DEV_POSTGRES_PORT as DEFAULT_DEV_POSTGRES_PORT
from monitor.core.settings_store import DatabaseConfig as DatabaseConfig
from monitor.core.settings_web import IdentityConfig as IdentityConfig
from monitor.core.settings_web import WebConfig as WebConfig
from monitor.core.yaml_files import format_validation_error, read_yaml

ENV_PREFIX = "KAFKA_HEALTH_"
DEFAULT_DEV_KAFKA_PORT = 19092


_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class ClusterConfig(Strict):
    name: str
    bootstrap_servers: list[str] = Field(min_length=1)
    security: Security = Field(default_factory=Security)
    topics: NameFilter = Field(default_factory=NameFilter)
    groups: NameFilter = Field(default_factory=NameFilter)
    include_internal_topics: bool = False
    request_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    client_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka properties, passed through unchanged.",
    )
    partition_series: bool = Field(
        default=True,
        description="Serve this cluster's per group-partition and per partition series on /metrics "
        "(off for huge clusters: the group, topic and cluster series stay).",
    )
    commit_stream: bool = Field(
        default=True,
        description=(
            "Read every commit from __consumer_offsets as it is written (needs Describe and Read on "
            "that topic; without them OffsetFetch is used, as when this is false)."
        ),
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _CLUSTER_NAME.match(value):
            raise ValueError(
                f"cluster name {value!r} must be 1-63 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit (it appears in URLs and metric labels)"
            )
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port(cls, value: list[str]) -> list[str]:
        for server in value:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"bootstrap server {server!r} must be host:port, e.g. broker1:9092")
        return value

    @field_validator("client_config")
    @classmethod
    def _no_secrets_inline(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if "password" in key or "secret" in key:
                raise ValueError(
                    f"client_config.{key} looks like a secret; put it in `security` "
                    "(a SecretStr, never printed) instead"
                )
        return value


AUTO_MEMORY = "auto"  # spark.driver_memory sized to the fleet (monitor.evaluate.spark.fleet_heap_mb)


class SparkConfig(Strict):
    master: str = "local[*]"
    app_name: str = "kafka-health-evaluate"
    driver_memory: str = Field(
        default=AUTO_MEMORY, pattern=r"^(auto|\d+[kmgKMG])$", description="The driver's heap, or auto."
    )
    executor_memory: str = Field(default="1g", pattern=r"^\d+[kmgKMG]$")
    shuffle_partitions: int = Field(default=8, ge=1, le=100000)
    conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings.")
    jdbc_jar: Path | None = Field(
        default=None,
        description="The PostgreSQL JDBC driver's jar; unset, `run` uses the one `setup` fetches.",
    )


class Intervals(Strict):
    """Seconds between runs of each scheduled job."""

    offsets_seconds: float = Field(default=15, gt=0)
    metadata_seconds: float = Field(default=60, gt=0)
    log_dirs_seconds: float = Field(default=120, gt=0)
    probe_seconds: float = Field(default=10, gt=0)
    evaluate_seconds: float = Field(default=30, gt=0)
    maintenance_seconds: float = Field(default=3600, gt=0)


class ProbeConfig(Strict):
    """The end-to-end probe (a `probe` collector job per cluster): produce with acks=all to a
    partition led by every broker, consume it back with its own group, commit."""

    enabled: bool = Field(
        default=False, description="Run the probe; it writes to the cluster, so it is opt-in."
    )
    topic: str = Field(
        default="kafka-health-probe",
        pattern=r"^[A-Za-z0-9._-]{1,249}$",
        description="The probe's topic, created if missing with one partition per broker.",
    )
    group_id: str = Field(
        default="kafka-health-probe", min_length=1, description="The probe's consumer group."
    )
    replication_factor: int = Field(
        default=3, ge=1, le=10, description="Replicas per probe partition (at most the live brokers)."
    )
    budget_seconds: float = Field(
        default=5.0, gt=0, le=120, description="Time one round may take; a step not done by then fails."
    )
    retire_after_seconds: float = Field(
        default=600,
        ge=0,
        le=7 * 86400,
        description="A broker gone from the cluster this long counts as removed: the probe "
        "partitions on it are reassigned to live brokers. Until then a broker that leaves is down, "
        "and its partition fails the probe.",
    )


MIN_END_OFFSETS_REFRESH_SECONDS = 0.5
"""The shortest period of the end offsets job's listing (`CollectConfig.end_offsets_refresh_seconds`)."""


class CollectConfig(Strict):
    """How the collectors work within each cycle."""

    timestamp_budget_seconds: float = Field(
        default=5.0, gt=0, le=300, description="Wall time per cycle for reading exact record timestamps."
    )
    buffer_max_rows: int = Field(
        default=2_000_000, ge=1000, description="Sample rows kept in memory while PostgreSQL is down."
    )
    lease_ttl_seconds: float = Field(
        default=30.0, ge=3, le=3600, description="A cluster's collection lease; renewed every third of it."
    )
    timestamp_cache_entries: int = Field(
        default=500_000,
        ge=1000,
        description="The most record timestamps a cluster's offsets job keeps in memory; those not "
        "asked for in the last few offsets cycles go sooner (monitor.collect.recall.KEEP_CYCLES).",
    )
    commit_reconcile_seconds: float = Field(
        default=300,
        ge=10,
        description="While commits are streamed, how often the offsets job checks them against OffsetFetch.",
    )
    end_offsets_refresh_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="How often the end offsets job lists every allowed partition's end offset between "
        "two offsets cycles, so the offset lag served is that old (0: off, the lag is as old as the "
        "offsets cycle). At least 0.5 s when on.",
    )
    probe: ProbeConfig = Field(default_factory=ProbeConfig)

    @field_validator("end_offsets_refresh_seconds")
    @classmethod
    def _refresh_bounded(cls, value: float) -> float:
        if 0 < value < MIN_END_OFFSETS_REFRESH_SECONDS:
            raise ValueError(
                f"must be 0 (off) or at least {MIN_END_OFFSETS_REFRESH_SECONDS:g} seconds: each refresh "
                "asks every partition's leader"
            )
        return value


class EvaluateConfig(Strict):
    """The evaluation pipeline."""

    enabled: bool = True
    window_seconds: float = Field(default=900, ge=60, description="Sample window each evaluation reads.")
    window_commits: int = Field(default=10, ge=2, le=100, description="Commits in the sliding-window status.")
    incremental: bool = Field(default=True, description="Carry the groups that stood still, caught up.")
    full_every: int = Field(default=20, ge=1, le=10_000, description="A full evaluation every this many.")
    rules_dir: Path | None = Field(default=None, description="Rule files; default: the shipped alert_rules/.")
    objectives_file: Path | None = Field(
        default=None,
        description="Lag objectives; default: the shipped alert_rules/objectives.yaml (an example).",
    )


MAX_SILENCES_PER_TEAM = 100
"""The default of `alert.max_silences_per_team`."""


class AlertConfig(Strict):
    """The alert stage: alert lifecycle, routing and the notification sender."""

    enabled: bool = True
    routing_file: Path | None = Field(
        default=None, description="Default: the shipped alert_rules/routing.yaml."
    )
    owners_file: Path | None = Field(
        default=None,
        description="Who owns which topics and groups. Default: the owners.yaml beside routing_file, "
        "if any; else none (the shipped alert_rules/owners.yaml is an example, never read by itself).",
    )
    interval_seconds: float = Field(
        default=10, gt=0, description="Seconds between alert cycles; a long cycle rests twice its time."
    )
    sender_interval_seconds: float = Field(default=1, gt=0, description="Seconds between outbox polls.")
    sender_batch: int = Field(default=200, ge=1, le=10_000, description="Notifications claimed at once.")
    sender_concurrency: int = Field(default=16, ge=1, le=64, description="Notifications sent in parallel.")
    claim_seconds: float = Field(
        default=60, ge=5, description="How long a claimed notification is reserved for one instance."
    )
    retry_base_seconds: float = Field(default=2, gt=0, description="First retry delay; doubles per attempt.")
    retry_max_seconds: float = Field(default=300, gt=0, description="Longest delay between retries.")
    give_up_after_seconds: float = Field(
        default=86_400, gt=0, description="A notification not delivered by then is marked failed."
    )
    external_url: str | None = Field(
        default=None, description="The web UI's address for links in notifications (default: web host:port)."
    )
    ack_link_seconds: float = Field(
        default=7 * 86_400,
        gt=0,
        le=366 * 86_400,
        description="How long the acknowledgement link of a notification works after the incident's "
        "latest notification (it also works only once).",
    )
    max_silences_per_team: int = Field(
        default=MAX_SILENCES_PER_TEAM,
        ge=1,
        le=10_000,
        description="Most active or scheduled silences naming one team (team=<team>); the silences "
        "that name no team count together as one more. A new one beyond it is refused (409).",
    )


class RetentionConfig(Strict):
    """The retention button: policy, the config-as-code repository, and the scheduled job."""

    enabled: bool = True
    policy_file: Path | None = Field(
        default=None, description="Default: the shipped alert_rules/retention-policy.yaml."
    )
    repo_path: Path | None = Field(
        default=None,
        description="The config-as-code git working copy. Default: $KAFKA_HEALTH_VAR/retention-configs "
        "(./var/retention-configs).",
    )
    repo_remote: str | None = Field(
        default=None, description="A git remote each change is pushed to (cloned when repo_path is missing)."
    )
    repo_branch: str = Field(default="main", pattern=r"^[A-Za-z0-9._/-]+$")
    interval_seconds: float = Field(
        default=15, gt=0, description="Seconds between runs of the job that applies, retries and reverts."
    )
    retry_seconds: float = Field(
        default=30, gt=0, description="Seconds before an apply or revert Kafka did not answer is tried again."
    )
    verify_seconds: float = Field(
        default=15, gt=0, description="How long the read-back may take to show the new values."
    )


class DevKafkaConfig(Strict):
    """The local cluster run by `kafka-health dev-cluster`."""

    version: str = Field(
        default="4.1.2",
        pattern=r"^(2\.8|3\.[3-9]|4\.\d+)\.\d+$",
        description="The Apache Kafka version: 2.8.x (run with ZooKeeper), 3.3.x to 3.9.x or 4.x (KRaft).",
    )
    nodes: Literal[1, 3] = 3
    base_port: int = Field(default=DEFAULT_DEV_KAFKA_PORT, gt=1024, lt=65000)
    heap_mb: int = Field(default=384, ge=128, le=8192)
    quick_start: bool = Field(
        default=False,
        description="Run the nodes with the client JIT only and the serial collector: about half the "
        "CPU to start and restart a node, for tests on small machines; slower under sustained load, "
        "so not for benchmarks.",
    )
    security: Literal["plaintext", "sasl_ssl"] = Field(
        default="plaintext",
        description="sasl_ssl adds a SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; "
        "OAUTHBEARER with `dev-cluster up --oidc`) at base_port + 200 and a mutual-TLS listener at "
        "base_port + 300 to every node, beside the PLAINTEXT one.",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    clusters: list[ClusterConfig] = Field(
        default_factory=lambda: [
            ClusterConfig(name="local", bootstrap_servers=[f"127.0.0.1:{DEFAULT_DEV_KAFKA_PORT}"])
        ]
    )
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    intervals: Intervals = Field(default_factory=Intervals)
    collect: CollectConfig = Field(default_factory=CollectConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    alert: AlertConfig = Field(default_factory=AlertConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    push: PushConfig = Field(default_factory=PushConfig)
    dev_kafka: DevKafkaConfig = Field(default_factory=DevKafkaConfig)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, value: list[ClusterConfig]) -> list[ClusterConfig]:
        seen: set[str] = set()
        for cluster in value:
            if cluster.name in seen:
                raise ValueError(f"cluster name {cluster.name!r} is used twice; names must be unique")
            seen.add(cluster.name)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment is merged into the file's data by `load_settings` (so that list items
        # such as clusters.0 can be overridden one key at a time); both arrive as init kwargs.
        return (init_settings,)

    def warnings(self) -> list[str]:
        """What is valid but most likely a mistake, each with its key path and the fix; said by
        `config check` and logged when the daemon starts."""
        return [f"web.identity.trusted_proxies: {warning}" for warning in self.web.identity.warnings()]

    def cluster(self, name: str) -> ClusterConfig:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# Loading: the file, then the environment


def _parse_env_value(raw: str) -> Any:
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return raw
    return raw


def _merge(target: Any, path: list[str], value: Any, variable: str) -> Any:
    """Set `value` at `path` inside nested dicts/lists, creating dicts as needed."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(target, list) or head.isdigit():
        target = target if isinstance(target, list) else []
        if not head.isdigit() or int(head) >= len(target):
            raise ConfigError(
                [
                    f"{variable}: index {head} does not exist (the list has {len(target)} item(s)); "
                    "define the item in the file first"
                ]
            )
        target[int(head)] = _merge(target[int(head)], rest, value, variable)
        return target
    result = dict(target) if isinstance(target, dict) else {}
    result[head] = _merge(result.get(head), rest, value, variable)
    return result


def environment_overrides(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Merge KAFKA_HEALTH_<SECTION>__<KEY>[__<N>__<KEY>...] variables and DATABASE_URL into `data`.

    A variable of one part that names no section (`KAFKA_HEALTH_SLACK_TOKEN`) is not a setting:
    the receivers' `*_env` keys name such variables for their secrets (the shipped routing does)."""
    merged: dict[str, Any] = json.loads(json.dumps(data, default=str)) if data else {}
    if environ.get("DATABASE_URL"):
        merged = _merge(merged, ["database", "url"], environ["DATABASE_URL"], "DATABASE_URL")
    for variable in sorted(environ):
        if not variable.startswith(ENV_PREFIX) or variable in _NOT_SETTINGS:
            continue
        if variable.startswith(_TEST_PREFIX):
            continue
        path = [part.lower() for part in variable.removeprefix(ENV_PREFIX).split("__") if part]
        if len(path) == 1 and path[0] not in Settings.model_fields:
            continue
        if path:
            merged = _merge(merged, path, _parse_env_value(environ[variable]), variable)
    return merged


# Variables with the prefix that steer the tooling rather than the service: these, and every
# KAFKA_HEALTH_TEST_* (the test suite's ports and Kafka version).
_NOT_SETTINGS = frozenset({"KAFKA_HEALTH_VAR", "KAFKA_HEALTH_CACHE"})
_TEST_PREFIX = "KAFKA_HEALTH_TEST_"


def load_settings(path: Path | None = None) -> Settings:
    """Build the settings from an optional YAML file and the environment (which wins).

    Raises ConfigError listing every problem with its key path (and line, for the file).
    """
    data: Any = {}
    lines: dict[tuple[int, Any], int] = {}
    source = "configuration"
    if path is not None:
        source = str(path)
        data, lines = read_yaml(path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(["the file must hold a mapping of sections (clusters:, database: ...)"], source)
    try:
        merged = environment_overrides(data, os.environ)
    except ConfigError as exc:
        raise ConfigError(exc.problems, source) from exc
    try:
        return Settings(**merged)
    except ValidationError as exc:
        # Line numbers refer to the file's own data; keys set only by the environment have none.
        raise ConfigError(format_validation_error(exc, data, lines), source) from exc
