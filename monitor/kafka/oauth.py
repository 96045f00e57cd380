"""Bearer tokens for SASL/OAUTHBEARER, for the clients that ask the monitor for them.

- OAUTHBEARER with an OpenID provider: confluent-kafka fetches its own tokens (librdkafka's
  `sasl.oauthbearer.method=oidc`); kafka-python gets them from `ClientCredentialsTokens`, which
  asks the token endpoint with the client-credentials grant (client id and secret as HTTP Basic
  authentication, RFC 6749 2.3.1, as librdkafka sends them), keeps the token and fetches the next
  one once `REFRESH_AFTER` of its lifetime has gone: before the broker's session, which ends at the
  token's expiry, asks the client to re-authenticate.
- AWS MSK IAM: both clients get tokens from `MskIamTokens`, signed locally by
  `aws-msk-iam-sasl-signer-python` with the AWS credentials found the usual way (or a profile, or a
  role assumed through STS); nothing is sent to a provider.

A token is a secret: `Token`'s repr() masks it and failures never quote it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import httpx
from kafka.net.sasl.oauth import AbstractTokenProvider

from monitor.core.cluster_security import SaslMechanism, Security
from monitor.core.errors import KafkaAuthenticationError
from monitor.kafka.masking import MASK, scrub

REFRESH_AFTER: Final = 0.8
"""The share of a token's lifetime after which the next one is fetched (librdkafka's too)."""
_MIN_LIFETIME_SECONDS: Final = 1.0


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token and when it expires (seconds since the epoch)."""

    value: str = field(repr=False)
    expires_at: float
    issued_at: float

    def __repr__(self) -> str:
        return f"Token({MASK}, expires_at={self.expires_at:.0f})"

    @property
    def refresh_at(self) -> float:
        return self.issued_at + REFRESH_AFTER * (self.expires_at - self.issued_at)


class CachedTokens:
    """One token at a time from `fetch`, replaced once `REFRESH_AFTER` of its lifetime is gone.

    `current()` blocks while a token is fetched (one caller fetches, the others wait for it) and
    raises what `fetch` raises. Thread-safe; `fetches` counts the tokens fetched.
    """

    def __init__(self, fetch: Callable[[], Token], clock: Callable[[], float] = time.time) -> None:
        self._fetch = fetch
        self._clock = clock
        self._token: Token | None = None
        self._lock = threading.Lock()
        self.fetches = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._fetch!r})"

    def current(self) -> Token:
        with self._lock:
            token = self._token
            if token is None or self._clock() >= token.refresh_at:
                token = self._token = self._fetch()
                self.fetches += 1
            return token


