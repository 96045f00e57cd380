"""What people do to alerts: acknowledge an incident, create and expire silences, and list them.

Shared by the CLI, the HTTP API and the acknowledgement link in notifications. Functions take a
connection inside the caller's transaction and never commit. Bad input raises `ActionError` with
a message that says what is wrong and how to fix it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from monitor.alert.matchers import parse_matchers
from monitor.errors import MonitorError


class ActionError(MonitorError):
    """A request about alerts that cannot be carried out as asked."""


def acknowledge(
    conn: Connection,
    *,
    by: str,
    now: datetime,
    group_id: int | None = None,
    token: str | None = None,
    fingerprint: str | None = None,
    comment: str = "",
    via: str = "cli",
) -> list[int]:
    """Acknowledge the open incident(s) named by id, link token or alert fingerprint.

    Returns the acknowledged group ids. An acknowledged incident gets no repeats and is not
    escalated; the next alert cycle passes the acknowledgement on to its receivers once.
    """
    if not by.strip():
        raise ActionError("say who acknowledges (--by NAME)")
    params: dict[str, Any]
    if group_id is not None:
        where, params = "id = :v", {"v": group_id}
    elif token is not None:
        where, params = "ack_token = :v", {"v": token}
    elif fingerprint is not None:
        where, params = "notified ? :v", {"v": fingerprint}
    else:
        raise ActionError("name the incident: a group id, an acknowledgement token or an alert fingerprint")
    rows = conn.execute(
        text(f"SELECT id, acknowledged_at FROM alert_groups WHERE closed_at IS NULL AND {where} FOR UPDATE"),
        params,
    ).all()
    if not rows:
        raise ActionError(
            "no open incident matches; it may have resolved already (see `kafka-health alerts list`)"
        )
    ids = []
    for row in rows:
        conn.execute(
            text(
                "INSERT INTO acks (alert_group_id, acknowledged_by, comment, via, created_at)"
                " VALUES (:g, :by, :comment, :via, :now)"
            ),
            {"g": row.id, "by": by, "comment": comment, "via": via, "now": now},
        )
        if row.acknowledged_at is None:
            conn.execute(
                text("UPDATE alert_groups SET acknowledged_at = :now, acknowledged_by = :by WHERE id = :g"),
                {"g": row.id, "by": by, "now": now},
            )
        ids.append(int(row.id))
    return ids


def create_silence(
    conn: Connection,
    *,
    matchers: list[str],
    created_by: str,
    comment: str,
    now: datetime,
    duration: timedelta,
    max_duration: timedelta,
    starts_at: datetime | None = None,
) -> int:
    """Store a silence over `matchers` (at least one) from `starts_at` (default now) for `duration`."""
    if not matchers:
        raise ActionError("a silence needs at least one matcher, e.g. cluster=prod rule=ConsumerLag")
    try:
        parse_matchers(matchers)
    except ValueError as exc:
        raise ActionError(f"bad matcher: {exc}") from exc
    if not created_by.strip():
        raise ActionError("say who creates the silence (--by NAME)")
    if not comment.strip():
        raise ActionError("say why (--comment TEXT): the next on-call engineer reads it")
    if starts_at is not None and starts_at.tzinfo is None:
        raise ActionError("give the start with its UTC offset, e.g. 2026-11-21T22:00:00+00:00")
    if duration <= timedelta(0):
        raise ActionError("the silence's duration must be positive, e.g. 2h")
    if duration > max_duration:
        raise ActionError(
            f"a silence may last at most {max_duration}; ask for less, or raise settings.silence_max_duration"
        )
    start = starts_at or now
    return int(
        conn.execute(
            text(
                "INSERT INTO silences (matchers, starts_at, ends_at, created_by, comment, created_at)"
                " VALUES (CAST(:m AS jsonb), :s, :e, :by, :c, :now) RETURNING id"
            ),
            {
                "m": json.dumps(matchers),
                "s": start,
                "e": start + duration,
                "by": created_by,
                "c": comment,
                "now": now,
            },
        ).scalar_one()
    )


def expire_silence(conn: Connection, silence_id: int, now: datetime) -> None:
    updated = conn.execute(
        text(
            "UPDATE silences SET expired_at = :now WHERE id = :id AND expired_at IS NULL AND ends_at > :now"
        ),
        {"id": silence_id, "now": now},
    ).rowcount
    if not updated:
        raise ActionError(f"no active silence {silence_id} (see `kafka-health alerts silences`)")


def silences(conn: Connection, now: datetime, include_ended: bool = False) -> list[dict[str, Any]]:
    rows = conn.execute(
        text(
            "SELECT id, matchers, starts_at, ends_at, created_by, comment, created_at, expired_at,"
            " (expired_at IS NULL AND starts_at <= :now AND ends_at > :now) AS active FROM silences"
            " WHERE CAST(:all AS boolean) OR (expired_at IS NULL AND ends_at > :now) ORDER BY id DESC"
        ),
        {"now": now, "all": include_ended},
    )
    return [dict(r._mapping) for r in rows]


def open_alerts(conn: Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        text(
            "SELECT a.id, a.fingerprint, a.rule, a.cluster, a.entity_key, a.severity, a.state, a.summary,"
            " a.starts_at, a.silenced_by, a.inhibited_by, a.labels"
            " FROM alerts a WHERE a.state <> 'resolved'"
            " ORDER BY CASE a.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,"
            " a.pending_since"
        )
    )
    return [dict(r._mapping) for r in rows]


def open_incidents(conn: Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        text(
            "SELECT id, receiver, group_labels, severity, created_at, first_notified_at, last_notified_at,"
            " acknowledged_at, acknowledged_by, escalated_to,"
            " (SELECT count(*) FROM jsonb_object_keys(notified)) AS alerts"
            " FROM alert_groups WHERE closed_at IS NULL ORDER BY id"
        )
    )
    return [dict(r._mapping) for r in rows]
