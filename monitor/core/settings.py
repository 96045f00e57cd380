"""One settings model for the whole service, validated at start and passed down.

Sources, highest priority first: environment variables (``KAFKA_HEALTH_<SECTION>__<KEY>``, plus the
conventional ``DATABASE_URL``), then the YAML file, then the defaults below. The defaults are the
embedded development stack: the local Kafka cluster started by ``kafka-health dev-cluster`` and
the project-local PostgreSQL started when ``DATABASE_URL`` is unset.

Every error names the key path, the line in the YAML file where there is one, and the fix.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

# The cluster `security` model has its own module; its names are part of the settings.
from monitor.core.cluster_security import SaslMechanism as SaslMechanism
from monitor.core.cluster_security import Security as Security
from monitor.core.cluster_security import SecurityProtocol as SecurityProtocol
from monitor.core.errors import ConfigError
from monitor.core.patterns import PatternError, UserPattern, compile_pattern
from monitor.core.vocabulary import check_seconds
from monitor.core.yaml_files import format_validation_error, read_yaml

ENV_PREFIX = "KAFKA_HEALTH_"
DEFAULT_DEV_KAFKA_PORT = 19092
DEFAULT_DEV_POSTGRES_PORT = 55432


class _Strict(BaseModel):
    """A section: unknown keys refused, numbers finite, every `*_seconds` a time a setting can
    mean (`check_seconds`: not 1e-300, not centuries)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _sane_seconds(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name and info.field_name.endswith("_seconds") and isinstance(value, float | int):
            return check_seconds(value)
        return value


def compile_name_pattern(pattern: str) -> UserPattern:
    """A topic or group name pattern, compiled with RE2 to match whole names (use `fullmatch`).

    `.` matches every character, a newline included: a name is data, and a group id with a
    control character in it must still match `.*`, or it would silently not be monitored.
    Raises ValueError with the fix for a pattern that is too long or does not compile."""
    try:
        return compile_pattern(pattern, dot_all=True)
    except PatternError as exc:
        raise ValueError(f"{exc}; the pattern is matched against the whole name") from None


def compile_patterns(patterns: list[str]) -> list[str]:
    """Check every name pattern compiles; a bad one is an error that says how to fix it."""
    for pattern in patterns:
        compile_name_pattern(pattern)
    return patterns


class NameFilter(_Strict):
    """Allow/deny regexes matched against whole names. Deny wins; empty allow means all."""

    allow: list[str] = Field(default_factory=lambda: [".*"])
    deny: list[str] = Field(default_factory=list)

    _allow_re: list[UserPattern] = []
    _deny_re: list[UserPattern] = []

    @field_validator("allow", "deny")
    @classmethod
    def _valid_regexes(cls, value: list[str]) -> list[str]:
        return compile_patterns(value)

    def model_post_init(self, __context: Any) -> None:
        object.__setattr__(self, "_allow_re", [compile_name_pattern(p) for p in self.allow])
        object.__setattr__(self, "_deny_re", [compile_name_pattern(p) for p in self.deny])

    def accepts(self, name: str) -> bool:
        if any(p.fullmatch(name) for p in self._deny_re):
            return False
        return not self._allow_re or any(p.fullmatch(name) for p in self._allow_re)


_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class ClusterConfig(_Strict):
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


class DatabaseConfig(_Strict):
    url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+psycopg://...). Unset: the project-local PostgreSQL.",
    )
    sample_retention_days: int = Field(default=14, ge=1, le=3650)
    partitions_ahead_days: int = Field(default=3, ge=1, le=60)
    local_port: int = Field(default=DEFAULT_DEV_POSTGRES_PORT, gt=0, lt=65536)

    @field_validator("url")
    @classmethod
    def _postgres_only(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql", "postgres://")):
            raise ValueError(
                "database.url must be a PostgreSQL URL such as "
                "postgresql+psycopg://user:password@host:5432/dbname"
            )
        return value


class SparkConfig(_Strict):
    master: str = "local[*]"
    app_name: str = "kafka-health-evaluate"
    driver_memory: str = Field(default="1g", pattern=r"^\d+[kmgKMG]$")
    executor_memory: str = Field(default="1g", pattern=r"^\d+[kmgKMG]$")
    shuffle_partitions: int = Field(default=8, ge=1, le=100000)
    conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings.")
    jdbc_jar: Path | None = Field(
        default=None,
        description="The PostgreSQL JDBC driver's jar; unset, `run` uses the one `setup` fetches.",
    )


class Intervals(_Strict):
    """Seconds between runs of each scheduled job."""

    offsets_seconds: float = Field(default=15, gt=0)
    metadata_seconds: float = Field(default=60, gt=0)
    log_dirs_seconds: float = Field(default=120, gt=0)
    probe_seconds: float = Field(default=10, gt=0)
    evaluate_seconds: float = Field(default=30, gt=0)
    maintenance_seconds: float = Field(default=3600, gt=0)


class ProbeConfig(_Strict):
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


class CollectConfig(_Strict):
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
    timestamp_cache_entries: int = Field(default=500_000, ge=1000)
    commit_reconcile_seconds: float = Field(
        default=300,
        ge=10,
        description="While commits are streamed, how often the offsets job checks them against OffsetFetch.",
    )
    probe: ProbeConfig = Field(default_factory=ProbeConfig)


class EvaluateConfig(_Strict):
    """The evaluation pipeline."""

    enabled: bool = True
    window_seconds: float = Field(default=900, ge=60, description="Sample window each evaluation reads.")
    window_commits: int = Field(default=10, ge=2, le=100, description="Commits in the sliding-window status.")
    rules_dir: Path | None = Field(default=None, description="Rule files; default: the shipped alert_rules/.")


MAX_SILENCES_PER_TEAM = 100
"""The default of `alert.max_silences_per_team`."""


class AlertConfig(_Strict):
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
    interval_seconds: float = Field(default=10, gt=0, description="Seconds between alert cycles.")
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


class MetricsConfig(_Strict):
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
        description="Time one build of the snapshot may spend reading PostgreSQL (a scrape waits for "
        "it only before the first snapshot); keep it below Prometheus' scrape_timeout.",
    )
    snapshot_check_seconds: float = Field(
        default=5,
        gt=0,
        le=3600,
        description="Seconds between checks for a new evaluation; a new one rebuilds the snapshot.",
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


class _PushTarget(_Strict):
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


class PushConfig(_Strict):
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


class IdentityConfig(_Strict):
    """Who makes a change through the web UI and API. Nothing is ever accepted anonymously.

    - API tokens (`kafka-health retention token create`), sent as `Authorization: Bearer <token>`,
      are always accepted; only their SHA-256 hash is stored.
    - `proxy`: a reverse proxy in front of the monitor authenticates people and passes the user and
      their groups (teams) in headers. The headers are believed only from `trusted_proxies`;
      from any other address they are ignored.
    - `development`: every request is `development_user` in `development_teams`. For the demo on
      a laptop only: every page and answer says so.
    """

    mode: Literal["proxy", "development"] = "proxy"
    user_header: str = Field(default="X-Forwarded-User", min_length=1)
    groups_header: str = Field(default="X-Forwarded-Groups", min_length=1)
    groups_separator: str = Field(default=",", min_length=1)
    trusted_proxies: list[str] = Field(
        default_factory=list, description="Addresses or networks (CIDR) of the reverse proxies."
    )
    development_user: str = "developer"
    development_teams: list[str] = Field(default_factory=list)
    platform_teams: list[str] = Field(
        default_factory=lambda: ["kafka-platform"],
        description="Teams holding the platform role: they may silence any team's alerts, or all of them.",
    )
    protect_reads: bool = Field(
        default=False,
        description="Also reads (pages, API, Burrow endpoints) need an identity; /healthz, /readyz and "
        "/metrics stay open for probes and scrapers.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (https://monitor.example.com) whose pages may post forms here besides the "
        "request's own host; set the public address when the proxy rewrites the Host header.",
    )
    change_requests_per_minute: int = Field(
        default=30,
        ge=1,
        le=100_000,
        description="How many changes (and previews) one identity may ask for in any minute, over every "
        "change route of the API and the forms together; past it the answer is 429 with Retry-After. "
        "The command line holds each --as name to the same number.",
    )
    csrf_secret: SecretStr | None = Field(
        default=None,
        description="Signs the forms' CSRF tokens. Unset: a random secret per process (set one "
        "when several instances serve the UI behind one address).",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError as exc:
                raise ValueError(
                    f"{network!r} is not an IP address or network; write e.g. 10.0.0.5 or 10.0.0.0/24"
                ) from exc
        return value

    def warnings(self) -> list[str]:
        """A trusted network that holds every address: anyone who reaches the port can then say
        who they are and which teams they belong to."""
        return [
            f"{network!r} trusts every address: anyone who reaches the port can act as any user and "
            "team by sending the identity headers; list only your reverse proxies' addresses"
            for network in self.trusted_proxies
            if ipaddress.ip_network(network, strict=False).prefixlen == 0
        ]


class WebConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, gt=0, lt=65536)
    identity: IdentityConfig = Field(default_factory=IdentityConfig)
    behind_tls: bool = Field(
        default=False,
        description="People reach the monitor over HTTPS (a TLS-terminating proxy in front): every "
        "answer then carries Strict-Transport-Security.",
    )


class RetentionConfig(_Strict):
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


class DevKafkaConfig(_Strict):
    """The local cluster run by `kafka-health dev-cluster`."""

    version: str = Field(
        default="4.1.2",
        pattern=r"^(2\.8|3\.[3-9]|4\.\d+)\.\d+$",
        description="The Apache Kafka version: 2.8.x (run with ZooKeeper), 3.3.x to 3.9.x or 4.x (KRaft).",
    )
    nodes: Literal[1, 3] = 3
    base_port: int = Field(default=DEFAULT_DEV_KAFKA_PORT, gt=1024, lt=65000)
    heap_mb: int = Field(default=384, ge=128, le=8192)
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
    """Merge KAFKA_HEALTH_<SECTION>__<KEY>[__<N>__<KEY>...] variables and DATABASE_URL into `data`."""
    merged: dict[str, Any] = json.loads(json.dumps(data, default=str)) if data else {}
    if environ.get("DATABASE_URL"):
        merged = _merge(merged, ["database", "url"], environ["DATABASE_URL"], "DATABASE_URL")
    for variable in sorted(environ):
        if not variable.startswith(ENV_PREFIX) or variable in _NOT_SETTINGS:
            continue
        if variable.startswith(_TEST_PREFIX):
            continue
        path = [part.lower() for part in variable.removeprefix(ENV_PREFIX).split("__") if part]
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
