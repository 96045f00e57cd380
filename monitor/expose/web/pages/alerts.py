"""The alerts page: what fires, what is about to, who is on it, what is muted, and the silences;
with plain HTML forms to acknowledge an incident, silence an alert and expire a silence.

Forms post to routes here that call `monitor.alert.actions` (as the CLI and the JSON API do) as
the signed-in identity, after the same identity and CSRF guard as every change, and redirect back
to the page (POST-redirect-GET, so a reload never acknowledges twice), carrying the
outcome in a one-time flash cookie. A refused action comes back the same way, as an error on the
page, with the reason `actions` gives; but input the silence form can correct (a matcher refused
as invalid or too costly, a bad duration) answers 422 with the form again, as typed, and the
reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Final
from urllib.parse import quote, unquote

from fastapi import APIRouter, Cookie, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import Connection

from monitor.act import repair_request
from monitor.act.repairs import kinds_for
from monitor.alert import actions
from monitor.core.identity import Identity
from monitor.core.user_input import whole_number
from monitor.core.vocabulary import parse_duration
from monitor.expose.read import gone as read_gone
from monitor.expose.read.alerts import SECTIONS, read_alerts
from monitor.expose.web.api.alerts import run_action
from monitor.expose.web.context import ApiError, Context, WebContext
from monitor.expose.web.identity import CSRF_FIELD, SIGN_IN, Auth, Authenticator, FormRefused
from monitor.expose.web.inputs import MAX_ID, MAX_SEARCH, Id, list_offset, search_text
from monitor.expose.web.pages.retention_views import identity_view

FLASH_COOKIE = "kh_flash"
RECENT_REPAIRS = 20

SECTION_TITLES = {
    "firing": "Firing",
    "pending": "Pending",
    "acknowledged": "Acknowledged",
    "silenced": "Silenced or inhibited",
}
SECTION_HELP = {
    "firing": "Firing and told to their receivers; nobody has acknowledged them yet.",
    "pending": "The condition holds, but not yet for the rule's `for` duration: nobody is told yet.",
    "acknowledged": "Firing; someone acknowledged an incident they are in, so there are no repeats.",
    "silenced": "Firing, but muted by a silence or by a firing alert that causes them: nobody is told.",
}


router = APIRouter(include_in_schema=False)


SECTION_ROWS: Final = 50
"""Alerts shown per section at once: 10,000 alerts on one page are neither light nor read."""
GONE_SHOWN_FOR: Final = timedelta(hours=24)
GONE_ROWS: Final = 50
"""Alerts resolved as gone (their group, topic or broker no longer in the cluster) shown: the
newest of the last `GONE_SHOWN_FOR`."""
INCIDENT_ROWS: Final = 100
"""Incidents shown, unacknowledged first; `GET /api/v1/incidents` pages through all."""


@router.get("/alerts", response_class=HTMLResponse)
def alerts_page(
    ctx: Context,
    auth: Auth,
    request: Request,
    kh_flash: Annotated[str | None, Cookie()] = None,
    q: str = "",
    section: str = "",
    offset: str = "0",
) -> HTMLResponse:
    """Every section, most severe first, `SECTION_ROWS` at a time; `section` and `offset` page
    through one section, `q` keeps the alerts whose rule, summary or entity contain it."""
    now = ctx.clock.now()
    try:
        search, skip = search_text(q), list_offset(offset)
        if section and section not in SECTIONS:
            raise ValueError(f"section must be one of {', '.join(SECTIONS)}, not {section[:40]!r}")
    except ValueError as exc:
        page = ctx.render(
            "web/error.html", title="Bad request", message=f"{exc}.", links=[("/alerts", "All alerts")]
        )
        page.status_code = 422
        return page
    try:
        who, problem = auth.identify(request), None
    except ApiError as exc:
        who, problem = None, str(exc.detail)
    with ctx.engine.connect() as conn:
        state = read_alerts(
            conn,
            search or None,
            rows=SECTION_ROWS,
            incident_rows=INCIDENT_ROWS,
            section=section or None,
            offset=skip,
        )
        silences = actions.silences(conn, now)
        gone = read_gone.alerts_resolved_gone(conn, now - GONE_SHOWN_FOR, GONE_ROWS)
    page = ctx.render(
        "web/alerts.html",
        title="Alerts",
        state=state,
        sections=SECTIONS,
        shown=state.sections,
        starts={s: skip if s == section else 0 for s in SECTIONS},
        section_rows=SECTION_ROWS,
        incidents=state.incidents,
        q=search,
        max_search=MAX_SEARCH,
        section_titles=SECTION_TITLES,
        section_help=SECTION_HELP,
        silences=silences,
        gone=gone,
        flash=_read_flash(kh_flash),
        who=identity_view(who),
        identity_problem=problem,
        sign_in=SIGN_IN,
        platform_role=who is not None and bool(auth.platform_teams & who.teams),
        csrf_field=CSRF_FIELD,
        csrf_token=auth.csrf_token(who) if who else None,
        as_of=state.as_of,
        max_silence=timedelta(seconds=ctx.silence_max_seconds),
        repair_kinds=kinds_for if ctx.repairs is not None else None,
        repairs=_recent_repairs(ctx),
    )
    if kh_flash is not None:
        page.delete_cookie(FLASH_COOKIE, path="/alerts")
    return page


def _recent_repairs(ctx: WebContext) -> list[repair_request.Repair]:
    """The newest repairs (none without the repair service): their buttons are on this page."""
    if ctx.repairs is None:
        return []
    with ctx.engine.connect() as conn:
        return repair_request.list_repairs(conn, limit=RECENT_REPAIRS)


@router.post("/alerts/ack", response_model=None)
async def acknowledge(ctx: Context, auth: Auth, request: Request) -> Response:
    form, incidents = await _form(request, "incident")

    def act(who: Identity) -> str:
        ids = sorted({_id(value, "incident") for value in incidents})
        if not ids:
            raise actions.ActionError("choose the incident to acknowledge")
        done: list[int] = []
        comment = form.get("comment", "")
        for group_id in ids:

            def one(conn: Connection, group_id: int = group_id) -> list[int]:
                return actions.acknowledge(
                    conn, who, now=ctx.clock.now(), group_id=group_id, comment=comment,
                    platform_teams=auth.platform_teams,
                )  # fmt: skip

            done += run_action(ctx, who, "incident", group_id, "acknowledge", one)
        plural = "s" if len(done) > 1 else ""
        listed = ", ".join(str(i) for i in done)
        return f"Acknowledged incident{plural} {listed} as {who.user}: no repeats, no escalation."

    return _guarded(ctx, auth, request, form, act)


@router.post("/alerts/silences", response_model=None)
async def silence(ctx: Context, auth: Auth, request: Request) -> Response:
    """A silence from the form. Input the form can correct (a matcher refused as invalid or too
    costly, a bad duration or comment) answers 422 with the form again, as typed, and the reason;
    a refusal of who may silence what comes back to the alerts page as a flash."""
    form, _ = await _form(request)

    def act(who: Identity) -> str:
        duration = form.get("duration", "2h")
        try:
            seconds = parse_duration(duration)
        except ValueError as exc:
            raise actions.ActionError(f"duration: {exc}") from exc
        if seconds > ctx.silence_max_seconds:
            limit = timedelta(seconds=ctx.silence_max_seconds)
            raise actions.ActionError(f"a silence may last at most {limit}; ask for less")
        lines = [line.strip() for line in form.get("matchers", "").splitlines() if line.strip()]
        silence_id = run_action(ctx, who, "silence", None, "create silence", lambda conn: (
            actions.create_silence(
                conn, who, matchers=lines, comment=form.get("comment", ""), now=ctx.clock.now(),
                duration=timedelta(seconds=seconds),
                max_duration=timedelta(seconds=ctx.silence_max_seconds),
                platform_teams=auth.platform_teams, max_per_team=ctx.max_silences_per_team)))  # fmt: skip
        return f"Silence {silence_id} created for {duration.strip()}: {', '.join(lines)}."

    def again(who: Identity, exc: actions.ActionError) -> Response:
        page = ctx.render(
            "web/silence_form.html", title="New silence", message=str(exc),
            matchers=form.get("matchers", "").splitlines(), duration=form.get("duration", "2h"),
            comment=form.get("comment", ""), max_silence=timedelta(seconds=ctx.silence_max_seconds),
            csrf_field=CSRF_FIELD, csrf_token=auth.csrf_token(who),
        )  # fmt: skip
        page.status_code = 422
        return page

    return _guarded(ctx, auth, request, form, act, invalid=again)


@router.post("/alerts/silences/{silence_id}/expire", response_model=None)
async def expire(ctx: Context, auth: Auth, request: Request, silence_id: Id) -> Response:
    form, _ = await _form(request)

    def act(who: Identity) -> str:
        now, platform = ctx.clock.now(), auth.platform_teams
        run_action(ctx, who, "silence", silence_id, "expire silence", lambda conn: (
            actions.expire_silence(conn, who, silence_id, now, platform)))  # fmt: skip
        return f"Silence {silence_id} expired: the alerts it muted notify again from the next alert cycle."

    return _guarded(ctx, auth, request, form, act)


async def _form(request: Request, multi: str = "") -> tuple[dict[str, str], list[str]]:
    """The form's single fields, and every value of the field `multi`."""
    data = await request.form()
    single = {k: v for k, v in data.items() if isinstance(v, str)}
    values = [v for v in data.getlist(multi) if isinstance(v, str)] if multi else []
    return single, values


