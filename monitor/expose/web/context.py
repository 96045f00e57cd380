"""What every router of the web application shares: the database, the clock, the templates, the
app's collaborators, and the conventions for JSON values and errors.

Each group of pages or endpoints lives in its own module as module-level route functions on that
module's `router`; `app.create_app` includes them and keeps the `WebContext` on the app, where a
route gets it by declaring a parameter of type `Context` (the retention service: `Service`; who
asks: `identity.Auth` and `identity.Changer`). Routes read through `monitor.expose.read` (or the
views of `migrations/`), and change state only through the stage that owns it (alerts:
`monitor.alert`; retention: `monitor.act`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, cast

import jinja2
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from sqlalchemy import Connection, Engine

from monitor.act.repairs import RepairService
from monitor.act.service import RetentionService
from monitor.core.annotations import is_link
from monitor.core.clock import Clock
from monitor.core.formatting import NUMBER_FILTERS, consumer_advice_text, lines_markup, visible_output
from monitor.core.resources import templates_dir
from monitor.core.settings import MAX_SILENCES_PER_TEAM
from monitor.core.vocabulary import COMMITTED_BEYOND_END
from monitor.expose.metrics.snapshot import MetricsSnapshot
from monitor.expose.read.cache import ReadCache
from monitor.expose.web.health import RuleScale


def template_environment() -> jinja2.Environment:
    """Templates with strict undefined: a missing variable is an error, never an empty string.
    Every printed string is shown through `printable` (`visible_output`): a name with a control,
    bidirectional or zero-width character is shown with it escaped, never passes for another."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        finalize=visible_output,
    )
    env.filters.update(NUMBER_FILTERS)
    env.filters["utc"] = utc_text
    env.filters["consumer_advice"] = consumer_advice_text  # the advice as a sentence of its own
    env.filters["lines"] = lines_markup  # free text over several lines: its breaks shown as breaks
    env.tests["link"] = is_link  # an annotation shown as a link
    env.globals["COMMITTED_BEYOND_END"] = COMMITTED_BEYOND_END
    return env


def utc_text(value: datetime | None) -> str:
    """A time as pages show it: UTC to the second, whatever the database session's time zone."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


TopicPanel = Callable[[Request, Connection, str, str], dict[str, Any]]
"""More of the topic page: template variables from another module (the retention panel)."""


@dataclass(frozen=True)
class WebContext:
    engine: Engine
    clock: Clock
    stale_after: timedelta
    silence_max_seconds: int = 7 * 86400
    max_silences_per_team: int = MAX_SILENCES_PER_TEAM
    """`alert.max_silences_per_team`: the active or scheduled silences one team may have."""
    inbox_nav: bool = False
    """Whether the navigation links the inbox (some receiver writes to an inbox file)."""
    ack_link_seconds: float = 7 * 86400
    """How long an acknowledgement link works after the incident's latest notification."""
    templates: jinja2.Environment = field(default_factory=template_environment)
    retention: RetentionService | None = None
    """The retention button's service; without it, the app has no retention routes."""
    repairs: RepairService | None = None
    """The repair actions' service; without it, the app has no repair routes and no repair buttons."""
    job_intervals: Mapping[str, float] | None = None
    """`monitor.core.scheduler.run_intervals`: when a job's last success is stale (None: the
    scheduler's defaults)."""
    inboxes: Mapping[str, Path] = field(default_factory=dict)
    """The console receivers' files the inbox page reads (`inbox.inbox_paths`)."""
    topic_panel: TopicPanel | None = None
    """More of the topic page (the retention button's panel, `pages.retention`)."""
    metrics: MetricsSnapshot = field(kw_only=True)
    """What `/metrics` serves (`metrics.snapshot.MetricsSnapshot`)."""
    data_loss: RuleScale = field(default_factory=RuleScale)
    """What the dashboard's colours take from the rule files the evaluation reads
    (`health.RuleScale`): called, the data-loss margin's scale (TimeUntilDataLoss's tiers);
    `reads()`, the columns each rule reads."""
    reads: ReadCache = field(default_factory=ReadCache)
    """The read models kept until their cluster's next evaluation or collection (`read.cache`),
    shared by the pages and the JSON API."""

    def render(self, name: str, **context: Any) -> HTMLResponse:
        context.setdefault("inbox_nav", self.inbox_nav)
        context.setdefault("generated_at", self.clock.now().strftime("%Y-%m-%d %H:%M:%S"))
        context.setdefault("now", self.clock.now())
        return HTMLResponse(self.templates.get_template(name).render(**context))


