"""The web application: pages rendered from `templates/web`, the JSON API, health checks and
`/metrics`. Each group of routes is a module with module-level route functions on its `router`;
this module composes them, keeps what they share on the app (`context.attach`,
`identity.attach`) and answers every API error as `{"error": {"code": ..., "message": ...}}`."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine
from sqlalchemy.exc import (
    DataError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path
from starlette.staticfiles import StaticFiles

from monitor import __version__
from monitor.act.repairs import RepairService
from monitor.act.service import RetentionService
from monitor.core.clock import Clock, SystemClock
from monitor.core.errors import StoreUnavailableError
from monitor.core.resources import templates_dir
from monitor.core.settings import MAX_SILENCES_PER_TEAM, IdentityConfig, MetricsConfig
from monitor.expose.metrics.snapshot import MetricsSnapshot
from monitor.expose.read import queries
from monitor.expose.web import inbox, security
from monitor.expose.web.api import alerts as api_alerts
from monitor.expose.web.api import burrow
from monitor.expose.web.api import clusters as api
from monitor.expose.web.api import repairs as api_repairs
from monitor.expose.web.api import retention as api_retention
from monitor.expose.web.api import share_groups as api_share_groups
from monitor.expose.web.context import POST_ONLY, ApiError, Context, WebContext, attach
from monitor.expose.web.health import RuleScale
from monitor.expose.web.identity import MODE_HEADER, Authenticator
from monitor.expose.web.identity import attach as identity_attach
from monitor.expose.web.identity import router as identity_router
from monitor.expose.web.inputs import guard_input
from monitor.expose.web.pages import alerts as pages_alerts
from monitor.expose.web.pages import collection as pages_collection
from monitor.expose.web.pages import dashboard as pages
from monitor.expose.web.pages import entities as pages_entities
from monitor.expose.web.pages import group as pages_group
from monitor.expose.web.pages import repairs as pages_repairs
from monitor.expose.web.pages import retention as pages_retention
from monitor.expose.web.pages import share_groups as pages_share_groups
from monitor.expose.web.pages import topic as pages_topic

log = logging.getLogger(__name__)
_MAX_DETAIL = 200
_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    503: "unavailable",
}


def create_app(
    engine: Engine,
    *,
    stale_after: timedelta,
    clock: Clock | None = None,
    silence_max_seconds: int = 7 * 86400,
    max_silences_per_team: int = MAX_SILENCES_PER_TEAM,
    metrics: MetricsConfig | None = None,
    snapshot: MetricsSnapshot | None = None,
    retention: RetentionService | None = None,
    repairs: RepairService | None = None,
    identity: IdentityConfig | None = None,
    job_intervals: Mapping[str, float] | None = None,
    inboxes: Mapping[str, Path] | None = None,
    ack_link_seconds: float = 7 * 86400,
    rules_dir: Path | None = None,
    hsts: bool = False,
) -> FastAPI:
    """Build the FastAPI app over `engine`. `/readyz` fails when no collection succeeded within
    `stale_after`; `/metrics` serves `snapshot` (the daemon's, shared with the push targets),
    or one of its own over `engine` built as `metrics` says (default: the settings' defaults);
    `job_intervals` (`monitor.core.scheduler.run_intervals`) says when a job's last success is stale;
    `inboxes` (`inbox.inbox_paths`): the console receivers' files the inbox page reads;
    `rules_dir` (`evaluate.rules_dir`): the rule files whose TimeUntilDataLoss tiers colour the
    data-loss margin (default: the shipped rules); `hsts`: the monitor is reached over HTTPS
    (`web.behind_tls`), so answers carry Strict-Transport-Security."""
    clock = clock or SystemClock()
    auth = Authenticator(identity or IdentityConfig(), engine, clock)
    ctx = WebContext(
        engine,
        clock,
        stale_after,
        silence_max_seconds,
        max_silences_per_team,
        inbox_nav=bool(inboxes),
        ack_link_seconds=ack_link_seconds,
        retention=retention,
        repairs=repairs,
        job_intervals=job_intervals,
        inboxes=inboxes or {},
        metrics=snapshot or MetricsSnapshot(lambda: engine, metrics or MetricsConfig()),
        data_loss=RuleScale(rules_dir),
    )
    app = FastAPI(title="kafka-health", version=__version__, docs_url=None, redoc_url=None)
    app.mount("/static", StaticFiles(directory=templates_dir() / "static"), name="static")
    _error_handlers(app)
    guard_input(app)
    if auth.development:
        _label_development(app)
    if auth.config.protect_reads:
        _protect_reads(app, auth)
    identity_attach(app, auth)
    app.include_router(router)
    api.install(app)
    app.include_router(api_share_groups.router)
    app.openapi_tags = [*(app.openapi_tags or []), api_share_groups.TAG]
    app.include_router(burrow.router)
    app.include_router(api_alerts.router)
    app.include_router(identity_router)
    if retention is not None:  # the retention button's API and pages; `identity` says who may press it
        app.include_router(api_retention.router)
        ctx = replace(ctx, topic_panel=pages_retention.install(app, retention, auth))
    if repairs is not None:  # the repair actions' API, and their buttons on the alerts page
        app.include_router(api_repairs.router)
        app.include_router(pages_repairs.router)
    app.include_router(pages.router)
    app.include_router(pages_topic.router)
    app.include_router(pages_group.router)
    app.include_router(pages_entities.router)
    app.include_router(pages_share_groups.router)
    app.include_router(pages_alerts.router)
    app.include_router(pages_collection.router)
    app.include_router(inbox.router)
    attach(app, ctx)
    security.install(app, hsts=hsts)  # last, so outermost: its headers are on every answer
    return app


router = APIRouter()
"""Health checks and /metrics."""


@router.get("/healthz", tags=["health"])
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    tags=["health"],
    response_model=None,
    responses={
        503: {
            "description": "Not ready: the database does not answer, or no collection "
            "succeeded recently (a readiness probe's answer, not a fault)."
        }
    },
)
def readyz(ctx: Context) -> JSONResponse:
    """Readiness: PostgreSQL answers and a collection succeeded recently."""
    now = ctx.clock.now()
    try:
        with ctx.engine.connect() as conn:
            newest = queries.newest_successful_run(conn)
    except SQLAlchemyError:
        return JSONResponse({"status": "unavailable", "reason": "database unreachable"}, 503)
    if newest is None or now - newest > ctx.stale_after:
        age = "never" if newest is None else f"{(now - newest).total_seconds():.0f}s ago"
        return JSONResponse({"status": "stale", "last_successful_collection": age}, 503)
    return JSONResponse({"status": "ready", "last_successful_collection": newest.isoformat()})


@router.get("/metrics", include_in_schema=False)
def prometheus_metrics(request: Request, ctx: Context) -> Response:
    """Prometheus text format, gzip-encoded when the scraper accepts it: the snapshot of every
    cluster's state built at its latest evaluation, and the process's own counters (catalogue:
    docs/metrics.md). Always 200: a database that does not answer shows as `kafka_health_up 0`
    beside the last good snapshot."""
    gzip = _accepts_gzip(request.headers.get("accept-encoding", ""))
    body = ctx.metrics.body(gzip=gzip)
    headers = {"Vary": "Accept-Encoding"} | ({"Content-Encoding": "gzip"} if gzip else {})
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers=headers)


def _accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header lists gzip with a non-zero quality."""
    for part in accept_encoding.split(","):
        coding, _, params = part.partition(";")
        if coding.strip().lower() != "gzip":
            continue
        quality = params.strip().removeprefix("q=").strip()
        try:
            return not quality or float(quality) > 0
        except ValueError:
            return True
    return False


OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""What answers without an identity when `web.identity.protect_reads` is on: probes and scrapers."""


def _protect_reads(app: FastAPI, auth: Authenticator) -> None:
    """Every request but `OPEN_PATHS` needs an identity (changes need one anyway)."""

    @app.middleware("http")
    async def identified(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.url.path not in OPEN_PATHS:
            try:
                auth.require(request)
            except ApiError as exc:
                return _error(exc.status_code, exc.code, str(exc.detail))
        return await call_next(request)


def _label_development(app: FastAPI) -> None:
    """In development mode every answer says so (nobody signs in: everyone is the same user)."""

    @app.middleware("http")
    async def label(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers[MODE_HEADER] = "development"
        return response


def _error_handlers(app: FastAPI) -> None:
    """API errors as JSON with a stable code; pages keep their own HTML error bodies."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        answer = _error(exc.status_code, exc.code, str(exc.detail), getattr(exc, "details", None))
        answer.headers.update(exc.headers or {})
        return answer

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _CODES.get(exc.status_code, f"http_{exc.status_code}")
        answer = _error(exc.status_code, code, str(exc.detail))
        answer.headers.update(exc.headers or {})
        allowed = _allowed(request) if exc.status_code == 405 else []
        if allowed:  # every method of the path, not only its first route's
            answer.headers["Allow"] = ", ".join(allowed)
        return answer

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg', 'invalid')}"
            for error in exc.errors()
        )
        return _error(422, "invalid_parameter", problems or "invalid request", details=exc.errors())

    @app.exception_handler(SQLAlchemyError)
    async def database_error(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        return database_answer(exc)

    @app.exception_handler(StoreUnavailableError)
    async def database_away(request: Request, exc: StoreUnavailableError) -> JSONResponse:
        """No connection to PostgreSQL (`store.engine` names the server in the log, not here)."""
        log.warning("answering 503: %s", exc)
        return _unavailable()


def _allowed(request: Request) -> list[str]:
    """The methods the routes of `request`'s path take (a path may have a route per method); a
    path written out (`/api/v1/repairs/preview`) is not also the id of `/api/v1/repairs/{id}`."""
    literal: set[str] = set()
    templated: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        if route.name == POST_ONLY or not (route.methods and route.path):
            continue
        if compile_path(route.path)[0].match(request.url.path):
            (templated if "{" in route.path else literal).update(route.methods)
    return sorted(literal or templated)


def database_answer(exc: SQLAlchemyError) -> JSONResponse:
    """A database error as the client should hear it: a value the database refused is the
    request's fault (400, saying which), a conflict is 409, and only a database that does not
    answer is 503. Anything else is a fault of ours: 500, logged with its traceback."""
    if isinstance(exc, DataError):
        return _error(
            400, "invalid_value", f"a value in the request is out of range or invalid: {_primary(exc)}"
        )
    if isinstance(exc, IntegrityError):
        return _error(409, "conflict", f"the change conflicts with what is stored: {_primary(exc)}")
    if isinstance(exc, OperationalError | InterfaceError | DisconnectionError | PoolTimeout):
        return _unavailable()
    log.error("database error answering a request", exc_info=exc)
    return _error(500, "internal_error", "an internal error; it is logged")


def _unavailable() -> JSONResponse:
    return _error(503, "database_unavailable", "PostgreSQL did not answer; try again shortly")


def _primary(exc: SQLAlchemyError) -> str:
    """The database's one-line reason (never the statement or its parameters)."""
    diag = getattr(getattr(exc, "orig", None), "diag", None)
    text = getattr(diag, "message_primary", None) or str(getattr(exc, "orig", exc)).splitlines()[0]
    return str(_plain(str(text)[:300]))


def _error(status: int, code: str, message: str, details: Any = None) -> JSONResponse:
    body: dict[str, Any] = {"error": {"code": code, "message": _plain(message)}}
    if details is not None:
        body["error"]["details"] = _plain(details)
    return JSONResponse(body, status_code=status)


def _plain(value: Any) -> Any:
    """Validation details as JSON can carry them: no raw input objects, no NaN or infinities (JSON
    has none), no lone surrogates (UTF-8 has none), and no input longer than a line."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "ctx"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bool | int | float | type(None)):
        return value
    text = value if isinstance(value, str) else repr(value)
    if len(text) > _MAX_DETAIL:
        text = text[:_MAX_DETAIL] + "..."
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
