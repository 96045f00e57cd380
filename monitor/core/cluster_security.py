"""How the monitor authenticates to a cluster: the `security` section of a cluster.

One model for both Kafka client libraries (`monitor.kafka.properties` turns it into librdkafka
properties, `monitor.kafka.pyclient` into kafka-python options). Every combination that cannot
work is refused at start with what to change; secrets are `SecretStr`, never printed.
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"
    """OAuth 2 bearer tokens from an OpenID provider's token endpoint (client-credentials grant)."""
    AWS_MSK_IAM = "AWS_MSK_IAM"
    """Amazon MSK IAM: OAUTHBEARER tokens signed with AWS credentials (never sent to a provider)."""


SASL_PROTOCOLS: Final = frozenset({SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL})
TLS_PROTOCOLS: Final = frozenset({SecurityProtocol.SSL, SecurityProtocol.SASL_SSL})
PASSWORD_MECHANISMS: Final = frozenset(
    {SaslMechanism.PLAIN, SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512}
)

_PASSWORD_FIELDS: Final = ("sasl_username", "sasl_password")
_OAUTH_FIELDS: Final = (
    "sasl_oauthbearer_token_endpoint_url",
    "sasl_oauthbearer_client_id",
    "sasl_oauthbearer_client_secret",
    "sasl_oauthbearer_scope",
)
_OAUTH_REQUIRED: Final = _OAUTH_FIELDS[:3]
_AWS_FIELDS: Final = ("aws_region", "aws_profile", "aws_role_arn")
_FIELDS_OF: Final[dict[SaslMechanism, tuple[str, ...]]] = {
    **{mechanism: _PASSWORD_FIELDS for mechanism in PASSWORD_MECHANISMS},
    SaslMechanism.OAUTHBEARER: _OAUTH_FIELDS,
    SaslMechanism.AWS_MSK_IAM: _AWS_FIELDS,
}
_REQUIRED_OF: Final[dict[SaslMechanism, tuple[str, ...]]] = {
    **{mechanism: _PASSWORD_FIELDS for mechanism in PASSWORD_MECHANISMS},
    SaslMechanism.OAUTHBEARER: _OAUTH_REQUIRED,
    SaslMechanism.AWS_MSK_IAM: ("aws_region",),
}
_ENV: Final = "KAFKA_HEALTH_CLUSTERS__<n>__SECURITY__"
_PASSWORD_HOW: Final = f"set them (the password preferably from the environment: {_ENV}SASL_PASSWORD)"
_HOW: Final[dict[SaslMechanism, str]] = {
    **{mechanism: _PASSWORD_HOW for mechanism in PASSWORD_MECHANISMS},
    SaslMechanism.OAUTHBEARER: "set them (the secret preferably through the environment: "
    f"{_ENV}SASL_OAUTHBEARER_CLIENT_SECRET)",
    SaslMechanism.AWS_MSK_IAM: "set the cluster's AWS region, e.g. eu-west-1 (the credentials come from "
    "the usual AWS sources: environment, aws_profile, instance or task role; aws_role_arn to assume a role)",
}


class Security(BaseModel):
    """How to reach a cluster: TLS and/or SASL (PLAIN, SCRAM, OAUTHBEARER with OIDC, MSK IAM)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_oauthbearer_token_endpoint_url: str | None = Field(
        default=None, description="The OpenID provider's token endpoint (https; http only on loopback)."
    )
    sasl_oauthbearer_client_id: str | None = None
    sasl_oauthbearer_client_secret: SecretStr | None = None
    sasl_oauthbearer_scope: str | None = Field(default=None, description="Space-separated scopes to ask for.")
    aws_region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d+$")
    aws_profile: str | None = Field(default=None, min_length=1)
    aws_role_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
    ssl_ca_location: Path | None = None
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification: bool = True

    @field_validator("sasl_oauthbearer_token_endpoint_url")
    @classmethod
    def _https_endpoint(cls, value: str | None) -> str | None:
        if value is not None:
            check_token_endpoint(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Security:
        if self.protocol in SASL_PROTOCOLS:
            self._check_sasl()
        else:
            names = ("sasl_mechanism", *_unique_fields())
            stray = [name for name in names if getattr(self, name) is not None]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)} set but protocol is {self.protocol.value}; "
                    f"use protocol SASL_SSL (or SASL_PLAINTEXT), or remove {', '.join(stray)}"
                )
        return self

    def _check_sasl(self) -> None:
        mechanism = self.sasl_mechanism
        if mechanism is None:
            raise ValueError(
                f"protocol {self.protocol.value} needs sasl_mechanism (one of "
                f"{', '.join(m.value for m in SaslMechanism)})"
            )
        missing = [name for name in _REQUIRED_OF[mechanism] if getattr(self, name) is None]
        if missing:
            needs = ", ".join(missing)
            raise ValueError(f"sasl_mechanism {mechanism.value} needs {needs}; {_HOW[mechanism]}")
        foreign = [
            name
            for name in _unique_fields()
            if name not in _FIELDS_OF[mechanism] and getattr(self, name) is not None
        ]
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)} do not apply to sasl_mechanism {mechanism.value}; remove them "
                f"(it uses {', '.join(_FIELDS_OF[mechanism])})"
            )
        if mechanism is SaslMechanism.AWS_MSK_IAM:
            if self.protocol is not SecurityProtocol.SASL_SSL:
                raise ValueError(
                    "sasl_mechanism AWS_MSK_IAM needs protocol SASL_SSL (MSK's IAM listeners are TLS)"
                )
            if self.aws_profile is not None and self.aws_role_arn is not None:
                raise ValueError(
                    "set aws_profile or aws_role_arn, not both (the role is assumed with the "
                    "default credentials; to assume it from a profile, configure the role in that profile)"
                )

    def secret_values(self) -> list[str]:
        """Every secret this section holds, as text: to be masked wherever text could be printed."""
        found = (self.sasl_password, self.sasl_oauthbearer_client_secret, self.ssl_key_password)
        values = [secret.get_secret_value() for secret in found if secret is not None]
        return [value for value in values if value]


def _unique_fields() -> tuple[str, ...]:
    return (*_PASSWORD_FIELDS, *_OAUTH_FIELDS, *_AWS_FIELDS)


def check_token_endpoint(url: str) -> None:
    """Raise ValueError unless `url` is an https URL (http is allowed on a loopback address only:
    a client secret must not cross a network in the clear)."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(
            f"token endpoint {url!r} must be an https:// URL, e.g. https://idp.example.com/oauth2/token"
        )
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ValueError(
            f"token endpoint {url!r} is plain http to another host, which would send the client "
            "secret in the clear; use https:// (http is accepted only for 127.0.0.1, ::1 and localhost)"
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
