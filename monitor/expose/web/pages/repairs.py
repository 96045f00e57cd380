"""The repair buttons of the alerts page: ask for a repair of the finding an alert shows, and
approve or reject a waiting one. Plain HTML forms through the alerts page's identity + CSRF guard
(`alerts._guarded`), carried out by `monitor.act.repairs` as the CLI and the JSON API do, and back
to the page with the outcome (or the refusal, with its reason) as a flash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from monitor.act.repair_request import Repair, RepairError
from monitor.act.repairs import KINDS, RepairService, open_finding_id
from monitor.alert.actions import ActionError
from monitor.core.identity import Identity
from monitor.expose.web.context import ApiError, Context, WebContext
from monitor.expose.web.identity import Auth
from monitor.expose.web.inputs import Id
from monitor.expose.web.pages.alerts import _form, _guarded

router = APIRouter(include_in_schema=False)


def _service(ctx: WebContext) -> RepairService:
    if ctx.repairs is None:
        raise ApiError(404, "not_found", "repair actions are not configured on this monitor")
    return ctx.repairs


def _done(action: Callable[[], Repair], said: Callable[[Repair], str]) -> str:
    try:
        return said(action())
    except RepairError as exc:
        raise ActionError(f"{exc.code}: {exc}") from exc


def _moves(repair: Repair) -> str:
    parts: list[dict[str, Any]] = repair.plan.get("partitions", [])
    shown = ", ".join(f"{m['topic']}:{m['partition']} {m['leader']}->{m['new_leader']}" for m in parts[:5])
    return shown + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")


@router.post("/alerts/repairs", response_model=None)
async def request_repair(ctx: Context, auth: Auth, request: Request) -> Response:
    form, _ = await _form(request)
    service = _service(ctx)

    def act(who: Identity) -> str:
        kind = form.get("kind", "")
        if kind not in KINDS:
            raise ActionError(f"choose a repair: one of {', '.join(KINDS)}")

        def ask() -> Repair:
            with ctx.engine.connect() as conn:
                finding_id = open_finding_id(conn, form.get("rule", ""), form.get("entity_key", ""))
            return service.request(who, finding_id, kind, form.get("reason", ""))

        return _done(
            ask, lambda r: f"Repair {r.id} ({kind}: {_moves(r)}) awaits a reviewer other than {who.user}."
        )

    return _guarded(ctx, auth, request, form, act)


@router.post("/alerts/repairs/{repair_id}/approve", response_model=None)
async def approve(ctx: Context, auth: Auth, request: Request, repair_id: Id) -> Response:
    form, _ = await _form(request)
    service = _service(ctx)

    def act(who: Identity) -> str:
        return _done(
            lambda: service.approve(who, repair_id, form.get("comment", "")),
            lambda r: (
                f"Repair {r.id} approved and {r.state}"
                + (f": {r.last_error}" if r.last_error else "")
                + ". Whether it helped shows after the next evaluation."
            ),
        )

    return _guarded(ctx, auth, request, form, act)


@router.post("/alerts/repairs/{repair_id}/reject", response_model=None)
async def reject(ctx: Context, auth: Auth, request: Request, repair_id: Id) -> Response:
    form, _ = await _form(request)
    service = _service(ctx)

    def act(who: Identity) -> str:
        return _done(
            lambda: service.reject(who, repair_id, form.get("reason", "")),
            lambda r: f"Repair {r.id} {r.state}.",
        )

    return _guarded(ctx, auth, request, form, act)
