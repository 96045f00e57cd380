"""The one module that talks to the Kafka client libraries.

Everything else in `monitor/` gets the typed records of `monitor.types` and the named errors of
`monitor.errors`; no client-library object or exception leaves this module. Every request goes
through `_KafkaCall`, which bounds it by the cluster's `request_timeout_seconds` and translates
client errors:

- `KafkaUnavailableError`: the cluster did not answer (transport failure, timeout, all brokers
  down, no leader or coordinator available right now). Retrying later may succeed.
- `KafkaRequestError`: a broker answered and refused the request (unknown topic, authorisation,
  invalid configuration, topic already exists ...). Retrying the same request will not help.

Secrets (SASL and key passwords) go to the client and nowhere else: `ClientConfig` masks them in
its repr, and error messages are scrubbed of them before they are raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from monitor.config import ClusterConfig, SecurityProtocol
from monitor.errors import ConfigError, KafkaRequestError, KafkaUnavailableError, MonitorError
from monitor.types import BrokerInfo, ClusterInfo, PartitionInfo, TopicInfo

__all__ = ["ClientConfig", "KafkaAdmin", "client_config"]

_CLIENT_LOG: Final = logging.getLogger("monitor.kafka.client")
# librdkafka's own log lines go to `_CLIENT_LOG` at INFO or below: whatever makes a request fail
# also reaches the caller as a named error, and a broker that is down would otherwise repeat the
# same connection error several times a second at ERROR.
_CLIENT_LOG_MAX_LEVEL: Final = logging.INFO
_MASK: Final = "***"
# A future is only a backstop: librdkafka enforces `request_timeout` itself and fails the
# request first; the extra seconds cover its queueing and callback delivery.
_FUTURE_GRACE_SECONDS: Final = 5.0

# Error codes meaning "the cluster (or the part of it this request needs) did not answer".
_UNAVAILABLE_CODES: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._DESTROY,
        KafkaError._DESTROY_BROKER,
        KafkaError._WAIT_COORD,
        KafkaError._UNKNOWN_BROKER,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_CONTROLLER,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


class _ClientLog:
    """The `logger` handed to librdkafka: it calls `log(level, msg, *args)` when polled."""

    def log(self, level: int, msg: str, *args: object) -> None:
        _CLIENT_LOG.log(min(level, _CLIENT_LOG_MAX_LEVEL), msg, *args)


def _is_secret_key(key: str) -> bool:
    return "password" in key or "secret" in key


class ClientConfig(Mapping[str, str]):
    """librdkafka properties for one cluster.

    `dict(config)` holds the real values for the client; `repr()` and `str()` mask every property
    whose name contains "password" or "secret", so the object can be logged safely.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {k: (_MASK if _is_secret_key(k) else v) for k, v in self._values.items()}
        return f"ClientConfig({shown!r})"

    __str__ = __repr__

    def secret_values(self) -> list[str]:
        """The values that must never appear in a message (used to scrub error text)."""
        return [v for k, v in self._values.items() if _is_secret_key(k) and v]


def client_config(cluster: ClusterConfig) -> ClientConfig:
    """librdkafka properties for `cluster`: servers, security, then `client_config` passthrough.

    The passthrough comes last so an operator can tune anything librdkafka offers; secrets cannot
    be passed that way (the settings model rejects them), they come only from `cluster.security`.
    """
    security = cluster.security
    values: dict[str, str] = {
        "bootstrap.servers": ",".join(cluster.bootstrap_servers),
        "client.id": f"kafka-health-{cluster.name}",
        "security.protocol": security.protocol.value,
    }
    if security.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        # The settings model guarantees all three are set for SASL protocols.
        if security.sasl_mechanism is not None:
            values["sasl.mechanism"] = security.sasl_mechanism.value
        if security.sasl_username is not None:
            values["sasl.username"] = security.sasl_username
        if security.sasl_password is not None:
            values["sasl.password"] = security.sasl_password.get_secret_value()
    if security.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        if security.ssl_ca_location is not None:
            values["ssl.ca.location"] = str(security.ssl_ca_location)
        if security.ssl_certificate_location is not None:
            values["ssl.certificate.location"] = str(security.ssl_certificate_location)
        if security.ssl_key_location is not None:
            values["ssl.key.location"] = str(security.ssl_key_location)
        if security.ssl_key_password is not None:
            values["ssl.key.password"] = security.ssl_key_password.get_secret_value()
        values["ssl.endpoint.identification.algorithm"] = (
            "https" if security.ssl_endpoint_identification else "none"
        )
    values.update(cluster.client_config)
    return ClientConfig(values)


