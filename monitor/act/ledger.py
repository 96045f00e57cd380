"""Reading and writing retention requests, the audit log and notices.

Functions take a connection inside the caller's transaction and never commit. Every change of a
request's state goes through `transition`, which checks the move against the one table of
allowed moves (`monitor.act.request.TRANSITIONS`) and writes the audit row in the same
transaction, so a state the table shows always has its audit entry, and the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from monitor.act.model import RetentionError
from monitor.act.request import Draft, IllegalTransition, Request, check_transition
from monitor.store import audit as audit_trail
from monitor.store.audit import Audit, AuditEntry
from monitor.store.retention import OPEN_STATES, Notice, RetentionRequest

SYSTEM_ACTOR = "kafka-health"


class TopicBusy(Exception):
    """Another open request holds the topic (the unique index said so)."""


def insert_request(conn: Connection, draft: Draft, audits: Sequence[Audit], now: datetime) -> int:
    """Store a new request and its first audit entries; returns its id.

    Raises TopicBusy when an open request on the topic appeared meanwhile (two people pressing the
    button at once): the caller refuses the second one.
    """
    check_transition(None, None, draft.state)
    values = draft.values()
    try:
        with conn.begin_nested():
            request_id = int(
                conn.execute(
                    insert(RetentionRequest)
                    .values(**values, created_at=now, updated_at=now)
                    .returning(RetentionRequest.id)
                ).scalar_one()
            )
    except IntegrityError as exc:
        if "uq_retention_requests_open" in str(exc.orig):
            raise TopicBusy(draft.topic) from exc
        raise
    for audit in audits:
        write_audit(conn, request_id, draft.cluster, draft.topic, audit, now)
    return request_id


def write_audit(
    conn: Connection,
    request_id: int | None,
    cluster: str | None,
    topic: str | None,
    audit: Audit,
    now: datetime,
) -> None:
    audit_trail.write_entry(
        conn,
        audit,
        at=now,
        subject="retention_request",
        subject_id=request_id,
        request_id=request_id,
        cluster=cluster,
        topic=topic,
    )


def lock(conn: Connection, request_id: int, *, skip_locked: bool = False) -> Request | None:
    """The request, its row locked for the transaction (None when missing, or locked elsewhere
    with `skip_locked`)."""
    query = select(RetentionRequest.__table__).where(RetentionRequest.id == request_id)
    query = query.with_for_update(skip_locked=skip_locked)
    row = conn.execute(query).mappings().first()
    return Request.from_row(row) if row is not None else None


def get(conn: Connection, request_id: int) -> Request | None:
    row = (
        conn.execute(select(RetentionRequest.__table__).where(RetentionRequest.id == request_id))
        .mappings()
        .first()
    )
    return Request.from_row(row) if row is not None else None


def _missing(request_id: int) -> RetentionError:
    return RetentionError(
        "not_found", f"no retention request {request_id}; see `kafka-health retention list`"
    )


def get_existing(conn: Connection, request_id: int) -> Request:
    """The request; RetentionError("not_found") when there is none."""
    request = get(conn, request_id)
    if request is None:
        raise _missing(request_id)
    return request


def lock_existing(conn: Connection, request_id: int) -> Request:
    """The request, its row locked (waiting for another holder); RetentionError("not_found") when
    there is none."""
    request = lock(conn, request_id)
    if request is None:
        raise _missing(request_id)
    return request


def transition(
    conn: Connection, request: Request, changes: Mapping[str, Any], audit: Audit, now: datetime
) -> Request:
    """Update the request with `changes` (column -> value, a new state among them or not) and write
    `audit`. A new state must be one `TRANSITIONS` allows from the request's state, else
    RetentionError("conflict") says which moves are allowed; an unknown column is a ValueError."""
    changed = request.with_changes({**changes, "updated_at": now})
    if "state" in changes:
        try:
            check_transition(request.id, request.state, changed.state)
        except IllegalTransition as exc:
            raise RetentionError("conflict", str(exc)) from exc
    conn.execute(
        update(RetentionRequest).where(RetentionRequest.id == request.id).values(**changes, updated_at=now)
    )
    write_audit(conn, request.id, request.cluster, request.topic, audit, now)
    return changed


def open_request_id(conn: Connection, cluster: str, topic: str) -> int | None:
    found = conn.execute(
        select(RetentionRequest.id).where(
            RetentionRequest.cluster == cluster,
            RetentionRequest.topic == topic,
            RetentionRequest.state.in_(OPEN_STATES),
        )
    ).scalar()
    return int(found) if found is not None else None


def due_ids(
    conn: Connection, states: Sequence[str], now: datetime, *, expiring_at: bool = False
) -> list[int]:
    """Requests in `states` whose next attempt is due (or, with `expiring_at`, whose expiry passed)."""
    if expiring_at:
        condition = RetentionRequest.expires_at <= now
    else:
        condition = func.coalesce(RetentionRequest.next_attempt_at, now) <= now
    rows = conn.execute(
        select(RetentionRequest.id)
        .where(RetentionRequest.state.in_(states), condition)
        .order_by(RetentionRequest.id)
    )
    return [int(r) for r in rows.scalars()]


def expiring_soon(conn: Connection, states: Sequence[str], before: datetime) -> list[Request]:
    """Requests in force that expire before `before` and whose team was not told yet."""
    rows = conn.execute(
        select(RetentionRequest.__table__).where(
            RetentionRequest.state.in_(states),
            RetentionRequest.expires_at <= before,
            RetentionRequest.expiry_notified_at.is_(None),
        )
    )
    return [Request.from_row(r) for r in rows.mappings()]


def list_requests(
    conn: Connection,
    *,
    cluster: str | None = None,
    topic: str | None = None,
    states: Sequence[str] | None = None,
    limit: int = 100,
) -> list[Request]:
    query = select(RetentionRequest.__table__).order_by(RetentionRequest.id.desc()).limit(limit)
    if cluster is not None:
        query = query.where(RetentionRequest.cluster == cluster)
    if topic is not None:
        query = query.where(RetentionRequest.topic == topic)
    if states:
        query = query.where(RetentionRequest.state.in_(states))
    return [Request.from_row(r) for r in conn.execute(query).mappings()]


def audit_of(conn: Connection, request_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(AuditEntry.__table__).where(AuditEntry.request_id == request_id).order_by(AuditEntry.id)
    )
    return [dict(r) for r in rows.mappings()]


def topic_audit(conn: Connection, cluster: str, topic: str, limit: int = 100) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(AuditEntry.__table__)
        .where(AuditEntry.cluster == cluster, AuditEntry.topic == topic)
        .order_by(AuditEntry.id.desc())
        .limit(limit)
    )
    return [dict(r) for r in rows.mappings()]


def add_notice(
    conn: Connection,
    request: Request,
    *,
    team: str | None,
    kind: str,
    severity: str,
    summary: str,
    description: str,
    now: datetime,
) -> None:
    """A notice for `team`, delivered by the alert stage to that team's receivers."""
    conn.execute(
        insert(Notice).values(
            created_at=now,
            request_id=request.id,
            cluster=request.cluster,
            topic=request.topic,
            team=team,
            kind=kind,
            severity=severity,
            summary=summary,
            description=description,
        )
    )
