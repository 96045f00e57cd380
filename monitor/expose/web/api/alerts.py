"""Alerts over HTTP: open alerts and incidents, acknowledgements (the API and the link in a
notification), silences. What people do goes through `monitor.alert.actions`, as on the CLI:
the identity comes from `identity.Authenticator` (never from the body), the CSRF guard is the
same as the retention button's, and the action's authorization rule and audit entry are the
alert stage's.

Errors: `{"error": {"code", "message"}}` with invalid 422, unauthenticated 401, forbidden and
csrf_failed 403, not_found 404, conflict 409, expired 410.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from monitor.alert import actions
from monitor.alert.matchers import MAX_MATCHER_LENGTH
from monitor.alert.permissions import MAX_MATCHERS
from monitor.core.identity import Identity
from monitor.core.user_input import timestamp
from monitor.expose.read.queries import DEFAULT_LIMIT
from monitor.expose.web.context import CHANGE_ERRORS, ApiError, Context, WebContext, jsonable
from monitor.expose.web.identity import CSRF_FIELD, Auth, Changer, FormRefused
from monitor.expose.web.inputs import Id, Limit, Offset, Text, json_int

T = TypeVar("T")
STATUS = {"invalid": 422, "forbidden": 403, "not_found": 404, "conflict": 409, "expired": 410}
MAX_SILENCE_SECONDS = 366 * 86_400
"""The schema's bound; `settings.silence_max_duration` (default 7 days) is the one enforced."""
_WHO_FIELDS = ("by", "created_by", "user", "acknowledged_by")


class _NoSelfNaming(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_name(cls, data: Any) -> Any:
        if isinstance(data, dict):
            named = [key for key in _WHO_FIELDS if key in data]
            if named:
                raise ValueError(
                    f"{named[0]!r} is not accepted: who acts is your identity (the proxy's sign-in or "
                    "your API token), never a name in the request"
                )
        return data


class AckRequest(_NoSelfNaming):
    comment: Text = Field(default="", max_length=actions.MAX_COMMENT)


class SilenceRequest(_NoSelfNaming):
    matchers: list[Annotated[Text, Field(min_length=1, max_length=MAX_MATCHER_LENGTH)]] = Field(
        min_length=1,
        max_length=MAX_MATCHERS,
        description="label=value, label!=value, label=~re, label!~re (RE2, anchored). Without the "
        "platform role, one must be team=<one of your teams>.",
    )
    duration_seconds: Annotated[
        int,
        Field(gt=0, le=MAX_SILENCE_SECONDS, description="How long the silence lasts."),
        json_int("duration_seconds", 1, MAX_SILENCE_SECONDS),
    ]
    starts_at: datetime | None = Field(
        default=None, description="When it starts (ISO 8601 with offset, within the maximum duration of now)."
    )
    comment: Text = Field(min_length=1, max_length=actions.MAX_COMMENT)

    @field_validator("starts_at", mode="before")
    @classmethod
    def _time(cls, value: object) -> datetime | None:
        return None if value is None else timestamp(value, "starts_at")

    @field_validator("starts_at")
    @classmethod
    def _bounded_start(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("give the start with its UTC offset, e.g. 2026-11-21T22:00:00+00:00")
        if abs(value - datetime.now(UTC)) > timedelta(seconds=MAX_SILENCE_SECONDS):
            raise ValueError("the start must be within a year of now")
        return value


router = APIRouter(responses=CHANGE_ERRORS)


NEXT_PAGE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "One page of the list, in the order given. More follow when the `Link` header "
        'has a `rel="next"` link: get it for the next page (the same `limit`, the next `offset`).',
        "headers": {
            "Link": {
                "description": 'The next page, as `</api/v1/...?limit=100&offset=100>; rel="next"`; '
                "absent on the last page",
                "schema": {"type": "string"},
            }
        },
    }
}
"""What a paged list answers: a JSON array (the shape these lists always had), the next page in
the `Link` header (RFC 8288), as GitHub's API does."""


def paged(
    request: Request, response: Response, rows: list[dict[str, Any]], limit: int, offset: int
) -> list[dict[str, Any]]:
    """The first `limit` of `rows` (read with one more, to know whether another page follows),
    with the `Link` header to the next page when one does."""
    if len(rows) > limit:
        kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("limit", "offset")]
        query = urlencode([*kept, ("limit", str(limit)), ("offset", str(offset + limit))])
        response.headers["Link"] = f'<{request.url.path}?{query}>; rel="next"'
    return [jsonable(row) for row in rows[:limit]]


@router.get("/api/v1/alerts", tags=["alerts"], responses=NEXT_PAGE)
def alerts(
    ctx: Context, request: Request, response: Response, limit: Limit = DEFAULT_LIMIT, offset: Offset = 0
) -> list[dict[str, Any]]:
    """Open alerts, most severe first, then oldest first, `limit` at a time; muted ones name their
    silence or inhibiting alert."""
    with ctx.engine.connect() as conn:
        rows = actions.open_alerts(conn, limit=limit + 1, offset=offset)
    return paged(request, response, rows, limit, offset)


@router.get("/api/v1/incidents", tags=["alerts"], responses=NEXT_PAGE)
def incidents(
    ctx: Context, request: Request, response: Response, limit: Limit = DEFAULT_LIMIT, offset: Offset = 0
) -> list[dict[str, Any]]:
    """Open notification groups per receiver, oldest first, with acknowledgement and escalation."""
    with ctx.engine.connect() as conn:
        rows = actions.open_incidents(conn, limit=limit + 1, offset=offset)
    return paged(request, response, rows, limit, offset)


