"""librdkafka properties for one cluster, secrets masked wherever they could be printed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final, TypeVar

from pydantic import SecretStr

from monitor.core.cluster_security import SASL_PROTOCOLS, TLS_PROTOCOLS, SaslMechanism, Security
from monitor.core.errors import ConfigError
from monitor.core.settings import ClusterConfig
from monitor.kafka.masking import MASK as MASK
from monitor.kafka.masking import scrub as scrub
from monitor.kafka.oauth import librdkafka_token_callback, token_source

CLIENT_LOG: Final = logging.getLogger("monitor.kafka.client")
# librdkafka's own log lines go to `CLIENT_LOG` at INFO or below: whatever makes a request fail
# also reaches the caller as a named error, and a broker that is down would otherwise repeat the
# same connection error several times a second at ERROR.
_CLIENT_LOG_MAX_LEVEL: Final = logging.INFO
V = TypeVar("V")


class ClientLog:
    """The `logger` handed to librdkafka: it calls `log(level, msg, *args)` when polled."""

    def log(self, level: int, msg: str, *args: object) -> None:
        CLIENT_LOG.log(min(level, _CLIENT_LOG_MAX_LEVEL), msg, *args)


def is_secret_key(key: str) -> bool:
    return "password" in key or "secret" in key


def rejected_configuration(exc: Exception, cluster: str, secrets: Sequence[str], client: str) -> ConfigError:
    """The ConfigError for librdkafka refusing to build `client` (e.g. "the Kafka consumer") from
    the properties of `cluster`, its message naming the cluster with every secret masked."""
    message = scrub(str(exc.args[0] if exc.args else exc), secrets)
    return ConfigError([f"clusters.{cluster}: {client} rejected the configuration: {message}"])


class MaskedMapping(Mapping[str, V]):
    """Client options whose `repr()` and `str()` mask every option whose name contains "password"
    or "secret", so the object can be logged safely; `dict(options)` holds the real values."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, V]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> V:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {k: (MASK if is_secret_key(k) else v) for k, v in self._values.items()}
        return f"{type(self).__name__}({shown!r})"

    __str__ = __repr__

    def secret_values(self) -> list[str]:
        """The values that must never appear in a message (used to scrub error text)."""
        return [str(v) for k, v in self._values.items() if is_secret_key(k) and v]


TokenCallback = Callable[[str | None], tuple[str, float]]
ClientValue = str | int | bool | TokenCallback
"""A librdkafka property's value: text, a number, a flag, or the `oauth_cb` of MSK IAM tokens."""


class ClientConfig(MaskedMapping[ClientValue]):
    """librdkafka properties for one cluster (text, and `oauth_cb` for MSK IAM tokens)."""

    __slots__ = ()


def client_config(cluster: ClusterConfig) -> ClientConfig:
    """librdkafka properties for `cluster`: servers, security, then `client_config` passthrough.

    The passthrough comes last so an operator can tune anything librdkafka offers; secrets cannot
    be passed that way (the settings model rejects them), they come only from `cluster.security`.
    """
    security = cluster.security
    values: dict[str, ClientValue] = {
        "bootstrap.servers": ",".join(cluster.bootstrap_servers),
        "client.id": f"kafka-health-{cluster.name}",
        "security.protocol": security.protocol.value,
    }
    if security.protocol in SASL_PROTOCOLS:
        values.update(_sasl_properties(cluster.name, security, cluster.request_timeout_seconds))
    if security.protocol in TLS_PROTOCOLS:
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


def _sasl_properties(cluster: str, security: Security, timeout: float) -> dict[str, ClientValue]:
    """The SASL properties of one mechanism (the settings model guarantees what each needs)."""
    mechanism = security.sasl_mechanism
    values: dict[str, ClientValue] = {}
    if mechanism is SaslMechanism.AWS_MSK_IAM:
        tokens = token_source(cluster, security, timeout)
        if tokens is not None:
            values = {"sasl.mechanism": "OAUTHBEARER", "oauth_cb": librdkafka_token_callback(tokens)}
        return values
    if mechanism is not None:
        values["sasl.mechanism"] = mechanism.value
    optional = {
        "sasl.username": security.sasl_username,
        "sasl.password": security.sasl_password,
        "sasl.oauthbearer.token.endpoint.url": security.sasl_oauthbearer_token_endpoint_url,
        "sasl.oauthbearer.client.id": security.sasl_oauthbearer_client_id,
        "sasl.oauthbearer.client.secret": security.sasl_oauthbearer_client_secret,
        "sasl.oauthbearer.scope": security.sasl_oauthbearer_scope,
    }
    for key, value in optional.items():
        if value is not None:
            values[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
    if mechanism is SaslMechanism.OAUTHBEARER:
        values["sasl.oauthbearer.method"] = "oidc"
    return values
