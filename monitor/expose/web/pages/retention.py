"""The retention button's pages: the panel on the topic page, its confirmation step, the actions
on a request, and `/retention`, the open requests with awaiting approval first.

Plain HTML forms. The button's form first posts to `.../retention/preview`, which changes
nothing and shows what would happen (current -> new, the lagging groups' time until data loss,
the disk cost per broker against the ceiling, the tier, and any refusal with its numbers); its
confirm button posts the same values to `.../retention`. Every change answers with a redirect
to a page that shows a flash message (POST-redirect-GET), so a reload never submits twice.

Who acts comes from the API's `Authenticator` (the same object, so the same CSRF secret): a
trusted proxy's headers, or the development mode, which every page labels. Nothing anonymous:
without an identity the panel says how to sign in and the posts answer 401. Every form carries
the signed CSRF token; a post without a valid one answers 403 and changes nothing. Changes go
through `RetentionService`, the same calls the API and the CLI make.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import Connection

from monitor.act import ledger
from monitor.act.model import RetentionError, show_value
from monitor.act.service import RetentionService
from monitor.core.identity import Identity
from monitor.expose.web.context import ApiError, Context, Service, TopicPanel, WebContext
from monitor.expose.web.identity import CSRF_FIELD, SIGN_IN, Auth, Authenticator, FormRefused
from monitor.expose.web.inputs import Id
from monitor.expose.web.pages import retention_views as views
from monitor.store.retention import OPEN_STATES

AUDIT_ROWS = 50
PANEL = "#retention-panel"
"""Where a redirect to the topic page lands: the panel with the flash message."""
_DONE = {
    "approve": "approved",
    "reject": "rejected",
    "withdraw": "withdrawn",
    "revert": "reverted",
    "extend": "given more time, once a reviewer approves the extension",
}


def install(app: FastAPI, service: RetentionService, auth: Authenticator) -> TopicPanel:
    """Add the pages to `app`; returns the topic page's panel (`WebContext.topic_panel`)."""
    app.include_router(router)

    @app.middleware("http")
    async def consume_flash(request: Request, call_next: Callable[[Request], Any]) -> Response:
        """A flash message is shown once: the page that showed it clears it."""
        response: Response = await call_next(request)
        shown = request.method == "GET" and _shows_flash(request.url.path)
        if shown and views.FLASH_COOKIE in request.cookies:
            response.delete_cookie(views.FLASH_COOKIE, path="/")
        return response

    return partial(topic_panel, service=service, auth=auth)


def _shows_flash(path: str) -> bool:
    return path == "/retention" or ("/topics/" in path and path.startswith("/clusters/"))


# -- what every page shows ----------------------------------------------------------------------


def _identity(auth: Authenticator, request: Request) -> tuple[Identity | None, str | None]:
    """The identity, or None and why (a bad API token is said, not ignored)."""
    try:
        return auth.identify(request), None
    except ApiError as exc:
        return None, str(exc.detail)


def _common(auth: Authenticator, request: Request) -> dict[str, Any]:
    who, problem = _identity(auth, request)
    return {
        "who": views.identity_view(who),
        "identity_problem": problem,
        "development": auth.development,
        "csrf_token": auth.csrf_token(who) if who else None,
        "csrf_field": CSRF_FIELD,
        "flash": views.read_flash(request.cookies.get(views.FLASH_COOKIE)),
        "sign_in": SIGN_IN,
    }


def topic_panel(
    request: Request,
    conn: Connection,
    cluster: str,
    topic: str,
    *,
    service: RetentionService,
    auth: Authenticator,
) -> dict[str, Any]:
    """The topic page's retention panel: the button's form, the open request and the audit."""
    who, _ = _identity(auth, request)
    policy = service.policy()
    open_id = ledger.open_request_id(conn, cluster, topic)
    current = ledger.get(conn, open_id) if open_id is not None else None
    owner = service.owners().topic_owner(topic)
    return {
        "retention": {
            **_common(auth, request),
            "owner": owner.name if owner else None,
            "action": views.topic_href(cluster, topic) + "/retention",
            "open": {**views.request_view(current), "actions": views.actions_for(current, who, policy)}
            if current
            else None,
            "audit": views.audit_view(ledger.topic_audit(conn, cluster, topic, AUDIT_ROWS)),
            "reviewers": policy.reviewers,
            "ms_units": list(views.MS_UNITS),
            "byte_units": list(views.BYTE_UNITS),
            "duration_units": list(views.DURATION_UNITS),
            "back": views.topic_href(cluster, topic),
        }
    }


# -- routes -------------------------------------------------------------------------------------

router = APIRouter(include_in_schema=False)
_TOPIC = "/clusters/{cluster}/topics/{topic}/retention"