@router.post("/api/v1/incidents/{incident_id}/ack", tags=["alerts"])
def ack_incident(ctx: Context, auth: Auth, incident_id: Id, body: AckRequest, who: Changer) -> dict[str, Any]:
    """Acknowledge an incident as yourself (a member of its alerts' team, or the platform role): no
    repeats, no escalation; its receivers are told once."""
    ids = _act(ctx, who, "incident", incident_id, "acknowledge", lambda conn: actions.acknowledge(
        conn, who, now=ctx.clock.now(), group_id=incident_id, comment=body.comment,
        platform_teams=auth.platform_teams))  # fmt: skip
    return {"acknowledged": ids, "by": who.user}


@router.get("/ack/{token}", response_class=HTMLResponse, include_in_schema=False)
def ack_page(
    ctx: Context, auth: Auth, request: Request, token: Annotated[str, Path(max_length=200)]
) -> HTMLResponse:
    """The link in a notification: a page that asks to confirm (a GET changes nothing)."""
    try:
        who = auth.identify(request)
    except ApiError:
        who = None
    csrf = auth.csrf_token(who) if who else None
    page = ctx.render(
        "web/ack.html", title="Acknowledge", token=token, done=None, error=None, who=who,
        csrf_field=CSRF_FIELD, csrf_token=csrf,
    )  # fmt: skip
    if who is None:
        page.status_code = 401
    return page


@router.post("/ack/{token}", response_class=HTMLResponse, include_in_schema=False)
async def ack_link(
    ctx: Context, auth: Auth, request: Request, token: Annotated[str, Path(max_length=200)]
) -> HTMLResponse:
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    comment = form.get("comment", "")
    common: dict[str, Any] = {"token": token, "csrf_field": CSRF_FIELD, "csrf_token": None, "who": None}
    try:
        who = auth.form_changer(request, form)
    except FormRefused as exc:
        return exc.page(ctx.render("web/ack.html", title=exc.title, done=None, error=str(exc), **common))
    common.update(who=who, csrf_token=auth.csrf_token(who))
    try:
        ids = _act(ctx, who, "incident", None, "acknowledge by link", lambda conn: actions.acknowledge(
            conn, who, now=ctx.clock.now(), token=token, comment=comment,
            link_ttl=timedelta(seconds=ctx.ack_link_seconds),
            platform_teams=auth.platform_teams))  # fmt: skip
    except ApiError as exc:
        page = ctx.render("web/ack.html", title="Not acknowledged", done=None, error=exc.detail, **common)
        page.status_code = exc.status_code
        return page
    return ctx.render("web/ack.html", title="Acknowledged", done=ids, error=None, **common)


@router.get("/api/v1/silences", tags=["alerts"], responses=NEXT_PAGE)
def silences(
    ctx: Context,
    request: Request,
    response: Response,
    all: bool = False,
    limit: Limit = DEFAULT_LIMIT,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """Silences with who made them and why, newest first (active and future; `all=true` adds
    ended ones)."""
    with ctx.engine.connect() as conn:
        rows = actions.silences(conn, ctx.clock.now(), include_ended=all, limit=limit + 1, offset=offset)
    return paged(request, response, rows, limit, offset)


@router.post("/api/v1/silences", tags=["alerts"], status_code=201)
def create_silence(ctx: Context, auth: Auth, body: SilenceRequest, who: Changer) -> dict[str, Any]:
    """Mute the alerts matching every matcher for `duration_seconds`, as yourself. A regular
    expression may compile to at most 1,000 RE2 instructions (422), and a team may have at most
    `alert.max_silences_per_team` active or scheduled silences (409)."""
    silence_id = _act(ctx, who, "silence", None, "create silence", lambda conn: actions.create_silence(
        conn, who, matchers=body.matchers, comment=body.comment, now=ctx.clock.now(),
        duration=timedelta(seconds=body.duration_seconds),
        max_duration=timedelta(seconds=ctx.silence_max_seconds), platform_teams=auth.platform_teams,
        starts_at=body.starts_at, max_per_team=ctx.max_silences_per_team))  # fmt: skip
    return {"id": silence_id, "created_by": who.user}


@router.delete("/api/v1/silences/{silence_id}", tags=["alerts"])
def expire_silence(ctx: Context, auth: Auth, silence_id: Id, who: Changer) -> dict[str, Any]:
    """End a silence now (its creator, its team, or the platform role)."""
    _act(ctx, who, "silence", silence_id, "expire silence", lambda conn: actions.expire_silence(
        conn, who, silence_id, ctx.clock.now(), auth.platform_teams))  # fmt: skip
    return {"expired": silence_id, "by": who.user}


def run_action(
    ctx: WebContext,
    who: Identity,
    subject: str,
    subject_id: int | None,
    what: str,
    action: Callable[[Any], T],
) -> T:
    """Run an alert action in one transaction; a refusal is audited and raised again as
    `actions.ActionError`."""
    with actions.audited(ctx.engine, who, subject, subject_id, what, ctx.clock.now) as conn:
        return action(conn)


def _act(
    ctx: WebContext,
    who: Identity,
    subject: str,
    subject_id: int | None,
    what: str,
    action: Callable[[Any], T],
) -> T:
    """`run_action`, a refusal answered with its status."""
    try:
        return run_action(ctx, who, subject, subject_id, what, action)
    except actions.ActionError as exc:
        raise ApiError(STATUS[exc.code], exc.code, str(exc)) from exc
