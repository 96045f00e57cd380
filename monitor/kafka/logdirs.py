"""DescribeLogDirs through kafka-python, the one client that has it (librdkafka does not).

Sizes are per replica per broker (a partition with three replicas appears three times, once per
broker): nothing is summed here. Total and usable bytes of each log dir's volume come from
DescribeLogDirs v4+ (Kafka 3.3+), None from older brokers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

import kafka.errors
from kafka.admin import KafkaAdminClient

from monitor.config import ClusterConfig, SecurityProtocol
from monitor.errors import ConfigError, KafkaRequestError, KafkaUnavailableError
from monitor.kafka.properties import MASK, MaskedMapping
from monitor.kafka.translate import Outcome, reason
from monitor.types import LogDirReplica, LogDirUsage, Partial

_LOG: Final = logging.getLogger(__name__)

LogDirs = tuple[list[LogDirReplica], list[LogDirUsage]]


class _Secret(str):
    """A password handed to kafka-python: the client uses its characters, but repr(), str() and
    format() show the mask, so the client's own debug log of its configuration cannot leak it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return MASK

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK


class KafkaPythonOptions(MaskedMapping[object]):
    """kafka-python `KafkaAdminClient` options for one cluster; repr() masks the passwords."""

    __slots__ = ("_secrets",)

    def __init__(self, values: Mapping[str, object], secrets: Sequence[str]) -> None:
        super().__init__(values)
        self._secrets = [s for s in secrets if s]

    def secret_values(self) -> list[str]:
        # The values are `_Secret`s whose str() is the mask: the plain texts are kept apart.
        return list(self._secrets)


def kafka_python_options(cluster: ClusterConfig) -> KafkaPythonOptions:
    """The same servers, security and timeout as `client_config`, in kafka-python's terms.

    librdkafka properties from `cluster.client_config` do not apply to this client.
    """
    security = cluster.security
    timeout_ms = max(1, round(cluster.request_timeout_seconds * 1000))
    values: dict[str, object] = {
        "bootstrap_servers": list(cluster.bootstrap_servers),
        "client_id": f"kafka-health-{cluster.name}",
        "request_timeout_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,
        "security_protocol": security.protocol.value,
    }
    secrets: list[str] = []
    if security.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        if security.sasl_mechanism is not None:
            values["sasl_mechanism"] = security.sasl_mechanism.value
        if security.sasl_username is not None:
            values["sasl_plain_username"] = security.sasl_username
        if security.sasl_password is not None:
            secrets.append(security.sasl_password.get_secret_value())
            values["sasl_plain_password"] = _Secret(secrets[-1])
    if security.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        if security.ssl_ca_location is not None:
            values["ssl_cafile"] = str(security.ssl_ca_location)
        if security.ssl_certificate_location is not None:
            values["ssl_certfile"] = str(security.ssl_certificate_location)
        if security.ssl_key_location is not None:
            values["ssl_keyfile"] = str(security.ssl_key_location)
        if security.ssl_key_password is not None:
            secrets.append(security.ssl_key_password.get_secret_value())
            values["ssl_password"] = _Secret(secrets[-1])
        values["ssl_check_hostname"] = security.ssl_endpoint_identification
    return KafkaPythonOptions(values, secrets)


def _unavailable(exc: BaseException) -> bool:
    """kafka-python's "no answer": connection and timeout errors, a broker gone from metadata."""
    if isinstance(exc, kafka.errors.UnknownBrokerIdError | kafka.errors.BrokerNotAvailableError):
        return True
    if isinstance(exc, kafka.errors.KafkaError):
        return bool(exc.retriable)
    return isinstance(exc, OSError | TimeoutError)


def _error_name(code: int) -> str | None:
    return None if code == 0 else kafka.errors.for_code(code).__name__


def log_dirs_of(broker_id: int, results: Sequence[Mapping[str, Any]]) -> LogDirs:
    """One broker's DescribeLogDirs results (kafka-python's dicts) as records."""
    replicas: list[LogDirReplica] = []
    usages: list[LogDirUsage] = []
    for result in results:
        log_dir = str(result["log_dir"])
        total, usable = int(result.get("total_bytes", -1)), int(result.get("usable_bytes", -1))
        usages.append(
            LogDirUsage(
                broker_id=broker_id,
                log_dir=log_dir,
                total_bytes=total if total >= 0 else None,
                usable_bytes=usable if usable >= 0 else None,
                error=_error_name(int(result.get("error_code", 0))),
            )
        )
        for topic in result.get("topics") or []:
            for partition in topic.get("partitions") or []:
                replicas.append(
                    LogDirReplica(
                        broker_id=broker_id,
                        log_dir=log_dir,
                        topic=str(topic["name"]),
                        partition=int(partition["partition_index"]),
                        size_bytes=int(partition["partition_size"]),
                        offset_lag=int(partition["offset_lag"]),
                        is_future=bool(partition["is_future_key"]),
                    )
                )
    replicas.sort(key=lambda r: (r.topic, r.partition, r.log_dir))
    return replicas, usages


