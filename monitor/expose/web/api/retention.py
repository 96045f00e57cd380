"""The retention button over HTTP: `/api/v1/retention-requests...`.

Reads are open like the rest of the API; every change names its identity (`identity.py`: a
trusted proxy's headers, an API token, or the labelled development mode) and, from a browser,
a CSRF token. What happens goes through `monitor.act` (the same service the CLI uses), so the
guardrails, review rules and audit are the same everywhere.

Errors: `{"error": {"code", "message", "details"?}}` with refused 422 (every rule and its numbers
in details), unauthenticated 401, forbidden and csrf_failed 403, not_found 404, conflict 409,
unavailable 503, invalid 422.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from monitor.act import ledger
from monitor.act.model import RetentionError, request_json
from monitor.act.policy import bounded_long, parse_duration_ms, parse_size
from monitor.expose.web.context import CHANGE_ERRORS, ApiError, Context, Service, jsonable, post_only
from monitor.expose.web.identity import Changer
from monitor.expose.web.inputs import Id, Limit, Text

T = TypeVar("T")
_STATUS = {
    "refused": 422,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "unavailable": 503,
    "invalid": 422,
}


class RaiseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cluster: Text = Field(min_length=1, max_length=249)
    topic: Text = Field(min_length=1, max_length=249)
    retention_ms: int | Text | None = Field(default=None, description="New retention.ms: ms, or 2d, 36h ...")
    retention_bytes: int | Text | None = Field(
        default=None, description="New retention.bytes per partition: bytes, or 50GiB ..."
    )
    duration: Text = Field(
        max_length=40, description="How long the raise lasts before it reverts: 12h, 2d ..."
    )
    reason: Text = Field(default="", max_length=2000)

    @field_validator("retention_ms", "retention_bytes", mode="before")
    @classmethod
    def _number_or_text(cls, value: object) -> object:
        if isinstance(value, bool | float):  # pydantic would read `true` as 1 and 5.0 as 5
            raise ValueError(f"give a whole number or text such as 2d or 50GiB, not {value!r}")
        return value

    @field_validator("retention_ms", mode="after")
    @classmethod
    def _ms(cls, value: int | str | None) -> int | None:
        if value is None:
            return None
        return bounded_long(value, "retention_ms") if isinstance(value, int) else parse_duration_ms(value)

    @field_validator("retention_bytes", mode="after")
    @classmethod
    def _bytes(cls, value: int | str | None) -> int | None:
        return value if value is None else parse_size(value)

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

    reason: Text = Field(default="", max_length=2000)


class ExtendBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    duration: Text = Field(max_length=40)
    reason: Text = Field(min_length=1, max_length=2000)


router = APIRouter(tags=["retention"], responses=CHANGE_ERRORS)


@router.get("/api/v1/retention-requests")
def list_requests(
    ctx: Context,
    cluster: str | None = None,
    topic: str | None = None,
    state: str | None = None,
    limit: Limit = 100,
) -> list[dict[str, Any]]:
    """Requests, newest first (optionally of one cluster, topic or state)."""
    with ctx.engine.connect() as conn:
        rows = ledger.list_requests(
            conn, cluster=cluster, topic=topic, states=[state] if state else None, limit=limit
        )
    return [request_json(r) for r in rows]


post_only(router, "/api/v1/retention-requests/preview")


@router.get("/api/v1/retention-requests/{request_id}")
def show(ctx: Context, request_id: Id) -> dict[str, Any]:
    """One request with its audit trail."""
    with ctx.engine.connect() as conn:
        row = ledger.get(conn, request_id)
        if row is None:
            raise ApiError(404, "not_found", f"no retention request {request_id}")
        audit = ledger.audit_of(conn, request_id)
    return {**request_json(row), "audit": [jsonable(a) for a in audit]}


@router.post("/api/v1/retention-requests/preview")
def preview(body: RaiseBody, who: Changer, service: Service) -> dict[str, Any]:
    """What the request would do: current values, lagging groups, every rule and the disk cost.
    Changes nothing."""
    result = act(lambda: service.preview(who, body.cluster, body.topic, body.new(), body.duration_ms()))
    return jsonable(result)


@router.post("/api/v1/retention-requests", status_code=201)
def raise_retention(body: RaiseBody, who: Changer, service: Service) -> dict[str, Any]:
    """Ask for a raise: applied at once within the instant tier, else waiting for a reviewer."""
    return request_json(
        act(
            lambda: service.raise_retention(
                who, body.cluster, body.topic, body.new(), body.duration_ms(), body.reason
            )
        )
    )


@router.post("/api/v1/retention-requests/{request_id}/approve")
def approve(request_id: Id, body: DecisionBody, who: Changer, service: Service) -> dict[str, Any]:
    """Approve a waiting request, an instant raise's review, or an extension (a reviewer)."""
    return request_json(act(lambda: service.approve(who, request_id, body.reason)))


@router.post("/api/v1/retention-requests/{request_id}/reject")
def reject(request_id: Id, body: DecisionBody, who: Changer, service: Service) -> dict[str, Any]:
    """Reject (a reviewer; rolls an instant raise back), or withdraw one's own request."""
    return request_json(act(lambda: service.reject(who, request_id, body.reason)))


@router.post("/api/v1/retention-requests/{request_id}/revert")
def revert(request_id: Id, body: DecisionBody, who: Changer, service: Service) -> dict[str, Any]:
    """Restore the old values now (the owning team, or a reviewer)."""
    return request_json(act(lambda: service.revert(who, request_id, body.reason)))


@router.post("/api/v1/retention-requests/{request_id}/extend")
def extend(request_id: Id, body: ExtendBody, who: Changer, service: Service) -> dict[str, Any]:
    """Ask for more time (the owning team); a reviewer approves it."""
    duration = act(lambda: parse_duration_ms(body.duration))
    return request_json(act(lambda: service.extend(who, request_id, duration, body.reason)))


class DetailedApiError(ApiError):
    """An ApiError whose body also carries `details` (a refusal's rules and disk numbers)."""

    def __init__(self, status_code: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(status_code, code, message)
        self.details = details or None


def act(action: Callable[[], T]) -> T:
    """Run a change of the act stage, its errors answered as the API's."""
    try:
        return action()
    except RetentionError as exc:
        raise DetailedApiError(_STATUS[exc.code], exc.code, str(exc), exc.details) from exc
    except ValueError as exc:
        raise ApiError(422, "invalid", str(exc)) from exc
