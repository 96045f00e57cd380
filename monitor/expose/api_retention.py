"""The retention button over HTTP: `/api/v1/retention-requests...`.

Reads are open like the rest of the API; every change names its identity (`identity.py`: a
trusted proxy's headers, an API token, or the labelled development mode) and, from a browser,
a CSRF token. What happens goes through `monitor.act` (the same service the CLI uses), so the
guardrails, review rules and audit are the same everywhere.

Errors: `{"error": {"code", "message", "details"?}}` with refused 422 (every rule and its numbers
in details), unauthenticated 401, forbidden and csrf_failed 403, not_found 404, conflict 409,
unavailable 503, invalid 400.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from monitor.act import ledger
from monitor.act.model import Identity, RetentionError, request_json
from monitor.act.policy import parse_duration_ms, parse_size
from monitor.act.service import RetentionService
from monitor.config import IdentityConfig
from monitor.expose.context import ApiError, WebContext, jsonable
from monitor.expose.identity import MODE_HEADER, Authenticator, dependency

T = TypeVar("T")
_STATUS = {
    "refused": 422,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "unavailable": 503,
    "invalid": 400,
}


class RaiseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1)
    topic: str = Field(min_length=1)
    retention_ms: int | str | None = Field(default=None, description="New retention.ms: ms, or 2d, 36h ...")
    retention_bytes: int | str | None = Field(
        default=None, description="New retention.bytes per partition: bytes, or 50GiB ..."
    )
    duration: str = Field(description="How long the raise lasts before it reverts: 12h, 2d ...")
    reason: str = Field(default="", max_length=2000)

    @field_validator("retention_ms", mode="after")
    @classmethod
    def _ms(cls, value: int | str | None) -> int | None:
        return value if value is None or isinstance(value, int) else parse_duration_ms(value)

    @field_validator("retention_bytes", mode="after")
    @classmethod
    def _bytes(cls, value: int | str | None) -> int | None:
        return value if value is None or isinstance(value, int) else parse_size(value)

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration_ms(value)
        return value

    @model_validator(mode="after")
    def _something(self) -> RaiseBody:
        if self.retention_ms is None and self.retention_bytes is None:
            raise ValueError("give retention_ms and/or retention_bytes")
        return self

    def new(self) -> dict[str, int]:
        values = {"retention.ms": self.retention_ms, "retention.bytes": self.retention_bytes}
        return {k: int(v) for k, v in values.items() if v is not None}

    def duration_ms(self) -> int:
        return parse_duration_ms(self.duration)


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=2000)


class ExtendBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    duration: str
    reason: str = Field(min_length=1, max_length=2000)


def router(ctx: WebContext, service: RetentionService, auth: Authenticator) -> APIRouter:
    api = APIRouter(tags=["retention"])
    engine = ctx.engine
    changer = dependency(auth)
    who_changes = Depends(changer)

    @api.get("/api/v1/whoami")
    def whoami(request: Request) -> JSONResponse:
        """Who the request is, and whether the development mode is on."""
        who = auth.identify(request)
        body = {"user": who.user, "teams": sorted(who.teams), "source": who.source} if who else None
        return _labelled(auth, {"identity": body, "development": auth.development})

    @api.get("/api/v1/csrf-token")
    def csrf_token(request: Request) -> JSONResponse:
        """A CSRF token for the signed-in user, to send in X-CSRF-Token with every change."""
        who = auth.require(request)
        return _labelled(auth, {"token": auth.csrf_token(who), "user": who.user})

    @api.get("/api/v1/retention-requests")
    def list_requests(
        cluster: str | None = None, topic: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Requests, newest first (optionally of one cluster, topic or state)."""
        with engine.connect() as conn:
            rows = ledger.list_requests(
                conn, cluster=cluster, topic=topic, states=[state] if state else None, limit=min(limit, 1000)
            )
        return [request_json(r) for r in rows]

    @api.get("/api/v1/retention-requests/{request_id}")
    def show(request_id: int) -> dict[str, Any]:
        """One request with its audit trail."""
        with engine.connect() as conn:
            row = ledger.get(conn, request_id)
            if row is None:
                raise ApiError(404, "not_found", f"no retention request {request_id}")
            audit = ledger.audit_of(conn, request_id)
        return {**request_json(row), "audit": [jsonable(a) for a in audit]}

    @api.post("/api/v1/retention-requests/preview")
    def preview(body: RaiseBody, who: Identity = who_changes) -> dict[str, Any]:
        """What the request would do: current values, lagging groups, every rule and the disk cost.
        Changes nothing."""
        result = _act(lambda: service.preview(who, body.cluster, body.topic, body.new(), body.duration_ms()))
        return jsonable(result)

    @api.post("/api/v1/retention-requests", status_code=201)
    def raise_retention(body: RaiseBody, who: Identity = who_changes) -> dict[str, Any]:
        """Ask for a raise: applied at once within the instant tier, else waiting for a reviewer."""
        return request_json(
            _act(
                lambda: service.raise_retention(
                    who, body.cluster, body.topic, body.new(), body.duration_ms(), body.reason
                )
            )
        )

    @api.post("/api/v1/retention-requests/{request_id}/approve")
    def approve(request_id: int, body: DecisionBody, who: Identity = who_changes) -> dict[str, Any]:
        """Approve a waiting request, an instant raise's review, or an extension (a reviewer)."""
        return request_json(_act(lambda: service.approve(who, request_id, body.reason)))

    @api.post("/api/v1/retention-requests/{request_id}/reject")
    def reject(request_id: int, body: DecisionBody, who: Identity = who_changes) -> dict[str, Any]:
        """Reject (a reviewer; rolls an instant raise back), or withdraw one's own request."""
        return request_json(_act(lambda: service.reject(who, request_id, body.reason)))

    @api.post("/api/v1/retention-requests/{request_id}/revert")
    def revert(request_id: int, body: DecisionBody, who: Identity = who_changes) -> dict[str, Any]:
        """Restore the old values now (the owning team, or a reviewer)."""
        return request_json(_act(lambda: service.revert(who, request_id, body.reason)))

    @api.post("/api/v1/retention-requests/{request_id}/extend")
    def extend(request_id: int, body: ExtendBody, who: Identity = who_changes) -> dict[str, Any]:
        """Ask for more time (the owning team); a reviewer approves it."""
        duration = _act(lambda: parse_duration_ms(body.duration))
        return request_json(_act(lambda: service.extend(who, request_id, duration, body.reason)))

    return api


def _labelled(auth: Authenticator, body: dict[str, Any]) -> JSONResponse:
    response = JSONResponse(body)
    if auth.development:
        response.headers[MODE_HEADER] = "development"
    return response


class DetailedApiError(ApiError):
    """An ApiError whose body also carries `details` (a refusal's rules and disk numbers)."""

    def __init__(self, status_code: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(status_code, code, message)
        self.details = details or None


def _act(action: Callable[[], T]) -> T:
    try:
        return action()
    except RetentionError as exc:
        raise DetailedApiError(_STATUS[exc.code], exc.code, str(exc), exc.details) from exc
    except ValueError as exc:
        raise ApiError(400, "invalid", str(exc)) from exc


def install(
    app: FastAPI, ctx: WebContext, service: RetentionService, config: IdentityConfig
) -> Authenticator:
    """Add the retention routes to `app`; in development mode, every answer is labelled so."""
    auth = Authenticator(config, ctx.engine, ctx.clock)
    app.include_router(router(ctx, service, auth))
    if auth.development:

        @app.middleware("http")
        async def label(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            response = await call_next(request)
            response.headers[MODE_HEADER] = "development"
            return response

    return auth