class LogDirClient:
    """DescribeLogDirs for one cluster.

    The constructor only builds the options and `start()` only allows requests: kafka-python's
    client connects as it is created, so it is created by the first `describe` (and again after
    the cluster stopped answering). `close()` releases it. Calls are serialised.
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        self._cluster = cluster
        self._options = kafka_python_options(cluster)
        self._client: KafkaAdminClient | None = None
        self._started = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "started" if self._started else "not started"
        return f"LogDirClient(cluster={self._cluster.name!r}, {state})"

    @property
    def timeout(self) -> float:
        return self._cluster.request_timeout_seconds

    def start(self) -> None:
        self._started = True

    def close(self) -> None:
        with self._lock:
            self._started = False
            self._discard()

    def __enter__(self) -> LogDirClient:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(self, broker_ids: Sequence[int]) -> Partial[LogDirs]:
        """Replica sizes and log-dir volumes of each broker in `broker_ids`, asked one by one.

        Blocks for one metadata request plus one DescribeLogDirs request per broker, each bounded
        by `request_timeout_seconds` (a first call also connects, bounded the same way). A broker
        that fails is in `errors` as "broker:<id>" and the others are returned. Raises
        KafkaUnavailableError when the cluster cannot be reached or no broker answered, and
        KafkaRequestError when the cluster refuses the client.
        """
        replicas: list[LogDirReplica] = []
        usages: list[LogDirUsage] = []
        outcome = Outcome(self._options.secret_values(), self.timeout, _unavailable)
        with self._lock:
            if not self._started:
                raise RuntimeError("LogDirClient.start() must be called before making requests")
            client = self._connect()
            try:
                topics = {
                    str(t["name"]): [int(p["partition_index"]) for p in t["partitions"]]
                    for t in client.describe_topics()
                    if not t.get("error_code")
                }
            except Exception as exc:
                raise self._failed("list topics for log dirs", exc) from exc
            for broker_id in dict.fromkeys(broker_ids):
                try:
                    answers = client.describe_log_dirs(topic_partitions=topics, brokers=[broker_id])
                except Exception as exc:
                    outcome.failure(f"broker:{broker_id}", exc)
                    continue
                for answer in answers:
                    found = log_dirs_of(int(answer["broker"]), answer["log_dirs"])
                    replicas.extend(found[0])
                    usages.extend(found[1])
                outcome.success()
            failure = outcome.unreachable()
            if failure is not None:
                raise self._failed("describe log dirs", failure) from failure
        return Partial((replicas, usages), outcome.errors)

    def _connect(self) -> KafkaAdminClient:
        if self._client is None:
            try:
                self._client = KafkaAdminClient(**self._options)
            except kafka.errors.KafkaConfigurationError as exc:
                problem = f"kafka-python rejected the configuration: {self._text(exc)}"
                raise ConfigError([f"clusters.{self._cluster.name}: {problem}"]) from exc
            except Exception as exc:
                raise self._failed("connect for log dirs", exc) from exc
        return self._client

    def _failed(self, action: str, exc: BaseException) -> KafkaUnavailableError | KafkaRequestError:
        """The named error for a failure of the whole request; drops the client when unavailable."""
        where = f"cannot {action} on cluster {self._cluster.name!r}"
        if _unavailable(exc):
            self._discard()
            servers = ", ".join(self._cluster.bootstrap_servers)
            return KafkaUnavailableError(
                f"{where}: {self._text(exc)}; check that {servers} are up and reachable"
            )
        return KafkaRequestError(f"{where}: the cluster refused the request: {self._text(exc)}")

    def _text(self, exc: BaseException) -> str:
        return reason(exc, self._options.secret_values(), self.timeout)

    def _discard(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:
                _LOG.debug("closing the kafka-python client failed", exc_info=True)


def describe_log_dirs(cluster: ClusterConfig, broker_ids: Sequence[int]) -> Partial[LogDirs]:
    """One-off `LogDirClient(cluster).describe(broker_ids)`: connects, asks, closes."""
    with LogDirClient(cluster) as client:
        return client.describe(broker_ids)
