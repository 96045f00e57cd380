"""The audit trail: one append-only table, `audit_log`, for every change a person (or the
scheduled retention job) makes: retention requests and their decisions, silences created and
expired, incidents acknowledged, repair actions (`repair_request`), and the refusals of
identified people.

A row says who (`actor`, and how they were identified: `via`), what (`subject`, `subject_id`,
`action`, old and new values, `reason`), when (`at`) and from where (`address`: the client
address of a web request, `cli@host` for the command line). It is written in the transaction of
the change it records, so the table never shows a change without its entry, or the other way
round. Retention rows also name the request, cluster and topic (`request_id`, `cluster`, `topic`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import BigInteger, CheckConstraint, Connection, Engine, Index, insert, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from monitor.core.identity import Identity
from monitor.store.base import Base, one_of

SUBJECTS = ("retention_request", "silence", "incident", "repair_request")


class AuditEntry(Base):
    __tablename__ = "audit_log"
    __table_args__ = (
        CheckConstraint(one_of("subject", SUBJECTS), name="subject"),
        Index("ix_audit_log_cluster_topic_at", "cluster", "topic", "at"),
        Index("ix_audit_log_request_id", "request_id"),
        Index("ix_audit_log_subject", "subject", "subject_id"),
        Index("ix_audit_log_actor_at", "actor", "at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    subject: Mapped[str] = mapped_column(server_default=text("'retention_request'"))
    subject_id: Mapped[int | None] = mapped_column(BigInteger)
    request_id: Mapped[int | None] = mapped_column(BigInteger)
    cluster: Mapped[str | None]
    topic: Mapped[str | None]
    actor: Mapped[str]
    """Who did it: a person, or `kafka-health` for the scheduled jobs."""
    via: Mapped[str | None]
    """How the actor was identified: proxy, token, development, cli, or link (an acknowledgement
    link, with the identity of whoever followed it)."""
    address: Mapped[str | None]
    """From where: the web client's address, or `cli@<host>`."""
    action: Mapped[str]
    """Retention: requested, refused, approved, rejected, cancelled, committed, applied, verified,
    retrying, failed, expiring, reverted, review_approved, rolled_back, extension_requested,
    extended, push_failed. Alerts: silence_created, silence_expired, acknowledged, refused.
    Repairs: requested, refused, awaiting_approval, approved, rejected, cancelled, applied, failed,
    resolved, unresolved."""
    old_value: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    new_value: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    reason: Mapped[str | None]
    approver: Mapped[str | None]
    commit_id: Mapped[str | None]
    detail: Mapped[str | None]


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts, as the audit trail records them."""

    name: str
    via: str | None = None
    address: str | None = None


@dataclass(frozen=True, slots=True)
class Audit:
    """One audit entry to write beside a change (of a retention request or a repair request): its
    fields are columns of `audit_log`; the subject and its ids are given when it is written
    (`write_entry`)."""

    actor: str
    action: str
    old_value: Mapping[str, Any] | None = None
    new_value: Mapping[str, Any] | None = None
    reason: str | None = None
    approver: str | None = None
    commit_id: str | None = None
    detail: str | None = None
    via: str | None = None
    """How the actor was identified (proxy, token, development, cli); None for the scheduled job."""
    address: str | None = None
    """From where the actor asked (a client address, `cli@host`)."""

    @classmethod
    def by(
        cls,
        who: Identity,
        action: str,
        old_value: Mapping[str, Any] | None = None,
        new_value: Mapping[str, Any] | None = None,
        **fields: str | None,
    ) -> Audit:
        """An entry for what person `who` did, with how and from where they were identified."""
        return cls(
            who.user, action, old_value, new_value, via=who.source, address=who.address or None, **fields
        )


if {f.name for f in fields(Audit)} - set(AuditEntry.__table__.columns.keys()):  # pragma: no cover
    raise ImportError("monitor.store.audit.Audit names a field that is no column of audit_log")


def write(
    conn: Connection,
    *,
    at: datetime,
    subject: str,
    subject_id: int | None,
    actor: Actor,
    action: str,
    old_value: Mapping[str, Any] | None = None,
    new_value: Mapping[str, Any] | None = None,
    reason: str | None = None,
    detail: str | None = None,
    request_id: int | None = None,
    cluster: str | None = None,
    topic: str | None = None,
    approver: str | None = None,
    commit_id: str | None = None,
) -> None:
    """Append one entry inside the caller's transaction."""
    entry = Audit(
        actor.name,
        action,
        old_value,
        new_value,
        reason=reason,
        approver=approver,
        commit_id=commit_id,
        detail=detail,
        via=actor.via,
        address=actor.address,
    )
    write_entry(
        conn, entry, at=at, subject=subject, subject_id=subject_id, cluster=cluster, topic=topic,
        request_id=request_id,
    )  # fmt: skip


def write_entry(
    conn: Connection,
    entry: Audit,
    *,
    at: datetime,
    subject: str,
    subject_id: int | None,
    cluster: str | None,
    topic: str | None = None,
    request_id: int | None = None,
) -> None:
    """Append `entry` about `subject` `subject_id` inside the caller's transaction."""
    if subject not in SUBJECTS:
        raise ValueError(f"unknown audit subject {subject!r}; one of {', '.join(SUBJECTS)}")
    columns = {field.name: getattr(entry, field.name) for field in fields(Audit)}
    for json_column in ("old_value", "new_value"):
        if columns[json_column] is not None:
            columns[json_column] = dict(columns[json_column])
    conn.execute(
        insert(AuditEntry).values(
            at=at,
            subject=subject,
            subject_id=subject_id,
            request_id=request_id,
            cluster=cluster,
            topic=topic,
            **columns,
        )
    )


def recent_entries(conn: Connection, actor: str, via: str, since: datetime, limit: int) -> list[datetime]:
    """When `actor`, identified `via` (as `cli`), did each of their newest `limit` things since
    `since` (changes and refused attempts alike), newest first: what the command line's limit on
    changes per minute counts."""
    rows = conn.execute(
        select(AuditEntry.at)
        .where(AuditEntry.actor == actor, AuditEntry.via == via, AuditEntry.at > since)
        .order_by(AuditEntry.at.desc())
        .limit(limit)
    )
    return list(rows.scalars())


Refusal = TypeVar("Refusal", bound=Exception)


@contextmanager
def refusals_recorded(
    engine: Engine, refusal: type[Refusal], record: Callable[[Connection, Refusal], None]
) -> Iterator[Connection]:
    """A transaction for one change a person asks for. A refusal (an exception of type `refusal`:
    not allowed, not in a state that allows it) rolls the change back; `record` then writes its
    audit entry in a transaction of its own, and the refusal is raised again for the caller to
    answer. So a refused attempt is on the trail as surely as a change."""
    try:
        with engine.begin() as conn:
            yield conn
    except refusal as exc:
        with engine.begin() as conn:
            record(conn, exc)
        raise


def entries(
    conn: Connection, subject: str, subject_id: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The newest entries about `subject` (one of them, with `subject_id`), newest first."""
    query = select(AuditEntry.__table__).where(AuditEntry.subject == subject)
    if subject_id is not None:
        query = query.where(AuditEntry.subject_id == subject_id)
    rows = conn.execute(query.order_by(AuditEntry.id.desc()).limit(limit)).mappings()
    return [dict(row) for row in rows]
