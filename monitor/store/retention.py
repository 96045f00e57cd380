"""Tables written by the act stage (the retention button).

- `retention_requests`: one row per request to raise a topic's retention, with its state
  (see `REQUEST_STATES`), the values before and after, the review, the apply attempts and the
  commits in the config-as-code repository. A partial unique index keeps one open request per
  topic, so two people pressing the button at once cannot both get one.
- `audit_log` (`monitor.store.audit`): every request, decision, apply, verify, revert and
  failure, with who, when, old -> new, reason, approver and commit id.
- `api_tokens`: API tokens for scripts, stored as SHA-256 hashes (tokens are 256-bit random, so a
  fast hash is enough; the token itself is shown once, when it is created).
- `notices`: what the owning team must hear (awaiting approval, applied, about to revert,
  reverted, failed); the alert stage routes them to the team's receivers through its outbox.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, BigInteger, CheckConstraint, Index, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base, one_of

REQUEST_STATES = (
    "awaiting_approval",  # larger than the instant tier: waits for a reviewer
    "approved",  # approved (or instant): to be committed and applied
    "retrying",  # Kafka did not answer the apply; the scheduled job tries again
    "applied",  # Kafka accepted the change; not read back yet
    "verified",  # read back: the new values are in force until expires_at
    "pending_review",  # an instant raise, in force, that a reviewer has not looked at yet
    "expiring",  # expired or rolled back: the old values are being restored
    "reverted",  # the old values are back (read back)
    "refused",  # a guardrail refused it
    "rejected",  # a reviewer rejected it before it was applied
    "cancelled",  # withdrawn before it was applied
    "failed",  # Kafka refused the change, or the read-back did not match
)
OPEN_STATES = (
    "awaiting_approval",
    "approved",
    "retrying",
    "applied",
    "verified",
    "pending_review",
    "expiring",
)
"""States in which a request holds its topic: no other request on it may open."""
IN_FORCE_STATES = ("verified", "pending_review")
TIERS = ("instant", "reviewed")
NOTICE_SEVERITIES = ("info", "warning")


class RetentionRequest(Base):
    __tablename__ = "retention_requests"
    __table_args__ = (
        CheckConstraint(one_of("state", REQUEST_STATES), name="state"),
        CheckConstraint(one_of("tier", TIERS), name="tier"),
        Index(
            "uq_retention_requests_open",
            "cluster",
            "topic",
            unique=True,
            postgresql_where=text(one_of("state", OPEN_STATES)),
        ),
        Index("ix_retention_requests_state", "state"),
        Index("ix_retention_requests_cluster_topic_created_at", "cluster", "topic", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    cluster: Mapped[str]
    topic: Mapped[str]
    state: Mapped[str]
    tier: Mapped[str]
    team: Mapped[str | None]
    """The owning team the request was made for (None for a refused request from no owner)."""
    requested_by: Mapped[str]
    reason: Mapped[str]
    old_configs: Mapped[dict[str, Any]] = mapped_column(JSONB)
    """Config name -> value before the raise (null when Kafka's default applied)."""
    new_configs: Mapped[dict[str, Any]] = mapped_column(JSONB)
    """Config name -> the raised value; only the keys that change."""
    duration_ms: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[datetime | None]
    """Set when the raise is in force: applied_at + duration_ms (moved by an approved extension)."""
    disk: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    """The disk projection shown to the requester: per broker, bytes now, extra bytes, ceiling."""
    refusal: Mapped[str | None]
    review: Mapped[str | None]
    """Instant raises: pending, approved or rolled_back. Reviewed raises: approved before apply."""
    approved_by: Mapped[str | None]
    approved_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    applied_at: Mapped[datetime | None]
    verified_at: Mapped[datetime | None]
    reverted_at: Mapped[datetime | None]
    commit_id: Mapped[str | None]
    revert_commit_id: Mapped[str | None]
    attempts: Mapped[int] = mapped_column(server_default=text("0"))
    next_attempt_at: Mapped[datetime | None]
    last_error: Mapped[str | None]
    extension_ms: Mapped[int | None] = mapped_column(BigInteger)
    """An extension waiting for review: milliseconds to add to expires_at."""
    extension_requested_by: Mapped[str | None]
    extension_reason: Mapped[str | None]
    expiry_notified_at: Mapped[datetime | None]


class ApiToken(Base):
    __tablename__ = "api_tokens"
    __table_args__ = (Index("uq_api_tokens_token_hash", "token_hash", unique=True),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    name: Mapped[str]
    user_name: Mapped[str]
    teams: Mapped[list[str]] = mapped_column(ARRAY(Text))
    token_hash: Mapped[str]
    """SHA-256 of the token, hex."""
    created_by: Mapped[str]
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class Notice(Base):
    __tablename__ = "notices"
    __table_args__ = (
        CheckConstraint(one_of("severity", NOTICE_SEVERITIES), name="severity"),
        Index("ix_notices_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime]
    request_id: Mapped[int | None] = mapped_column(BigInteger)
    cluster: Mapped[str]
    topic: Mapped[str]
    team: Mapped[str | None]
    kind: Mapped[str]
    severity: Mapped[str]
    summary: Mapped[str]
    description: Mapped[str]
