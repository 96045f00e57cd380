"""Tables written by the alert stage.

- `alerts`: one open row per fingerprint (rule + cluster + entity), made from the findings, with
  its state (pending -> firing -> resolved), severity and labels (the team among them); a resolved
  row is history.
- `alert_groups`: one row per (receiver, group) incident: what was last notified, when, whether
  it was acknowledged or escalated; `dedup_key` names the incident at the pager.
- `silences`, `acks`: what people said.
- `notification_outbox`: every notification, written in the transaction that decided it, then
  claimed (`FOR UPDATE SKIP LOCKED`) and sent by the sender loop of any instance.
- `notification_log`: one row per delivery attempt (who, what, outcome).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Double, ForeignKey, Index, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from monitor.core.vocabulary import ALERT_STATES, OUTBOX_STATES, RESOLVE_REASONS
from monitor.store.base import Base, one_of

"""dropped: not sent because what it announced was no longer true when it was due."""


class Alert(Base):
    """A finding as the alert stage tracks it. One open row per fingerprint."""

    __tablename__ = "alerts"
    __table_args__ = (
        CheckConstraint(one_of("state", ALERT_STATES), name="state"),
        CheckConstraint(one_of("resolved_reason", RESOLVE_REASONS), name="resolved_reason"),
        Index("uq_alerts_open", "fingerprint", unique=True, postgresql_where=text("state <> 'resolved'")),
        Index("ix_alerts_state", "state"),
        Index("ix_alerts_cluster", "cluster"),
        Index("ix_alerts_resolved_at", "resolved_at", postgresql_where=text("state = 'resolved'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    fingerprint: Mapped[str]
    rule: Mapped[str]
    cluster: Mapped[str]
    entity: Mapped[str]
    entity_key: Mapped[str]
    labels: Mapped[dict[str, Any]] = mapped_column(JSONB)
    severity: Mapped[str]
    state: Mapped[str]
    summary: Mapped[str]
    description: Mapped[str]
    value: Mapped[float | None] = mapped_column(Double)
    annotations: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    """Name -> text: the rule's annotations rendered for it (`monitor.core.annotations`)."""
    pending_since: Mapped[datetime]
    starts_at: Mapped[datetime | None]
    """When it started firing."""
    resolved_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]
    silenced_by: Mapped[int | None] = mapped_column(BigInteger)
    inhibited_by: Mapped[str | None]
    """The fingerprint of the firing alert that inhibits this one."""
    resolved_reason: Mapped[str | None]
    """Its finding's `resolved_reason` (`gone`: the cluster no longer has the entity)."""


class AlertGroup(Base):
    """Notification state of one group of alerts at one receiver (an incident)."""

    __tablename__ = "alert_groups"
    __table_args__ = (
        Index(
            "uq_alert_groups_open",
            "receiver",
            "group_key",
            unique=True,
            postgresql_where=text("closed_at IS NULL"),
        ),
        Index("uq_alert_groups_ack_token", "ack_token", unique=True),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    receiver: Mapped[str]
    group_key: Mapped[str]
    group_labels: Mapped[dict[str, Any]] = mapped_column(JSONB)
    route_path: Mapped[str]
    dedup_key: Mapped[str]
    ack_token: Mapped[str]
    severity: Mapped[str]
    created_at: Mapped[datetime]
    first_notified_at: Mapped[datetime | None]
    last_notified_at: Mapped[datetime | None]
    notified: Mapped[dict[str, Any]] = mapped_column(JSONB)
    """fingerprint -> severity of the firing alerts as last notified (with the kinds of impact an
    inhibiting alert carried, `severity;impact=Rule,Rule`)."""
    acknowledged_at: Mapped[datetime | None]
    acknowledged_by: Mapped[str | None]
    ack_notified_at: Mapped[datetime | None]
    escalated_at: Mapped[datetime | None]
    escalated_to: Mapped[str | None]
    closed_at: Mapped[datetime | None]


class Silence(Base):
    __tablename__ = "silences"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    matchers: Mapped[list[str]] = mapped_column(JSONB)
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime]
    created_by: Mapped[str]
    comment: Mapped[str]
    created_at: Mapped[datetime]
    expired_at: Mapped[datetime | None]
    """Set when someone ends the silence early."""


class Ack(Base):
    __tablename__ = "acks"
    __table_args__ = (Index("ix_acks_group", "alert_group_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    alert_group_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("alert_groups.id", ondelete="CASCADE"))
    acknowledged_by: Mapped[str]
    comment: Mapped[str]
    via: Mapped[str]
    """cli, api or link."""
    created_at: Mapped[datetime]


class OutboxEntry(Base):
    __tablename__ = "notification_outbox"
    __table_args__ = (
        CheckConstraint(one_of("state", OUTBOX_STATES), name="state"),
        Index("ix_notification_outbox_due", "state", "next_attempt_at"),
        Index("ix_notification_outbox_key", "receiver", "dedup_key", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    receiver: Mapped[str]
    kind: Mapped[str]
    group_key: Mapped[str]
    dedup_key: Mapped[str]
    payload: Mapped[str]
    """The Notification as JSON (`Notification.to_json`)."""
    state: Mapped[str]
    attempts: Mapped[int]
    created_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime]
    claimed_by: Mapped[str | None]
    claimed_until: Mapped[datetime | None]
    sent_at: Mapped[datetime | None]
    last_error: Mapped[str | None]
    last_status: Mapped[int | None]


class NotificationLogEntry(Base):
    __tablename__ = "notification_log"
    __table_args__ = (Index("ix_notification_log_outbox", "outbox_id"), Index("ix_notification_log_at", "at"))

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    outbox_id: Mapped[int] = mapped_column(BigInteger)
    receiver: Mapped[str]
    kind: Mapped[str]
    dedup_key: Mapped[str]
    attempt: Mapped[int]
    at: Mapped[datetime]
    outcome: Mapped[str]
    """sent, retry, failed, lost (the claim was taken over) or dropped (the reason says why)."""
    status: Mapped[int | None]
    reason: Mapped[str | None]
    instance: Mapped[str]
    alerts: Mapped[int]


class ChangeVersion(Base):
    """A counter per subject, raised in the transaction that changes it: `findings:<cluster>` by
    each merge of an evaluation's findings (`monitor.store.findings.merge_findings`) and `alerts`
    by each alert cycle. A reader that keeps a copy of the subject's rows between transactions
    (the alert cycle's memory, `monitor.alert.memory`) reads the counter before the rows and
    knows its copy is current while the counter has not moved; written with the rows, the counter
    is never ahead of what a transaction sees, unlike a time or a sequence."""

    __tablename__ = "change_versions"

    subject: Mapped[str] = mapped_column(primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
