"""Alerts over HTTP: open alerts and incidents, acknowledgements (the API and the link in a
notification), silences. What people do goes through `monitor.alert.actions`, as on the CLI."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from fastapi import APIRouter, Form
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from monitor.alert import actions
from monitor.expose.context import ApiError, WebContext, jsonable

T = TypeVar("T")


class AckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    by: str = Field(min_length=1, max_length=200, description="Who acknowledges.")
    comment: str = Field(default="", max_length=2000)


class SilenceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    matchers: list[str] = Field(min_length=1, description="label=value, label!=value, label=~re, label!~re")
    duration_seconds: int = Field(gt=0, description="How long the silence lasts.")
    starts_at: datetime | None = Field(
        default=None, description="When it starts (ISO 8601 with offset); default now."
    )
    created_by: str = Field(min_length=1, max_length=200)
    comment: str = Field(min_length=1, max_length=2000)


def router(ctx: WebContext) -> APIRouter:
    api = APIRouter()
    engine, clock = ctx.engine, ctx.clock

    @api.get("/api/v1/alerts", tags=["alerts"])
    def alerts() -> list[dict[str, Any]]:
        """Open alerts, most severe first; muted ones name their silence or inhibiting alert."""
        with engine.connect() as conn:
            return [jsonable(row) for row in actions.open_alerts(conn)]

    @api.get("/api/v1/incidents", tags=["alerts"])
    def incidents() -> list[dict[str, Any]]:
        """Open notification groups per receiver, with acknowledgement and escalation."""
        with engine.connect() as conn:
            return [jsonable(row) for row in actions.open_incidents(conn)]

    @api.post("/api/v1/incidents/{incident_id}/ack", tags=["alerts"])
    def ack_incident(incident_id: int, body: AckRequest) -> dict[str, Any]:
        """Acknowledge an incident: no repeats, no escalation; its receivers are told once."""
        with engine.begin() as conn:
            ids = _act(
                lambda: actions.acknowledge(
                    conn, by=body.by, comment=body.comment, now=clock.now(), group_id=incident_id, via="api"
                )
            )
        return {"acknowledged": ids}

    @api.get("/ack/{token}", response_class=HTMLResponse, include_in_schema=False)
    def ack_page(token: str) -> HTMLResponse:
        """The link in a notification: a page that asks who acknowledges (a GET changes nothing)."""
        return ctx.render("web/ack.html", title="Acknowledge", token=token, done=None, error=None)

    @api.post("/ack/{token}", response_class=HTMLResponse, include_in_schema=False)
    def ack_link(token: str, by: str = Form(""), comment: str = Form("")) -> HTMLResponse:
        try:
            with engine.begin() as conn:
                ids = actions.acknowledge(
                    conn, by=by, comment=comment, now=clock.now(), token=token, via="link"
                )
        except actions.ActionError as exc:
            page = ctx.render("web/ack.html", title="Acknowledge", token=token, done=None, error=str(exc))
            page.status_code = 404 if "no open incident" in str(exc) else 400
            return page
        return ctx.render("web/ack.html", title="Acknowledged", token=token, done=ids, error=None)

    @api.get("/api/v1/silences", tags=["alerts"])
    def silences(all: bool = False) -> list[dict[str, Any]]:
        """Silences with who made them and why (active and future; `all=true` adds ended ones)."""
        with engine.connect() as conn:
            return [jsonable(row) for row in actions.silences(conn, clock.now(), include_ended=all)]

    @api.post("/api/v1/silences", tags=["alerts"], status_code=201)
    def create_silence(body: SilenceRequest) -> dict[str, Any]:
        """Mute the alerts matching every matcher for `duration_seconds`."""
        with engine.begin() as conn:
            silence_id = _act(lambda: actions.create_silence(
                conn, matchers=body.matchers, created_by=body.created_by, comment=body.comment,
                now=clock.now(), duration=timedelta(seconds=body.duration_seconds),
                max_duration=timedelta(seconds=ctx.silence_max_seconds),
                starts_at=body.starts_at))  # fmt: skip
        return {"id": silence_id}

    @api.delete("/api/v1/silences/{silence_id}", tags=["alerts"])
    def expire_silence(silence_id: int) -> dict[str, Any]:
        """End a silence now."""
        with engine.begin() as conn:
            _act(lambda: actions.expire_silence(conn, silence_id, clock.now()))
        return {"expired": silence_id}

    return api


def _act(action: Callable[[], T]) -> T:
    """Run an alert action; its refusal becomes a 400 (404 when there is nothing to act on)."""
    try:
        return action()
    except actions.ActionError as exc:
        if str(exc).startswith("no "):
            raise ApiError(404, "not_found", str(exc)) from exc
        raise ApiError(400, "refused", str(exc)) from exc
