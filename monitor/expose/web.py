"""The web application: pages rendered from `templates/web`, JSON endpoints, health checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import jinja2
from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from monitor import __version__
from monitor.alert import actions
from monitor.clock import Clock, SystemClock
from monitor.devtools.paths import project_root
from monitor.expose import queries


def template_environment() -> jinja2.Environment:
    """Templates with strict undefined: a missing variable is an error, never an empty string."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(project_root() / "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )


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


def create_app(
    engine: Engine,
    *,
    stale_after: timedelta,
    clock: Clock | None = None,
    silence_max_seconds: int = 7 * 86400,
) -> FastAPI:
    """Build the FastAPI app over `engine`. `/readyz` fails when no collection succeeded within
    `stale_after`."""
    clock = clock or SystemClock()
    templates = template_environment()
    app = FastAPI(title="kafka-health", version=__version__)

    def render(name: str, **context: Any) -> HTMLResponse:
        context.setdefault("generated_at", clock.now().strftime("%Y-%m-%d %H:%M:%S"))
        return HTMLResponse(templates.get_template(name).render(**context))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def overview(request: Request) -> HTMLResponse:
        with engine.connect() as conn:
            clusters = queries.cluster_summaries(conn)
            runs = queries.last_runs(conn)
        return render("web/overview.html", title="Clusters", clusters=clusters, runs=runs)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], response_model=None)
    def readyz() -> JSONResponse:
        """Readiness: PostgreSQL answers and a collection succeeded recently."""
        try:
            with engine.connect() as conn:
                newest = queries.newest_successful_run(conn)
        except SQLAlchemyError:
            return JSONResponse({"status": "unavailable", "reason": "database unreachable"}, 503)
        if newest is None or clock.now() - newest > stale_after:
            age = "never" if newest is None else f"{(clock.now() - newest).total_seconds():.0f}s ago"
            return JSONResponse({"status": "stale", "last_successful_collection": age}, 503)
        return JSONResponse({"status": "ready", "last_successful_collection": newest.isoformat()})

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        """Prometheus text format: the process's own counters (notification deliveries and their
        failures by receiver and reason, among others)."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/api/v1/clusters", tags=["clusters"])
    def clusters() -> list[dict[str, Any]]:
        """Every collected cluster with broker and partition health counts."""
        with engine.connect() as conn:
            return [
                {**asdict(summary), "last_seen": _iso(summary.last_seen)}
                for summary in queries.cluster_summaries(conn)
            ]

    # -- alerts: what people do goes through monitor.alert.actions ------------------------------

    @app.get("/api/v1/alerts", tags=["alerts"])
    def alerts() -> list[dict[str, Any]]:
        """Open alerts, most severe first; muted ones name their silence or inhibiting alert."""
        with engine.connect() as conn:
            return [_jsonable(row) for row in actions.open_alerts(conn)]

    @app.get("/api/v1/incidents", tags=["alerts"])
    def incidents() -> list[dict[str, Any]]:
        """Open notification groups per receiver, with acknowledgement and escalation."""
        with engine.connect() as conn:
            return [_jsonable(row) for row in actions.open_incidents(conn)]

    @app.post("/api/v1/incidents/{incident_id}/ack", tags=["alerts"])
    def ack_incident(incident_id: int, body: AckRequest) -> dict[str, Any]:
        """Acknowledge an incident: no repeats, no escalation; its receivers are told once."""
        with engine.begin() as conn:
            ids = _act(
                lambda: actions.acknowledge(
                    conn, by=body.by, comment=body.comment, now=clock.now(), group_id=incident_id, via="api"
                )
            )
        return {"acknowledged": ids}

    @app.get("/ack/{token}", response_class=HTMLResponse, include_in_schema=False)
    def ack_page(token: str) -> HTMLResponse:
        """The link in a notification: a page that asks who acknowledges (a GET changes nothing)."""
        return render("web/ack.html", title="Acknowledge", token=token, done=None, error=None)

    @app.post("/ack/{token}", response_class=HTMLResponse, include_in_schema=False)
    def ack_link(token: str, by: str = Form(""), comment: str = Form("")) -> HTMLResponse:
        try:
            with engine.begin() as conn:
                ids = actions.acknowledge(
                    conn, by=by, comment=comment, now=clock.now(), token=token, via="link"
                )
        except actions.ActionError as exc:
            page = render("web/ack.html", title="Acknowledge", token=token, done=None, error=str(exc))
            page.status_code = 404 if "no open incident" in str(exc) else 400
            return page
        return render("web/ack.html", title="Acknowledged", token=token, done=ids, error=None)

    @app.get("/api/v1/silences", tags=["alerts"])
    def silences(all: bool = False) -> list[dict[str, Any]]:
        """Silences with who made them and why (active and future; `all=true` adds ended ones)."""
        with engine.connect() as conn:
            return [_jsonable(row) for row in actions.silences(conn, clock.now(), include_ended=all)]

    @app.post("/api/v1/silences", tags=["alerts"], status_code=201)
    def create_silence(body: SilenceRequest) -> dict[str, Any]:
        """Mute the alerts matching every matcher for `duration_seconds`."""
        with engine.begin() as conn:
            silence_id = _act(lambda: actions.create_silence(
                conn, matchers=body.matchers, created_by=body.created_by, comment=body.comment,
                now=clock.now(), duration=timedelta(seconds=body.duration_seconds),
                max_duration=timedelta(seconds=silence_max_seconds), starts_at=body.starts_at))  # fmt: skip
        return {"id": silence_id}

    @app.delete("/api/v1/silences/{silence_id}", tags=["alerts"])
    def expire_silence(silence_id: int) -> dict[str, Any]:
        """End a silence now."""
        with engine.begin() as conn:
            _act(lambda: actions.expire_silence(conn, silence_id, clock.now()))
        return {"expired": silence_id}

    return app


T = TypeVar("T")


def _act(action: Callable[[], T]) -> T:
    """Run an alert action; its refusal becomes a 400 (404 when there is nothing to act on)."""
    try:
        return action()
    except actions.ActionError as exc:
        status = 404 if str(exc).startswith("no ") else 400
        raise HTTPException(status_code=status, detail=str(exc)) from exc


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _iso(v) if isinstance(v, datetime) else v for k, v in row.items()}


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None
