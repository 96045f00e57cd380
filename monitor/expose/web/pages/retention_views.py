"""What the retention button's pages show, and the forms they read: kept apart from the routes
(`pages.retention`) so the forms' parsing and the views can be tested without a server.

- `RaiseForm`: the button's form. Numbers with units (retention.ms in minutes, hours or days;
  retention.bytes in MiB, GiB or TiB per partition; the duration in hours or days) become the
  milliseconds and bytes `RetentionService` takes; a bad value is a `ValueError` saying which
  field and how to write it.
- Flash messages: after a change the page redirects (POST-redirect-GET) and the next page shows
  what happened, carried in a short-lived cookie that the page showing it clears. The message is
  escaped when shown, like every other value.
- `actions_for`: which buttons a request offers to whom. Only a hint for the page: the service
  decides (and refuses with its reason) whatever is pressed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final
from urllib.parse import quote

from monitor.act.model import describe_change, display_state, show_value
from monitor.act.policy import KAFKA_LONG_MAX, Policy
from monitor.act.request import Request
from monitor.core.identity import Identity
from monitor.core.user_input import decimal

FLASH_COOKIE: Final = "kh_flash"
FLASH_MAX_AGE_SECONDS: Final = 120
_FLASH_MAX_CHARS: Final = 3000
"""A cookie holds about 4 KB; a longer message is cut (the audit log keeps all of it)."""

MS_UNITS: Final = {"minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
BYTE_UNITS: Final = {"MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
DURATION_UNITS: Final = {"hours": 3_600_000, "days": 86_400_000}
FORM_FIELDS: Final = (
    "retention_ms_value",
    "retention_ms_unit",
    "retention_bytes_value",
    "retention_bytes_unit",
    "duration_value",
    "duration_unit",
    "reason",
)


@dataclass(frozen=True, slots=True)
class RaiseForm:
    """The button's form, parsed: what to set, for how long, and why."""

    new: dict[str, int]
    duration_ms: int
    reason: str
    fields: dict[str, str]
    """The submitted fields as typed, to fill the confirmation's hidden form and the way back."""


def _amount(form: Mapping[str, str], field: str, units: Mapping[str, int], label: str) -> int | None:
    raw = form.get(f"{field}_value", "").strip()
    if not raw:
        return None
    unit = form.get(f"{field}_unit", "")
    if unit not in units:
        raise ValueError(f"{label}: choose a unit among {', '.join(units)}")
    number = decimal(raw, label)
    if number <= 0:
        raise ValueError(f"{label}: give a number above 0, not {raw[:40]!r}")
    if number > Decimal(KAFKA_LONG_MAX) / units[unit]:
        raise ValueError(f"{label}: {raw[:40]!r} {unit} is more than Kafka can hold; give a smaller number")
    return int(number * units[unit])


def parse_raise_form(form: Mapping[str, str]) -> RaiseForm:
    """Parse the button's form. Raises ValueError naming the field that is wrong and the fix."""
    new = {
        name: value
        for name, value in (
            ("retention.ms", _amount(form, "retention_ms", MS_UNITS, "new retention.ms")),
            ("retention.bytes", _amount(form, "retention_bytes", BYTE_UNITS, "new retention.bytes")),
        )
        if value is not None
    }
    if not new:
        raise ValueError("give a new retention.ms and/or a new retention.bytes")
    duration = _amount(form, "duration", DURATION_UNITS, "duration")
    if duration is None:
        raise ValueError("duration: say how long the raise lasts before it reverts, e.g. 12 hours")
    reason = form.get("reason", "").strip()
    if not reason:
        raise ValueError("reason: say what is lagging and why it needs more time")
    if len(reason) > 2000:
        raise ValueError("reason: at most 2000 characters")
    return RaiseForm(new, duration, reason, {f: form.get(f, "") for f in FORM_FIELDS})


def duration_ms_of(form: Mapping[str, str]) -> int:
    """The extension form's duration. Raises ValueError saying how to fill it."""
    duration = _amount(form, "duration", DURATION_UNITS, "duration")
    if duration is None:
        raise ValueError("duration: say how much longer the raise lasts, e.g. 1 day")
    return duration


# -- flash messages -----------------------------------------------------------------------------