def attach(app: FastAPI, ctx: WebContext) -> None:
    """Keep `ctx` on `app` for the routes' `Context` parameters."""
    app.state.web_context = ctx


async def web_context(request: Request) -> WebContext:
    """The `WebContext` of the app serving `request` (see `attach`)."""
    return cast(WebContext, request.app.state.web_context)


Context = Annotated[WebContext, Depends(web_context)]
"""A route's parameter for the app's `WebContext` (not a request parameter: the document omits it)."""


async def retention_service(ctx: Context) -> RetentionService:
    """The retention button's service (the retention routes are included only with one)."""
    if ctx.retention is None:
        raise ApiError(404, "not_found", "the retention button is not configured on this monitor")
    return ctx.retention


Service = Annotated[RetentionService, Depends(retention_service)]
"""A route's parameter for the retention button's service."""


async def repair_service(ctx: Context) -> RepairService:
    """The repair actions' service (the repair routes are included only with one)."""
    if ctx.repairs is None:
        raise ApiError(404, "not_found", "repair actions are not configured on this monitor")
    return ctx.repairs


Repairs = Annotated[RepairService, Depends(repair_service)]
"""A route's parameter for the repair actions' service."""


class ErrorDetail(BaseModel):
    code: str = Field(description="stable error code, e.g. cluster_not_found or invalid_parameter")
    message: str = Field(description="what is wrong and how to fix it")
    details: list[Any] | None = Field(default=None, description="the invalid parameters, for a 422")


class ErrorBody(BaseModel):
    """Every API error: `{"error": {"code": ..., "message": ...}}`."""

    error: ErrorDetail


CHANGE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A value the database cannot hold (code `invalid_value`)"},
    401: {"model": ErrorBody, "description": "No identity: sign in through the proxy or send an API token"},
    403: {"model": ErrorBody, "description": "Not allowed (`forbidden`), or a CSRF/origin check failed"},
    404: {"model": ErrorBody, "description": "Nothing to act on (`not_found`)"},
    409: {"model": ErrorBody, "description": "The state forbids it now (`conflict`)"},
    410: {"model": ErrorBody, "description": "An acknowledgement link that expired (`expired`)"},
    422: {
        "model": ErrorBody,
        "description": "The request is invalid or a rule refuses it; the message says why",
    },
    429: {
        "model": ErrorBody,
        "description": "Too many changes asked for by one identity in a minute (`rate_limited`); "
        "`Retry-After` says when to ask again",
        "headers": {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}},
    },
    503: {"model": ErrorBody, "description": "PostgreSQL or Kafka did not answer (`unavailable`)"},
}
"""The answers of the routes that change something, for the OpenAPI document."""


class ApiError(HTTPException):
    """An error answered as `{"error": {"code": ..., "message": ...}}`. `code` is stable (scripts
    may branch on it); `message` says what is wrong and how to fix it."""

    def __init__(
        self, status_code: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(status_code=status_code, detail=message, headers=headers)
        self.code = code


def not_found(what: str, name: object, hint: str = "") -> ApiError:
    message = f"no {what} {name!r}" + (f"; {hint}" if hint else "")
    return ApiError(404, f"{what.replace(' ', '_')}_not_found", message)


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """A database row as JSON values: times in ISO 8601 UTC, decimals as floats."""
    return {k: _value(v) for k, v in row.items()}


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


POST_ONLY = "post_only"
"""The name of `post_only`'s routes, which never count as a method the path takes."""


def post_only(router: APIRouter, path: str) -> None:
    """Answer a GET of `path`, a POST-only path written out beside a `GET .../{id}` route of the
    same router (`/api/v1/repairs/preview`), with 405 and `Allow: POST`, rather than reading the
    word as an id. Call it before the `{id}` route is declared: the first matching route wins."""

    @router.get(path, include_in_schema=False, name=POST_ONLY)
    def refused() -> None:
        raise HTTPException(405, "Method Not Allowed", headers={"Allow": "POST"})
