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
a logged-in browser submit a change. Besides the token, what the browser says about where the
request comes from is checked: `Sec-Fetch-Site` must be `same-origin` (or `none`, typed by the
user) and `Origin`, when sent, must be this site (its Host, or `allowed_origins`). Bearer-token
requests need none of this: a browser never adds that header by itself. Tokens never reach a log
line.

Every change, whatever the stage that carries it out (retention, silences, acknowledgements),
goes through `Authenticator.require` + `check_csrf` (`dependency` for the JSON API, `form_changer`
for HTML forms); the stage's own authorization rule decides what the identity may do and writes
the audit entry.

The client address the proxy check uses is the TCP peer's: the web server is run without its own
X-Forwarded-For handling (`server.WebServer`), so a proxy on the same host is seen as itself. The
address the audit records is the right-most X-Forwarded-For entry that is not a trusted proxy, or
none (`forwarded.client_address`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Mapping
from typing import Annotated, TypeVar, cast
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import Engine

from monitor.act.tokens import find_token
from monitor.core.clock import Clock
from monitor.core.identity import Identity
from monitor.core.settings import IdentityConfig
from monitor.core.user_input import BIGINT_MAX, whole_number
from monitor.expose.web.context import CHANGE_ERRORS, ApiError
from monitor.expose.web.forwarded import client_address, peer_address, trusted
from monitor.expose.web.throttle import ChangeLimiter

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
        self._origins = {_netloc(origin) for origin in config.allowed_origins}
        self.platform_teams = frozenset(config.platform_teams)
        self._changes = ChangeLimiter(config.change_requests_per_minute)
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
            return Identity(owner.user, owner.teams, "token", self.address(request))
        if self.development:
            return Identity(
                self.config.development_user,
                frozenset(self.config.development_teams),
                "development",
                self.address(request),
            )
        user = request.headers.get(self.config.user_header, "").strip()
        if user and self._from_trusted_proxy(request):
            raw = request.headers.get(self.config.groups_header, "")
            teams = frozenset(t.strip() for t in raw.split(self.config.groups_separator) if t.strip())
            return Identity(user, teams, "proxy", self.address(request))
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

    def address(self, request: Request) -> str:
        """Where `request` comes from, for the audit: the client's IP address or "" (see
        `forwarded.client_address`)."""
        return client_address(request, self._networks)

    def admit(self, who: Identity) -> None:
        """Count a change `who` asks for; ApiError 429 with Retry-After past the limit (`throttle`)."""
        wait = self._changes.retry_after(who)
        if wait is not None:
            raise ApiError(
                429,
                "rate_limited",
                f"{who.user} asked for more than {self._changes.per_minute} changes in a minute "
                f"(web.identity.change_requests_per_minute); ask again in {wait} s",
                headers={"Retry-After": str(wait)},
            )

    def _from_trusted_proxy(self, request: Request) -> bool:
        return trusted(peer_address(request), self._networks)

    # -- CSRF -----------------------------------------------------------------------------------

    def csrf_token(self, who: Identity, now: float | None = None) -> str:
        stamp = str(int(now if now is not None else time.time()))
        return f"{stamp}.{self._sign(who.user, stamp)}"

    def check_csrf(self, request: Request, who: Identity, form_token: str | None = None) -> None:
        """Raise ApiError 403 unless the request comes from this site's own pages: a valid CSRF
        token for `who`, and no browser header saying it comes from another site."""
        if who.source == "token":
            return
        site = request.headers.get("sec-fetch-site", "")
        if site and site not in ("same-origin", "none"):
            raise ApiError(
                403,
                "csrf_failed",
                f"refused a {site} request: changes are accepted only from this site's own pages",
            )
        origin = request.headers.get("origin")
        if origin is not None and not self._own_origin(request, origin):
            raise ApiError(
                403,
                "csrf_failed",
                "refused a request from another origin: changes are accepted only from this site's own "
                "pages (set web.identity.allowed_origins to the public address if a proxy rewrites Host)",
            )
        token = form_token or request.headers.get(CSRF_HEADER, "")
        stamp, _, signature = token.partition(".")
        if not (_fresh(stamp) and hmac.compare_digest(signature, self._sign(who.user, stamp))):
            raise ApiError(
                403,
                "csrf_failed",
                f"missing or invalid CSRF token: reload the page, or send the token from "
                f"GET /api/v1/csrf-token in the {CSRF_HEADER} header",
            )

    def _own_origin(self, request: Request, origin: str) -> bool:
        netloc = _netloc(origin)
        if not netloc:  # "null": a sandboxed frame, a cross-site redirect, a file
            return False
        own = {request.headers.get("host", "").lower()}
        if self._from_trusted_proxy(request):
            own.add(request.headers.get("x-forwarded-host", "").split(",")[0].strip().lower())
        return netloc in own or netloc in self._origins

    def form_changer(self, request: Request, form: dict[str, str]) -> Identity:
        """The identity behind a form post, its CSRF token and origin checked; FormRefused says why
        not, in words for the page."""
        try:
            who = self.identify(request)
        except ApiError as exc:
            raise FormRefused(401, "Sign in first", str(exc.detail)) from exc
        if who is None:
            raise FormRefused(401, "Sign in first", f"Changes need an identity: {SIGN_IN}.")
        try:
            self.check_csrf(request, who, form.get(CSRF_FIELD, ""))
        except ApiError as exc:
            origin = str(exc.detail).startswith("refused")  # another site, not a stale token
            reason = exc.detail if origin else "the form's CSRF token is missing or invalid"
            raise FormRefused(
                403,
                "Form expired or forged",
                f"Refused: {reason}, so nothing was changed. Reload the page and submit the form again.",
            ) from exc
        try:
            self.admit(who)
        except ApiError as exc:
            raise FormRefused(
                429, "Too many changes", f"Nothing was changed: {exc.detail}.", exc.headers
            ) from exc
        return who

    def _sign(self, user: str, stamp: str) -> str:
        return hmac.new(self._secret, f"{user}|{stamp}".encode(), hashlib.sha256).hexdigest()


SIGN_IN = (
    "sign in through the reverse proxy in front of kafka-health (its user and groups headers are trusted "
    "only from web.identity.trusted_proxies)"
)


_Page = TypeVar("_Page", bound=Response)


class FormRefused(Exception):
    """A form post refused before anything changed: the status, the words for the error page and
    the headers to send with it (`Retry-After`)."""

    def __init__(
        self, status: int, title: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.title = status, title
        self.headers = dict(headers or {})

    def page(self, page: _Page) -> _Page:
        """`page` (the error page that says so) answered with this refusal's status and headers."""
        page.status_code = self.status
        page.headers.update(self.headers)
        return page


def _fresh(stamp: str) -> bool:
    """Whether a CSRF token's stamp is a time (ASCII digits, bounded) within its maximum age."""
    try:
        issued = whole_number(stamp, "the CSRF token's time", high=BIGINT_MAX)
    except ValueError:
        return False
    return 0 <= time.time() - issued <= CSRF_MAX_AGE_SECONDS


def _netloc(origin: str) -> str:
    try:
        return urlsplit(origin.strip()).netloc.lower()
    except ValueError:
        return ""


def attach(app: FastAPI, auth: Authenticator) -> None:
    """Keep `auth` on `app` for the routes' `Auth` and `Changer` parameters."""
    app.state.authenticator = auth


async def authenticator(request: Request) -> Authenticator:
    """The `Authenticator` of the app serving `request` (see `attach`)."""
    return cast(Authenticator, request.app.state.authenticator)


Auth = Annotated[Authenticator, Depends(authenticator)]
"""A route's parameter for the app's `Authenticator`."""


def changer(request: Request, auth: Auth) -> Identity:
    """The identity of a request that changes something (CSRF checked); a FastAPI dependency."""
    who = auth.require(request)
    auth.check_csrf(request, who)
    auth.admit(who)
    return who


Changer = Annotated[Identity, Depends(changer)]
"""A route's parameter for who asks for a change."""


router = APIRouter(tags=["identity"], responses=CHANGE_ERRORS)
"""Who am I, and a CSRF token for the signed-in user."""


@router.get("/api/v1/whoami")
def whoami(request: Request, auth: Auth) -> dict[str, object]:
    """Who the request is, and whether the development mode is on."""
    who = auth.identify(request)
    body = {"user": who.user, "teams": sorted(who.teams), "source": who.source} if who else None
    platform = who is not None and bool(auth.platform_teams & who.teams)
    return {"identity": body, "platform_role": platform, "development": auth.development}


@router.get("/api/v1/csrf-token")
def csrf_token(request: Request, auth: Auth) -> dict[str, str]:
    """A CSRF token for the signed-in user, to send in X-CSRF-Token with every change."""
    who = auth.require(request)
    return {"token": auth.csrf_token(who), "user": who.user}
