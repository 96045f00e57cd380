"""The alerts page: what fires, what is about to, who is on it, what is muted, and the silences;
with plain HTML forms to acknowledge an incident, silence an alert and expire a silence.

Forms post to routes here that call `monitor.alert.actions` (as the CLI and the JSON API do) and
redirect back to the page (POST-redirect-GET, so a reload never acknowledges twice), carrying the
outcome in a one-time flash cookie. A refused action comes back the same way, as an error on the
page, with the reason `actions` gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated
from urllib.parse import quote, unquote

from fastapi import APIRouter, Cookie, Form
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy import Connection

from monitor.alert import actions
from monitor.alert.routing import parse_seconds
from monitor.expose.alert_views import SECTIONS, read_alerts
from monitor.expose.context import WebContext

FLASH_COOKIE = "kh_flash"
WHO_COOKIE = "kh_who"
"""The name last used on a form, to fill in the next one."""

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


def router(ctx: WebContext) -> APIRouter:
    pages = APIRouter(include_in_schema=False)

    @pages.get("/alerts", response_class=HTMLResponse)
    def alerts_page(
        kh_flash: Annotated[str | None, Cookie()] = None, kh_who: Annotated[str | None, Cookie()] = None
    ) -> HTMLResponse:
        now = ctx.clock.now()
        with ctx.engine.connect() as conn:
            state = read_alerts(conn)
            silences = actions.silences(conn, now)
        page = ctx.render(
            "web/alerts.html",
            title="Alerts",
            state=state,
            sections=SECTIONS,
            section_titles=SECTION_TITLES,
            section_help=SECTION_HELP,
            silences=silences,
            flash=_read_flash(kh_flash),
            who=unquote(kh_who or ""),
            as_of=state.as_of,
            max_silence=timedelta(seconds=ctx.silence_max_seconds),
        )
        if kh_flash is not None:
            page.delete_cookie(FLASH_COOKIE, path="/alerts")
        return page

    @pages.post("/alerts/ack")
    def acknowledge(
        incident: Annotated[list[int], Form()],
        by: Annotated[str, Form()] = "",
        comment: Annotated[str, Form()] = "",
    ) -> RedirectResponse:
        def act(conn: Connection) -> str:
            done: list[int] = []
            for group_id in sorted(set(incident)):
                done += actions.acknowledge(
                    conn, by=by, comment=comment, now=ctx.clock.now(), group_id=group_id, via="web"
                )
            listed = ", ".join(str(i) for i in done)
            plural = "s" if len(done) > 1 else ""
            return f"Acknowledged incident{plural} {listed} as {by}: no repeats, no escalation."

        return _act(ctx, act, who=by)

    @pages.post("/alerts/silences")
    def silence(
        matchers: Annotated[str, Form()] = "",
        duration: Annotated[str, Form()] = "2h",
        by: Annotated[str, Form()] = "",
        comment: Annotated[str, Form()] = "",
    ) -> RedirectResponse:
        def act(conn: Connection) -> str:
            try:
                seconds = parse_seconds(duration)
            except ValueError as exc:
                raise actions.ActionError(f"duration: {exc}") from exc
            lines = [line.strip() for line in matchers.splitlines() if line.strip()]
            silence_id = actions.create_silence(
                conn, matchers=lines, created_by=by, comment=comment, now=ctx.clock.now(),
                duration=timedelta(seconds=seconds),
                max_duration=timedelta(seconds=ctx.silence_max_seconds),
            )  # fmt: skip
            return f"Silence {silence_id} created for {duration.strip()}: {', '.join(lines)}."

        return _act(ctx, act, who=by)

    @pages.post("/alerts/silences/{silence_id}/expire")
    def expire(silence_id: int) -> RedirectResponse:
        def act(conn: Connection) -> str:
            actions.expire_silence(conn, silence_id, ctx.clock.now())
            return (
                f"Silence {silence_id} expired: the alerts it muted notify again from the next alert cycle."
            )

        return _act(ctx, act)

    return pages


def _act(ctx: WebContext, action: Callable[[Connection], str], who: str = "") -> RedirectResponse:
    """Run `action` in one transaction; redirect to the page with its outcome as a flash."""
    try:
        with ctx.engine.begin() as conn:
            flash = {"kind": "ok", "text": action(conn)}
    except actions.ActionError as exc:
        flash = {"kind": "error", "text": f"Not done: {exc}"}
    response = RedirectResponse("/alerts", status_code=303)
    response.set_cookie(
        FLASH_COOKIE, quote(json.dumps(flash)), max_age=60, path="/alerts", httponly=True, samesite="strict"
    )
    if who.strip() and flash["kind"] == "ok":
        response.set_cookie(WHO_COOKIE, quote(who.strip()[:200]), max_age=30 * 86400, samesite="strict")
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