class ClientCredentialsTokens:
    """`fetch` for `CachedTokens`: the OAuth 2 client-credentials grant at the token endpoint."""

    def __init__(self, cluster: str, security: Security, timeout: float,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        url, client_id = security.sasl_oauthbearer_token_endpoint_url, security.sasl_oauthbearer_client_id
        secret = security.sasl_oauthbearer_client_secret
        if url is None or client_id is None or secret is None:
            raise ValueError("the OAUTHBEARER settings are incomplete")  # the settings model forbids it
        self._cluster, self._url, self._timeout, self._clock = cluster, url, timeout, clock
        self._auth = httpx.BasicAuth(client_id, secret.get_secret_value())
        self._form = {"grant_type": "client_credentials"}
        if security.sasl_oauthbearer_scope:
            self._form["scope"] = security.sasl_oauthbearer_scope
        self._secrets = security.secret_values()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cluster={self._cluster!r}, url={self._url!r})"

    def __call__(self) -> Token:
        issued = self._clock()
        try:
            response = httpx.post(self._url, data=self._form, auth=self._auth, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise self._failed(f"no answer from the token endpoint {self._url}: {exc}") from None
        if response.status_code != httpx.codes.OK:
            raise self._failed(
                f"the token endpoint {self._url} refused the client credentials: HTTP "
                f"{response.status_code} {_oauth_error(response)}"
            )
        try:
            body = response.json()
            value, lifetime = str(body["access_token"]), float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise self._failed(f"the token endpoint {self._url} answered without an access_token") from None
        return Token(value, issued + max(lifetime, _MIN_LIFETIME_SECONDS), issued)

    def _failed(self, problem: str) -> KafkaAuthenticationError:
        return KafkaAuthenticationError(
            f"cannot get an OAUTHBEARER token for cluster {self._cluster!r}: "
            f"{scrub(problem, self._secrets)}; "
            f"check clusters.{self._cluster}.security (token endpoint, client id and secret)"
        )


def _oauth_error(response: httpx.Response) -> str:
    """The `error` and `error_description` of an OAuth error answer (RFC 6749 5.2), if any."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    parts = [str(body[key])[:200] for key in ("error", "error_description") if body.get(key)]
    return "(" + ": ".join(parts) + ")" if parts else ""


class MskIamTokens:
    """`fetch` for `CachedTokens`: an MSK IAM token signed with the AWS credentials of `security`
    (the default chain, `aws_profile`, or `aws_role_arn` assumed through STS)."""

    def __init__(self, cluster: str, security: Security, clock: Callable[[], float] = time.time) -> None:
        if security.aws_region is None:
            raise ValueError("AWS_MSK_IAM needs aws_region")  # the settings model forbids it
        self._cluster, self._security, self._clock = cluster, security, clock
        self._region = security.aws_region

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cluster={self._cluster!r}, region={self._region!r})"

    def __call__(self) -> Token:
        # imported here: boto3, under it, takes longer to import than a daemon takes to start
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

        issued = self._clock()
        try:
            if self._security.aws_role_arn is not None:
                value, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_role_arn(
                    self._region, self._security.aws_role_arn, sts_session_name="kafka-health"
                )
            elif self._security.aws_profile is not None:
                value, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_profile(
                    self._region, self._security.aws_profile
                )
            else:
                value, expiry_ms = MSKAuthTokenProvider.generate_auth_token(self._region)
        except Exception as exc:  # botocore's errors (no credentials, STS refused, unknown profile)
            raise KafkaAuthenticationError(
                f"cannot sign an AWS MSK IAM token for cluster {self._cluster!r}: "
                f"{type(exc).__name__}: {exc}; check the AWS credentials and "
                f"clusters.{self._cluster}.security (aws_region, aws_profile, aws_role_arn)"
            ) from None
        return Token(str(value), int(expiry_ms) / 1000, issued)


def token_source(cluster: str, security: Security, timeout: float) -> CachedTokens | None:
    """The cached tokens of a cluster whose mechanism needs tokens from the monitor, else None.

    OAUTHBEARER tokens are fetched by the monitor for kafka-python only (librdkafka fetches its
    own); MSK IAM tokens are signed by the monitor for both clients."""
    if security.sasl_mechanism is SaslMechanism.OAUTHBEARER:
        return CachedTokens(ClientCredentialsTokens(cluster, security, timeout))
    if security.sasl_mechanism is SaslMechanism.AWS_MSK_IAM:
        return CachedTokens(MskIamTokens(cluster, security))
    return None


class KafkaPythonTokens(AbstractTokenProvider):  # type: ignore[misc]
    """kafka-python's `sasl_oauth_token_provider`: asked for a token at every (re-)authentication."""

    def __init__(self, tokens: CachedTokens) -> None:
        super().__init__()
        self.tokens = tokens

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.tokens!r})"

    def token(self) -> str:
        return self.tokens.current().value


def librdkafka_token_callback(tokens: CachedTokens) -> Callable[[str | None], tuple[str, float]]:
    """confluent-kafka's `oauth_cb`: (token, expiry in seconds since the epoch)."""

    def oauth_cb(_config: str | None) -> tuple[str, float]:
        token = tokens.current()
        return token.value, token.expires_at

    return oauth_cb