# ---------------------------------------------------------------------------------------------
# Error translation


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, _MASK)
    return text


class _KafkaCall:
    """Context manager around one client request: translates its errors, drains client logs.

    Usage: `with self._call("describe topics") as call: ... future.result(timeout=call.remaining())`.
    """

    def __init__(self, admin: KafkaAdmin, action: str) -> None:
        self._admin = admin
        self._action = action
        self._deadline = time.monotonic() + admin.timeout + _FUTURE_GRACE_SECONDS

    def remaining(self) -> float:
        """Seconds left for waiting on futures, never negative."""
        return max(0.0, self._deadline - time.monotonic())

    def __enter__(self) -> _KafkaCall:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._admin._drain_logs()
        if exc is None or isinstance(exc, MonitorError):
            return
        if isinstance(exc, KafkaException):
            error = self._translate(exc)
        elif isinstance(exc, TimeoutError):
            error = KafkaUnavailableError(
                f"{self._where()}: no answer within {self._admin.timeout:g}s; "
                f"check that {self._servers()} are up and reachable"
            )
        else:
            return
        if isinstance(error, KafkaUnavailableError):
            self._admin._renew()
        raise error from exc

    def _where(self) -> str:
        return f"cannot {self._action} on cluster {self._admin.cluster.name!r}"

    def _servers(self) -> str:
        return ", ".join(self._admin.cluster.bootstrap_servers)

    def _translate(self, exc: KafkaException) -> MonitorError:
        error = exc.args[0] if exc.args else None
        secrets = self._admin.config.secret_values()
        if not isinstance(error, KafkaError):
            return KafkaRequestError(_scrub(f"{self._where()}: {exc}", secrets))
        reason = _scrub(f"{error.str()} ({error.name()})", secrets)
        if error.code() in _UNAVAILABLE_CODES:
            return KafkaUnavailableError(
                f"{self._where()}: {reason}; check that {self._servers()} are up and reachable"
            )
        return KafkaRequestError(f"{self._where()}: the cluster refused the request: {reason}")


# ---------------------------------------------------------------------------------------------
# Admin client


def _partition_info(partition: Any) -> PartitionInfo:
    leader = partition.leader
    leader_id = leader.id if leader is not None and leader.id >= 0 else None
    return PartitionInfo(
        partition=int(partition.id),
        leader=leader_id,
        replicas=tuple(int(n.id) for n in partition.replicas),
        isr=tuple(int(n.id) for n in partition.isr),
    )


def _topic_info(description: Any) -> TopicInfo:
    partitions = sorted((_partition_info(p) for p in description.partitions), key=lambda p: p.partition)
    return TopicInfo(
        name=str(description.name), is_internal=bool(description.is_internal), partitions=tuple(partitions)
    )


def _is_internal_name(name: str) -> bool:
    # Kafka's own topics (__consumer_offsets, __transaction_state, __share_group_state ...).
    return name.startswith("__")


