"""The inbox: the notifications the console receivers wrote to their files (the demo's stand-in for
Slack, email and the pager), newest first, as a page and an API endpoint.

Which files: every receiver of the routing configuration with `console: {path: ...}`, taken once
from the routing loaded at start (`inbox_paths`). A path is relative to the working directory, as the
receiver writes it. Each file holds one JSON line per notification, the webhook body
(`monitor/alert/receivers/webhook.py`); only the tail of a file is read, so a demo that runs for
days stays fast. Shown per notification: receiver, time, kind, severity, title, and the rules and
clusters of its alerts; never the rest of the body (its acknowledgement link carries a token).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from monitor.alert.config import console_inboxes
from monitor.alert.config.routing import Routing
from monitor.expose.web.context import Context
from monitor.expose.web.inputs import digits

TAIL_BYTES = 4 * 1024 * 1024
"""How much of the end of each file is read: a few thousand notifications."""
DEFAULT_LIMIT = 200


def inbox_paths(routing: Routing) -> dict[str, Path]:
    """Receiver name -> inbox file, for the console receivers with a path in `routing` (as loaded
    at start)."""
    return console_inboxes(routing)


class InboxEntry(BaseModel):
    """One notification as a receiver got it."""

    receiver: str = Field(description="The receiver whose file holds it.")
    created_at: datetime | None = Field(description="When the notification was made.")
    kind: str = Field(description="firing, repeat, escalation, acknowledge or resolved.")
    severity: str = Field(description="The most severe alert of the group: critical, warning or info.")
    title: str = Field(description="The notification's title, as Slack and email show it.")
    alerts: int = Field(description="Alerts in the notification.")
    rules: list[str] = Field(description="The rules of those alerts.")
    clusters: list[str] = Field(description="The clusters of those alerts.")


class Inbox(BaseModel):
    """The newest notifications of every inbox file, newest first."""

    receivers: dict[str, str] = Field(description="Receiver -> the inbox file it writes.")
    items: list[InboxEntry] = Field(description="The notifications, newest first.")
    unreadable_lines: int = Field(description="Lines that were not a notification (skipped).")


def _tail_lines(path: Path, tail_bytes: int) -> list[str]:
    try:
        with path.open("rb") as inbox:
            size = inbox.seek(0, 2)
            start = max(0, size - tail_bytes)
            inbox.seek(start)
            data = inbox.read()
    except FileNotFoundError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if start > 0 else lines  # the first line read may be cut


def _entry(receiver: str, body: Any) -> InboxEntry:
    if not isinstance(body, dict):
        raise ValueError("not an object")
    alerts = [a for a in body.get("alerts") or [] if isinstance(a, dict)]
    created = body.get("created_at")
    return InboxEntry(
        receiver=str(body.get("receiver") or receiver),
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
        kind=str(body.get("kind", "")),
        severity=str(body.get("severity", "")),
        title=str(body.get("title", "")),
        alerts=len(alerts),
        rules=sorted({str(a["rule"]) for a in alerts if a.get("rule")}),
        clusters=sorted({str(a["cluster"]) for a in alerts if a.get("cluster")}),
    )


def read_inbox(
    inboxes: Mapping[str, Path], limit: int = DEFAULT_LIMIT, tail_bytes: int = TAIL_BYTES
) -> Inbox:
    """The newest `limit` notifications of every file in `inboxes`, newest first."""
    items: list[InboxEntry] = []
    unreadable = 0
    for receiver, path in inboxes.items():
        for line in _tail_lines(path, tail_bytes):
            if not line.strip():
                continue
            try:
                items.append(_entry(receiver, json.loads(line)))
            except (ValueError, TypeError):
                unreadable += 1
    items.sort(key=lambda e: e.created_at.timestamp() if e.created_at else 0.0, reverse=True)
    return Inbox(
        receivers={name: str(path) for name, path in inboxes.items()},
        items=items[:limit],
        unreadable_lines=unreadable,
    )


router = APIRouter()


@router.get("/inbox", response_class=HTMLResponse, include_in_schema=False)
def inbox_page(ctx: Context) -> HTMLResponse:
    inbox = read_inbox(ctx.inboxes)
    return ctx.render("web/inbox.html", title="Inbox", inbox=inbox)


@router.get("/api/v1/inbox", tags=["alerts"], response_model=Inbox)
def inbox_api(
    ctx: Context,
    limit: Annotated[
        int, Query(ge=1, le=1000, description="Notifications at most."), digits("limit", 1, 1000)
    ] = DEFAULT_LIMIT,
) -> Inbox:
    """The notifications the console receivers wrote to their inbox files (the demo's
    Slack, email and pager), newest first. Empty when no console receiver has a file."""
    return read_inbox(ctx.inboxes, limit)
