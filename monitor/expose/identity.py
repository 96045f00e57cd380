"""Who is asking: the identity behind a web or API request that changes something, and CSRF.

Never anonymous. In order:

1. `Authorization: Bearer <token>`: an API token (`kafka-health retention token create`), looked
   up by its SHA-256. A token that is unknown, revoked or expired is refused, never ignored.
2. Development mode (`web.identity.mode: development`): everyone is the configured development
   user. For the demo only; every answer carries `X-Kafka-Health-Identity: development` and the
   pages say so.
3. Proxy mode: the user and groups headers of a trusted reverse proxy. Headers from any address
   not in `trusted_proxies` are ignored (anyone can send a header; only the proxy's are believed).

CSRF: a request authenticated by the browser's session (proxy headers, development mode) must
carry a token signed for that user (`X-CSRF-Token` header or `csrf_token` form field), which the
page gets from `GET /api/v1/csrf-token`; a page on another site cannot read it, so it cannot make
a logged-in browser submit a change. Bearer-token requests need none: a browser never adds that
header by itself. Tokens never reach a log line.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Callable

from fastapi import Request
from sqlalchemy import Engine

from monitor.act.model import Identity
from monitor.act.tokens import find_token
from monitor.clock import Clock
from monitor.config import IdentityConfig
from monitor.expose.context import ApiError

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
CSRF_MAX_AGE_SECONDS = 12 * 3600
MODE_HEADER = "X-Kafka-Health-Identity"


class Authenticator:
    def __init__(self, config: IdentityConfig, engine: Engine, clock: Clock) -> None:
        self.config = config
        self._engine = engine
        self._clock = clock
        self._networks = [ipaddress.ip_network(n, strict=False) for n in config.trusted_proxies]
        secret = config.csrf_secret.get_secret_value() if config.csrf_secret else secrets.token_hex(32)
        self._secret = secret.encode("utf-8")

    @property
    def development(self) -> bool:
        return self.config.mode == "development"

    def identify(self, request: Request) -> Identity | None:
        """The identity of `request`, None when it has none. Raises ApiError 401 for a bad token."""
        authorization = request.headers.get("authorization", "")
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ApiError(401, "unauthenticated", "Authorization must be `Bearer <API token>`")
            with self._engine.connect() as conn:
                owner = find_token(conn, token.strip(), self._clock.now())
            if owner is None:
                raise ApiError(
                    401,
                    "unauthenticated",
                    "the API token is unknown, revoked or expired; create one with "
                    "`kafka-health retention token create`",
                )
            return Identity(owner.user, owner.teams, "token")
        if self.development:
            return Identity(
                self.config.development_user, frozenset(self.config.development_teams), "development"
            )
        user = request.headers.get(self.config.user_header, "").strip()
        if user and self._from_trusted_proxy(request):
            raw = request.headers.get(self.config.groups_header, "")
            teams = frozenset(t.strip() for t in raw.split(self.config.groups_separator) if t.strip())
            return Identity(user, teams, "proxy")
        return None

    def require(self, request: Request) -> Identity:
        """The identity, or ApiError 401 saying how to get one."""
        who = self.identify(request)
        if who is None:
            raise ApiError(
                401,
                "unauthenticated",
                "changes need an identity: sign in through the reverse proxy (its headers are trusted "
                "only from web.identity.trusted_proxies) or send `Authorization: Bearer <API token>`",
            )
        return who

    def _from_trusted_proxy(self, request: Request) -> bool:
        host = request.client.host if request.client else None
        try:
            address = ipaddress.ip_address(host) if host else None
        except ValueError:
            return False
        return address is not None and any(address in network for network in self._networks)

    # -- CSRF -----------------------------------------------------------------------------------

    def csrf_token(self, who: Identity, now: float | None = None) -> str:
        stamp = str(int(now if now is not None else time.time()))
        return f"{stamp}.{self._sign(who.user, stamp)}"

    def check_csrf(self, request: Request, who: Identity, form_token: str | None = None) -> None:
        """Raise ApiError 403 unless the request carries a valid CSRF token for `who`."""
        if who.source == "token":
            return
        token = form_token or request.headers.get(CSRF_HEADER, "")
        stamp, _, signature = token.partition(".")
        fresh = stamp.isdigit() and 0 <= time.time() - int(stamp) <= CSRF_MAX_AGE_SECONDS
        if not (fresh and hmac.compare_digest(signature, self._sign(who.user, stamp))):
            raise ApiError(
                403,
                "csrf_failed",
                f"missing or invalid CSRF token: reload the page, or send the token from "
                f"GET /api/v1/csrf-token in the {CSRF_HEADER} header",
            )

    def _sign(self, user: str, stamp: str) -> str:
        return hmac.new(self._secret, f"{user}|{stamp}".encode(), hashlib.sha256).hexdigest()


def dependency(auth: Authenticator) -> Callable[[Request], Identity]:
    """A FastAPI dependency giving the identity of a request that changes something (CSRF checked)."""

    def identity(request: Request) -> Identity:
        who = auth.require(request)
        auth.check_csrf(request, who)
        return who

    return identity