class KafkaAdmin:
    """Admin requests to one cluster, answered with typed records.

    The constructor only builds the client configuration; `start()` creates the client (it
    connects lazily on the first request) and `close()` releases it. Each request blocks the
    calling thread for at most about `cluster.request_timeout_seconds` and raises
    `KafkaUnavailableError` or `KafkaRequestError` (see the module docstring). After an
    unavailable error the client is replaced, so a dead controller does not wedge later requests.
    One instance serves one thread at a time.
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        self._cluster = cluster
        self._config = client_config(cluster)
        self._client: AdminClient | None = None

    def __repr__(self) -> str:
        state = "started" if self._client is not None else "not started"
        return f"KafkaAdmin(cluster={self._cluster.name!r}, {state})"

    @property
    def cluster(self) -> ClusterConfig:
        return self._cluster

    @property
    def config(self) -> ClientConfig:
        return self._config

    @property
    def timeout(self) -> float:
        return self._cluster.request_timeout_seconds

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Create the client. Raises ConfigError if librdkafka rejects the configuration."""
        if self._client is None:
            self._client = self._new_client()

    def _new_client(self) -> AdminClient:
        try:
            return AdminClient(dict(self._config), logger=_ClientLog())
        except KafkaException as exc:
            message = _scrub(str(exc.args[0] if exc.args else exc), self._config.secret_values())
            raise ConfigError(
                [f"clusters.{self._cluster.name}: the Kafka client rejected the configuration: {message}"]
            ) from exc

    def _renew(self) -> None:
        """Replace the client after the cluster did not answer.

        librdkafka remembers which broker it last saw as the controller and, when that broker
        dies, keeps waiting for it request after request; a new client asks the cluster afresh.
        So one request fails after a broker failure, and the next one works again.
        """
        if self._client is not None:
            self._drain_logs()
            self._client = self._new_client()

    def close(self) -> None:
        """Release the client (librdkafka destroys it when the last reference goes)."""
        if self._client is not None:
            self._drain_logs()
        self._client = None

    def __enter__(self) -> KafkaAdmin:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _admin(self) -> AdminClient:
        if self._client is None:
            raise RuntimeError("KafkaAdmin.start() must be called before making requests")
        return self._client

    def _call(self, action: str) -> _KafkaCall:
        return _KafkaCall(self, action)

    def _drain_logs(self) -> None:
        # The client forwards its log lines to `_CLIENT_LOG` only when polled.
        if self._client is not None:
            self._client.poll(0)

    # -- requests ---------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterInfo:
        """The cluster id, the active controller and the brokers currently registered."""
        with self._call("describe the cluster") as call:
            future = self._admin().describe_cluster(request_timeout=self.timeout)
            result = future.result(timeout=call.remaining())
        controller = result.controller
        return ClusterInfo(
            cluster_id=result.cluster_id,
            controller_id=controller.id if controller is not None and controller.id >= 0 else None,
            brokers=tuple(
                sorted(
                    (BrokerInfo(int(n.id), str(n.host), int(n.port), n.rack) for n in result.nodes),
                    key=lambda b: b.broker_id,
                )
            ),
        )

    def list_topic_names(self, include_internal: bool) -> list[str]:
        """Names of all topics, sorted; Kafka's own `__` topics only when `include_internal`."""
        with self._call("list topics"):
            metadata = self._admin().list_topics(timeout=self.timeout)
        names = sorted(str(name) for name in metadata.topics)
        return [n for n in names if include_internal or not _is_internal_name(n)]

    def describe_topics(self, names: Sequence[str]) -> list[TopicInfo]:
        """Partitions (leader, replicas, ISR) of each named topic, in the order given.

        An unknown topic raises KafkaRequestError naming it.
        """
        if not names:
            return []
        topics: list[TopicInfo] = []
        with self._call("describe topics") as call:
            futures = self._admin().describe_topics(
                TopicCollection(list(names)), request_timeout=self.timeout
            )
            for name in names:
                with self._call(f"describe topic {name!r}"):
                    topics.append(_topic_info(futures[name].result(timeout=call.remaining())))
        return topics

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic and wait (up to the timeout) until the controller has created it."""
        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(configs or {}),
        )
        with self._call(f"create topic {name!r}") as call:
            futures = self._admin().create_topics(
                [topic], request_timeout=self.timeout, operation_timeout=self.timeout
            )
            futures[name].result(timeout=call.remaining())
