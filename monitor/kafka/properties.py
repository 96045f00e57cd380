"""librdkafka properties for one cluster, secrets masked wherever they could be printed."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, TypeVar

from monitor.core.errors import ConfigError
from monitor.core.settings import ClusterConfig, SecurityProtocol

CLIENT_LOG: Final = logging.getLogger("monitor.kafka.client")
# librdkafka's own log lines go to `CLIENT_LOG` at INFO or below: whatever makes a request fail
# also reaches the caller as a named error, and a broker that is down would otherwise repeat the
# same connection error several times a second at ERROR.
_CLIENT_LOG_MAX_LEVEL: Final = logging.INFO
V = TypeVar("V")

MASK: Final = "***"


class ClientLog:
    """The `logger` handed to librdkafka: it calls `log(level, msg, *args)` when polled."""

    def log(self, level: int, msg: str, *args: object) -> None:
        CLIENT_LOG.log(min(level, _CLIENT_LOG_MAX_LEVEL), msg, *args)


def is_secret_key(key: str) -> bool:
    return "password" in key or "secret" in key


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret value replaced by the mask."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


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


class ClientConfig(MaskedMapping[str]):
    """librdkafka properties for one cluster."""

    __slots__ = ()


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
