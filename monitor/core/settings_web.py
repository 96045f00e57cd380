"""The settings of the web UI and API (`web:` of monitor.yaml): its address, and who may change
what (`web.identity`: the proxy, API tokens, CSRF, the limit on changes). The settings model is
`monitor.core.settings`."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import (
    Field,
    SecretStr,
    field_validator,
)

from monitor.core.settings_base import Strict


class IdentityConfig(Strict):
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


class WebConfig(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, gt=0, lt=65536)
    identity: IdentityConfig = Field(default_factory=IdentityConfig)
    behind_tls: bool = Field(
        default=False,
        description="People reach the monitor over HTTPS (a TLS-terminating proxy in front): every "
        "answer then carries Strict-Transport-Security.",
    )
