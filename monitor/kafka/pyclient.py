"""kafka-python for the requests librdkafka lacks (DescribeLogDirs) or cannot survive (OffsetFetch
while a group coordinator dies): its options for a cluster, its "no answer" errors, and one client
lifecycle that both uses share.

Only kafka-python's public names are used (`tests/unit/test_client_private_api.py` keeps it so, and
`tests/contract/test_kafka_python_api.py` checks their shape on the installed release). The
requests the monitor builds itself go through the IO loop of the admin client's own connections,
reached by its documented `kafka_client` option: `_NetClients` builds the network client from
kafka-python's public `NetworkSelector`, `KafkaConnectionManager` and `KafkaNetClient`, and keeps
the first two as a `KafkaPythonLoop`, rather than reading them off the admin client.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Self

import kafka.errors
from kafka.admin import KafkaAdminClient
from kafka.net import KafkaConnectionManager, KafkaNetClient, NetworkSelector
from kafka.protocol.api_key import ApiKey
from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

from monitor.core.cluster_security import SASL_PROTOCOLS, TLS_PROTOCOLS
from monitor.core.errors import ConfigError, KafkaRequestError, KafkaUnavailableError
from monitor.core.kafka_features import KafkaVersion
from monitor.core.settings import ClusterConfig, SecurityProtocol
from monitor.kafka.oauth import KafkaPythonTokens, token_source
from monitor.kafka.properties import MASK, MaskedMapping
from monitor.kafka.pylog import asking, route_kafka_python_log
from monitor.kafka.translate import reason

_LOG: Final = logging.getLogger(__name__)

_NEWER_RELEASES: Final[tuple[tuple[KafkaVersion, int], ...]] = (((4, 4), 93),)
"""Releases newer than kafka-python's inference knows, each with the first API key it lists
(93, StreamsGroupTopologyDescriptionUpdate, came with Kafka 4.4)."""


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
    secrets = security.secret_values()
    if security.protocol in SASL_PROTOCOLS:
        values.update(_sasl_options(cluster))
    if security.protocol in TLS_PROTOCOLS:
        if security.ssl_ca_location is not None:
            values["ssl_cafile"] = str(security.ssl_ca_location)
        if security.ssl_certificate_location is not None:
            values["ssl_certfile"] = str(security.ssl_certificate_location)
        if security.ssl_key_location is not None:
            values["ssl_keyfile"] = str(security.ssl_key_location)
        if security.ssl_key_password is not None:
            values["ssl_password"] = _Secret(security.ssl_key_password.get_secret_value())
        values["ssl_check_hostname"] = security.ssl_endpoint_identification
    return KafkaPythonOptions(values, secrets)


def _sasl_options(cluster: ClusterConfig) -> dict[str, object]:
    """kafka-python's options for the cluster's SASL mechanism: a password, or a token provider."""
    security = cluster.security
    tokens = token_source(cluster.name, security, cluster.request_timeout_seconds)
    if tokens is not None:  # OAUTHBEARER and MSK IAM: tokens the monitor fetches or signs
        return {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": KafkaPythonTokens(tokens)}
    values: dict[str, object] = {}
    if security.sasl_mechanism is not None:
        values["sasl_mechanism"] = security.sasl_mechanism.value
    if security.sasl_username is not None:
        values["sasl_plain_username"] = security.sasl_username
    if security.sasl_password is not None:
        values["sasl_plain_password"] = _Secret(security.sasl_password.get_secret_value())
    return values


class KafkaPythonLoop:
    """The IO loop of one kafka-python client, through the public methods of its connection
    manager and network selector. Everything but `run` is called on the loop itself (inside a
    coroutine that `run` runs); kafka-python's futures are awaitable there.
    """

    def __init__(self, manager: KafkaConnectionManager, net: NetworkSelector) -> None:
        self._manager = manager
        self._net = net

    def send(self, request: Any, node_id: int | None = None, request_timeout_ms: int | None = None) -> Any:
        """A future of `request`'s answer from broker `node_id` (None: the least loaded one),
        failed by kafka-python after `request_timeout_ms` (None: the client's request timeout).
        It fails at once with NodeNotReadyError when the connection cannot take a request now
        (paused at its in-flight limit, or backing off after a failure)."""
        return self._manager.send(request, node_id=node_id, request_timeout_ms=request_timeout_ms)

    def call_soon(self, function: Callable[..., Any], *args: Any) -> Any:
        """Runs a coroutine function on the loop; returns the future of its result."""
        return self._manager.call_soon(function, *args)

    async def wait_for(self, future: Any, timeout_ms: float) -> Any:
        """`future`'s result, or KafkaTimeoutError after `timeout_ms` (the future runs on)."""
        return await self._manager.wait_for(future, timeout_ms)

    async def sleep(self, seconds: float) -> None:
        await self._net.sleep(seconds)

    def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """Runs a coroutine function on the loop's thread and blocks for its result."""
        return self._manager.run(function, *args)

    def api_version(self, request: Any, min_version: int = 0) -> int:
        """The version of `request` the bootstrap broker and kafka-python share (raises
        IncompatibleBrokerVersion when there is none, from `min_version` on)."""
        versions = self._manager.broker_version_data
        if versions is None:
            raise kafka.errors.IncompatibleBrokerVersion("no broker version negotiated yet")
        return int(versions.api_version(request, min_version=min_version))


class _NetClients:
    """kafka-python's `kafka_client` option: builds the network client as kafka-python's default
    does, and keeps its IO loop for the monitor's own requests."""

    def __init__(self) -> None:
        self.loop: KafkaPythonLoop | None = None

    def __call__(self, **configs: Any) -> KafkaNetClient:
        net = NetworkSelector(**configs)
        manager = KafkaConnectionManager(net, **configs)
        self.loop = KafkaPythonLoop(manager, net)
        return KafkaNetClient(net=net, manager=manager, **configs)


@dataclass(frozen=True)
class Connection:
    """One connected kafka-python admin client and the IO loop it runs on."""

    admin: Any
    loop: KafkaPythonLoop
    max_in_flight: int = 5
    """The requests one connection takes at once (`max_in_flight_requests_per_connection`)."""

    def close(self) -> None:
        self.admin.close()


def connect(options: Mapping[str, object]) -> Connection:
    """A kafka-python admin client built with `options` (it connects as it is built)."""
    clients = _NetClients()
    admin = KafkaAdminClient(**options, kafka_client=clients)
    if clients.loop is None:  # kafka-python no longer builds its network client with the option
        admin.close()
        raise RuntimeError("kafka-python did not build its network client with `kafka_client`")
    return Connection(admin, clients.loop, int(admin.config["max_in_flight_requests_per_connection"]))


def newest_version(client: Connection, request: Any) -> int:
    """The newest version of `request`'s API the cluster answers (the ApiVersions kafka-python
    negotiated, through its public `api_versions()`); -1 when the cluster does not have it.

    `api_versions()` fails on a broker that lists an API kafka-python does not know (Kafka 4.4
    lists key 93): then the negotiated data it is built from is asked for the one API directly.
    """
    try:
        versions: Mapping[ApiKey, tuple[int, int]] = client.admin.api_versions()
    except ValueError:
        try:
            return client.loop.api_version(request)
        except kafka.errors.IncompatibleBrokerVersion:
            return -1
    return int(versions.get(ApiKey(request.API_KEY), (-1, -1))[1])


def kafka_version_of(answered: Mapping[int, tuple[int, int]]) -> KafkaVersion | None:
    """The Kafka release (major, minor) of a broker that answered ApiVersions with `answered`
    (API key -> (oldest, newest) version), as kafka-python infers it; a broker newer than the
    newest release known here is taken as that newest release. None when nothing was answered or
    the answer matches no release from 0.10.1 on (such a broker cannot be identified)."""
    if not answered:
        return None
    inferred = tuple(int(part) for part in infer_broker_version_from_api_versions(dict(answered)))
    if inferred <= (0, 10, 0):  # kafka-python's answer when nothing it knows matched
        return None
    version = (inferred[0], inferred[1])
    for release, api_key in _NEWER_RELEASES:
        if api_key in answered and release > version:
            version = release
    return version


def unavailable(exc: BaseException) -> bool:
    """kafka-python's "no answer": connection and timeout errors, a broker gone from metadata."""
    if isinstance(exc, kafka.errors.UnknownBrokerIdError | kafka.errors.BrokerNotAvailableError):
        return True
    if isinstance(exc, kafka.errors.KafkaError):
        return bool(exc.retriable)
    return isinstance(exc, OSError | TimeoutError)


class KafkaPythonClient:
    """A kafka-python admin client for one cluster, for what librdkafka lacks or gets wrong.

    The constructor only builds the options and `start()` only allows requests: kafka-python's
    client connects as it is created, so it is created by the first request (and again after
    the cluster stopped answering). `close()` releases it. Calls are serialised by `_lock`.
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        self._cluster = cluster
        self._options = kafka_python_options(cluster)
        route_kafka_python_log(cluster.name, self._options.secret_values())
        self._client: Connection | None = None
        self._started = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "started" if self._started else "not started"
        return f"{type(self).__name__}(cluster={self._cluster.name!r}, {state})"

    @property
    def timeout(self) -> float:
        return self._cluster.request_timeout_seconds

    def start(self) -> None:
        self._started = True

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError(f"{type(self).__name__}.start() must be called before making requests")

    def close(self) -> None:
        with self._lock:
            self._started = False
            self._discard()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connect(self) -> Connection:
        asking(self._cluster.name)
        if self._client is None:
            try:
                self._client = connect(self._options)
            except kafka.errors.KafkaConfigurationError as exc:
                problem = f"kafka-python rejected the configuration: {self._text(exc)}"
                raise ConfigError([f"clusters.{self._cluster.name}: {problem}"]) from exc
            except Exception as exc:
                raise self._failed("connect", exc) from exc
        return self._client

    def _failed(self, action: str, exc: BaseException) -> KafkaUnavailableError | KafkaRequestError:
        """The named error for a failure of the whole request; drops the client when unavailable."""
        where = f"cannot {action} on cluster {self._cluster.name!r}"
        if unavailable(exc):
            self._discard()
            servers = ", ".join(self._cluster.bootstrap_servers)
            hint = ""
            if self._cluster.security.protocol is not SecurityProtocol.PLAINTEXT:
                # kafka-python sees a rejected password or certificate only as a closed connection.
                hint = (
                    f", and that they accept the credentials and certificate in "
                    f"clusters.{self._cluster.name}.security"
                )
            return KafkaUnavailableError(
                f"{where}: {self._text(exc)}; check that {servers} are up and reachable{hint}"
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
