"""Repair actions over HTTP: `/api/v1/repairs...`.

Reads are open like the rest of the API; every change names its identity and, from a browser,
carries a CSRF token (`identity.py`), exactly as the retention button's routes. What happens goes
through `monitor.act.repairs` (the service the CLI uses): the same guardrails, review rule and
audit everywhere. Errors as the retention routes': refused 422, unauthenticated 401, forbidden and
csrf_failed 403, not_found 404, conflict 409, unavailable 503, invalid 422.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from monitor.act import repair_request as store
from monitor.expose.web.api.retention import DecisionBody, act
from monitor.expose.web.context import CHANGE_ERRORS, ApiError, Context, Repairs, jsonable, post_only
from monitor.expose.web.identity import Changer
from monitor.expose.web.inputs import Id, JsonId, Limit, Text

Kind = Literal["preferred_election", "move_leadership"]


class RepairBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    finding_id: JsonId = Field(description="The finding to repair (findings.id).")
    kind: Kind
    reason: Text = Field(default="", max_length=2000)


class PreviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    finding_id: JsonId
    kind: Kind


router = APIRouter(tags=["repairs"], responses=CHANGE_ERRORS)


@router.get("/api/v1/repairs")
def list_repairs(
    ctx: Context, cluster: str | None = None, state: str | None = None, limit: Limit = 100
) -> list[dict[str, Any]]:
    """Repairs, newest first (optionally of one cluster or state)."""
    with ctx.engine.connect() as conn:
        rows = store.list_repairs(conn, cluster=cluster, states=[state] if state else None, limit=limit)
    return [r.as_json() for r in rows]


post_only(router, "/api/v1/repairs/preview")


@router.get("/api/v1/repairs/{repair_id}")
def show(ctx: Context, repair_id: Id) -> dict[str, Any]:
    """One repair: its plan (the reviewable diff), what applying did, its outcome and audit trail."""
    with ctx.engine.connect() as conn:
        try:
            repair = store.get(conn, repair_id)
        except store.RepairError as exc:
            raise ApiError(404, "not_found", str(exc)) from exc
        audit = store.audit_of(conn, repair_id)
    return {**repair.as_json(), "audit": [jsonable(a) for a in audit]}


@router.post("/api/v1/repairs/preview")
def preview(body: PreviewBody, who: Changer, service: Repairs) -> dict[str, Any]:
    """What the repair would change and what would refuse it now. Changes nothing."""
    return jsonable(act(lambda: service.preview(body.finding_id, body.kind)))


@router.post("/api/v1/repairs", status_code=201)
def request_repair(body: RepairBody, who: Changer, service: Repairs) -> dict[str, Any]:
    """Ask for a repair of a finding; it waits for a reviewer other than the requester."""
    return act(lambda: service.request(who, body.finding_id, body.kind, body.reason)).as_json()


@router.post("/api/v1/repairs/{repair_id}/approve")
def approve(repair_id: Id, body: DecisionBody, who: Changer, service: Repairs) -> dict[str, Any]:
    """Approve a waiting repair (a reviewer other than the requester); it is applied at once."""
    return act(lambda: service.approve(who, repair_id, body.reason)).as_json()


@router.post("/api/v1/repairs/{repair_id}/reject")
def reject(repair_id: Id, body: DecisionBody, who: Changer, service: Repairs) -> dict[str, Any]:
    """Reject a waiting repair (a reviewer), or withdraw one's own."""
    return act(lambda: service.reject(who, repair_id, body.reason)).as_json()
