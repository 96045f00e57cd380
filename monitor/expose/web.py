"""The web application: pages rendered from `templates/web`, JSON endpoints, health checks."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from monitor import __version__
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


def create_app(engine: Engine, *, stale_after: timedelta, clock: Clock | None = None) -> FastAPI:
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

    @app.get("/api/v1/clusters", tags=["clusters"])
    def clusters() -> list[dict[str, Any]]:
        """Every collected cluster with broker and partition health counts."""
        with engine.connect() as conn:
            return [
                {**asdict(summary), "last_seen": _iso(summary.last_seen)}
                for summary in queries.cluster_summaries(conn)
            ]

    return app


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None