@router.get("/retention", response_class=HTMLResponse)
def list_page(request: Request, ctx: Context, auth: Auth, service: Service) -> HTMLResponse:
    """Open requests: awaiting approval first, then pending review, applied, in progress."""
    who, _ = _identity(auth, request)
    policy = service.policy()
    with ctx.engine.connect() as conn:
        rows = ledger.list_requests(conn, states=list(OPEN_STATES), limit=1000)
    sections: dict[str, list[dict[str, Any]]] = {key: [] for key, _, _ in views.SECTIONS}
    for row in sorted(rows, key=lambda r: r.id):
        view = {**views.request_view(row), "actions": views.actions_for(row, who, policy)}
        sections[views.section_of(row)].append(view)
    return ctx.render(
        "web/retention.html",
        title="Retention requests",
        sections=[(key, title, note, sections[key]) for key, title, note in views.SECTIONS],
        reviewers=policy.reviewers,
        **_common(auth, request),
    )


@router.post(_TOPIC + "/preview", response_model=None)
async def preview(
    request: Request, cluster: str, topic: str, ctx: Context, auth: Auth, service: Service
) -> Response:
    """The confirmation step: what the raise would do. Changes nothing."""
    back = views.topic_href(cluster, topic)
    try:
        who, form = await _changer(auth, request)
        asked = views.parse_raise_form(form)
        preview = service.preview(who, cluster, topic, asked.new, asked.duration_ms)
    except FormRefused as exc:
        return _refused(ctx, exc, back)
    except (ValueError, RetentionError) as exc:
        return _redirect(back + PANEL, "error", f"Not previewed: {exc}")
    policy = service.policy()
    return ctx.render(
        "web/retention_confirm.html",
        title=f"Confirm retention raise · {topic}",
        cluster=cluster,
        topic=topic,
        back=back,
        action=back + "/retention",
        preview=preview,
        asked=asked,
        changes=views.changes(preview, asked.new),
        duration=show_value("retention.ms", asked.duration_ms),
        disk_rows=views.disk_rows(preview["disk"], policy.disk_usage_ceiling),
        ceiling=policy.disk_usage_ceiling,
        reviewers=policy.reviewers,
        loss_health=ctx.data_loss().health,
        **_common(auth, request),
    )


@router.post(_TOPIC, response_model=None)
async def submit(
    request: Request, cluster: str, topic: str, ctx: Context, auth: Auth, service: Service
) -> Response:
    """Ask for the raise; back to the topic page with what happened."""
    back = views.topic_href(cluster, topic) + PANEL
    try:
        who, form = await _changer(auth, request)
        asked = views.parse_raise_form(form)
        done = service.raise_retention(who, cluster, topic, asked.new, asked.duration_ms, asked.reason)
    except FormRefused as exc:
        return _refused(ctx, exc, back)
    except RetentionError as exc:
        lines = [c["message"] for c in exc.details.get("checks", []) if not c.get("ok", True)]
        return _redirect(back, "error", f"Not changed: {exc}", lines)
    except ValueError as exc:
        return _redirect(back, "error", f"Not changed: {exc}")
    view = views.request_view(done)
    return _redirect(back, "ok", f"Request {done.id} is {view['display_state']}: {view['change']}.")


@router.post("/retention/{request_id}/{action}", response_model=None)
async def act(
    request: Request, request_id: Id, action: str, ctx: Context, auth: Auth, service: Service
) -> Response:
    """approve, reject, withdraw, revert or extend a request; back to where it was pressed."""
    form_back = "/retention"
    try:
        who, form = await _changer(auth, request)
        form_back = _local(form.get("next", "")) or form_back
        reason = form.get("reason", "").strip()
        if action in ("approve", "reject", "withdraw"):
            call = service.approve if action == "approve" else service.reject
            done = call(who, request_id, reason)
        elif action == "revert":
            done = service.revert(who, request_id, reason)
        elif action == "extend":
            done = service.extend(who, request_id, views.duration_ms_of(form), reason)
        else:
            raise FormRefused(404, "Not found", f"No action {action!r}: approve, reject, revert or extend.")
    except FormRefused as exc:
        return _refused(ctx, exc, form_back)
    except (ValueError, RetentionError) as exc:
        return _redirect(form_back, "error", f"Request {request_id} was not changed ({action}): {exc}")
    state = views.request_view(done)["display_state"]
    return _redirect(form_back, "ok", f"Request {request_id} {_DONE[action]}; it is now {state}.")


# -- helpers ------------------------------------------------------------------------------------


async def _changer(auth: Authenticator, request: Request) -> tuple[Identity, dict[str, str]]:
    """The identity behind a post and its form, the CSRF token and origin checked."""
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    return auth.form_changer(request, form), form


def _refused(ctx: WebContext, exc: FormRefused, back: str) -> HTMLResponse:
    return exc.page(
        ctx.render(
            "web/error.html", title=exc.title, message=str(exc), links=[(back, "Back"), ("/", "All clusters")]
        )
    )


def _local(path: str) -> str | None:
    """`path` when it is a path on this site (a `next` from a form), else None."""
    parts = urlsplit(path)
    if path.startswith("/") and not path.startswith("//") and not parts.scheme and not parts.netloc:
        return path
    return None


def _redirect(to: str, kind: str, text: str, lines: list[str] | None = None) -> RedirectResponse:
    response = RedirectResponse(to, status_code=303)
    response.set_cookie(
        views.FLASH_COOKIE,
        views.flash_value(kind, text, lines),
        max_age=views.FLASH_MAX_AGE_SECONDS,
        path="/",
        httponly=True,
        samesite="lax",
    )
    return response
