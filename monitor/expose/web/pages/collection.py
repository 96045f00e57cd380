"""The collection health page: is the monitor still seeing its clusters (`read.collection`)?"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from monitor.collect.jobs import job_intervals
from monitor.core.scheduler import run_intervals
from monitor.expose.read.collection import STALE_INTERVALS, read_collection
from monitor.expose.web.context import Context

router = APIRouter(include_in_schema=False)


@router.get("/collection", response_class=HTMLResponse)
def collection_page(ctx: Context) -> HTMLResponse:
    now = ctx.clock.now()
    with ctx.engine.connect() as conn:
        state = read_collection(conn, ctx.job_intervals or run_intervals(collect=job_intervals()), now)
    return ctx.render(
        "web/collection.html", title="Collection health", stale_intervals=STALE_INTERVALS, **state
    )