def flash_value(kind: str, text: str, lines: list[str] | None = None) -> str:
    """A flash message as a cookie value. `kind` is `ok` or `error`."""
    body = {"kind": kind, "text": text[:_FLASH_MAX_CHARS], "lines": [ln[:500] for ln in (lines or [])[:12]]}
    return base64.urlsafe_b64encode(json.dumps(body).encode("utf-8")).decode("ascii")


def read_flash(value: str | None) -> dict[str, Any] | None:
    """The message in a flash cookie; None when there is none or it is not one of ours."""
    if not value:
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(value.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        return None
    if not isinstance(body, dict) or body.get("kind") not in ("ok", "error"):
        return None
    lines = body.get("lines")
    return {
        "kind": body["kind"],
        "text": str(body.get("text", "")),
        "lines": [str(ln) for ln in lines] if isinstance(lines, list) else [],
    }


# -- views --------------------------------------------------------------------------------------


def topic_href(cluster: str, topic: str) -> str:
    return f"/clusters/{quote(cluster, safe='')}/topics/{quote(topic, safe='')}"


def identity_view(who: Identity | None) -> dict[str, Any] | None:
    if who is None:
        return None
    return {"user": who.user, "teams": sorted(who.teams), "source": who.source}


def request_view(request: Request) -> dict[str, Any]:
    """A request as the pages show it: its words for the state and the change, its link."""
    return {
        **request.as_dict(),
        "display_state": display_state(request),
        "change": describe_change(request),
        "duration": show_value("retention.ms", request.duration_ms),
        "extension": show_value("retention.ms", request.extension_ms) if request.extension_ms else None,
        "href": topic_href(request.cluster, request.topic),
    }


def actions_for(request: Request, who: Identity | None, policy: Policy) -> list[str]:
    """The buttons `who` sees on `request`: approve, reject, withdraw, revert, extend."""
    if who is None:
        return []
    actions: list[str] = []
    reviewer = policy.is_reviewer(who.teams)
    if reviewer and request.awaits_decision:
        actions += ["approve", "reject"]
    if who.user == request.requested_by and request.withdrawable:
        actions.append("withdraw")
    owner = request.team in who.teams
    if request.in_force and (owner or reviewer):
        actions.append("revert")
    if request.in_force and owner and not request.extension_ms:
        actions.append("extend")
    return actions


SECTIONS: Final = (
    ("awaiting", "Awaiting approval", "A reviewer must approve these (or their extension) first."),
    ("review", "Applied, pending review", "Instant raises in force: a reviewer approves or rolls them back."),
    ("applied", "Applied", "In force until they expire and revert by themselves."),
    ("moving", "In progress", "Being applied, retried or reverted by the scheduled job."),
)


def section_of(request: Request) -> str:
    """Which list of the /retention page an open request belongs in."""
    if request.state == "awaiting_approval" or request.extension_pending:
        return "awaiting"
    if request.review_pending:
        return "review"
    if request.in_force:
        return "applied"
    return "moving"


def disk_rows(disk: Mapping[str, Any], ceiling: float) -> list[dict[str, Any]]:
    """Each broker's disk before and after the raise, against the policy's ceiling."""
    rows = []
    for broker in disk.get("brokers") or []:
        total = int(broker["total_bytes"])
        used = int(broker["used_bytes"])
        now_ratio = used / total if total else None
        ratio = float(broker["projected_ratio"])
        rows.append({**broker, "used_ratio": now_ratio, "over": ratio > ceiling})
    return rows


def changes(preview: Mapping[str, Any], new: Mapping[str, int]) -> list[dict[str, str]]:
    """current -> new of each config the raise sets, in words (2 d, 50.0 GiB, unlimited)."""
    current = preview.get("current") or {}
    return [
        {
            "name": name,
            "current": str(current[name]["shown"]) if name in current else "not known",
            "new": show_value(name, value),
        }
        for name, value in sorted(new.items())
    ]


def audit_view(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Audit rows with their old -> new values in words."""
    out = []
    for row in rows:
        old, new = row.get("old_value") or {}, row.get("new_value") or {}
        change = "; ".join(
            f"{name} {show_value(name, old[name])} → {show_value(name, value)}"
            if old.get(name) is not None
            else f"{name} = {show_value(name, value)}"
            for name, value in sorted(new.items())
        )
        out.append({**row, "change": change})
    return out