def _id(value: str, what: str) -> int:
    try:
        return whole_number(value, what, low=1, high=MAX_ID)
    except ValueError as exc:
        raise actions.ActionError(str(exc)) from exc


def _guarded(
    ctx: WebContext,
    auth: Authenticator,
    request: Request,
    form: dict[str, str],
    action: Callable[[Identity], str],
    invalid: Callable[[Identity, actions.ActionError], Response] | None = None,
) -> Response:
    """Identity and CSRF first (refused: an error page, nothing changed); then `action`, and back
    to the alerts page with its outcome as a flash; or, where given, `invalid` answers a refusal of
    the input itself (code `invalid`)."""
    try:
        who = auth.form_changer(request, form)
    except FormRefused as exc:
        return exc.page(
            ctx.render(
                "web/error.html", title=exc.title, message=str(exc), links=[("/alerts", "Back to the alerts")]
            )
        )
    try:
        flash = {"kind": "ok", "text": action(who)}
    except actions.ActionError as exc:
        if invalid is not None and exc.code == "invalid":
            return invalid(who, exc)
        flash = {"kind": "error", "text": f"Not done: {exc}"}
    response = RedirectResponse("/alerts", status_code=303)
    response.set_cookie(
        FLASH_COOKIE, quote(json.dumps(flash)), max_age=60, path="/alerts", httponly=True, samesite="strict"
    )
    return response


def _read_flash(raw: str | None) -> dict[str, str] | None:
    if not raw:
        return None
    try:
        value = json.loads(unquote(raw))
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("kind") not in ("ok", "error"):
        return None
    return {"kind": str(value["kind"]), "text": str(value.get("text", ""))}
