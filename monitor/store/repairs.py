"""The table of the repair actions (`monitor.act.repairs`): `repair_requests`.

One row per request to repair what a finding reports on a cluster's leadership: a preferred leader
election of the partitions it names, or moving leadership off an overloaded broker. The row holds
the plan a reviewer approved (`plan`: which partitions, from which broker to which, the leader
counts before and after), what applying it did (`result`), and whether it helped (`outcome`: the
finding resolved or not, checked after the next evaluation). Its audit entries are in `audit_log`
under the subject `repair_request`. A partial unique index keeps one open repair per cluster, so
two leadership changes never run over each other.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Index, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base, one_of

REPAIR_KINDS = ("preferred_election", "move_leadership")
REPAIR_STATES = (
    "awaiting_approval",  # waits for a reviewer other than the requester
    "approved",  # approved: to be applied (the guardrails are checked again first)
    "applied",  # Kafka did it; `outcome` says whether the finding resolved
    "refused",  # a guardrail refused it (when asked, or again when applying)
    "rejected",  # a reviewer rejected it
    "cancelled",  # withdrawn by the requester before it was applied
    "failed",  # Kafka refused or did not answer the change
)
OPEN_REPAIR_STATES = ("awaiting_approval", "approved")
"""States in which a repair holds its cluster: no other repair on it may open."""
REPAIR_OUTCOMES = ("resolved", "unresolved")


class RepairRequest(Base):
    __tablename__ = "repair_requests"
    __table_args__ = (
        CheckConstraint(one_of("kind", REPAIR_KINDS), name="kind"),
        CheckConstraint(one_of("state", REPAIR_STATES), name="state"),
        CheckConstraint(one_of("outcome", REPAIR_OUTCOMES), name="outcome"),
        Index(
            "uq_repair_requests_open",
            "cluster",
            unique=True,
            postgresql_where=text(one_of("state", OPEN_REPAIR_STATES)),
        ),
        Index("ix_repair_requests_finding_id", "finding_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    cluster: Mapped[str]
    kind: Mapped[str]
    state: Mapped[str]
    finding_id: Mapped[int] = mapped_column(BigInteger)
    """The finding the repair is for (`findings.id`)."""
    rule: Mapped[str]
    broker_id: Mapped[int | None]
    """The broker the finding is about."""
    requested_by: Mapped[str]
    reason: Mapped[str]
    plan: Mapped[dict[str, Any]] = mapped_column(JSONB)
    """`partitions`: [{topic, partition, replicas, leader, new_replicas, new_leader}]; `leaders_before`
    and `leaders_after`: broker id -> partitions it leads."""
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """What applying did: `elected` and `reordered` partitions, and `errors` per partition."""
    refusal: Mapped[str | None]
    approved_by: Mapped[str | None]
    approved_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    applied_at: Mapped[datetime | None]
    last_error: Mapped[str | None]
    outcome: Mapped[str | None]
    """After the apply: `resolved` once the finding resolved, `unresolved` when an evaluation after
    the apply still matched it; null until one of those is seen."""
    outcome_at: Mapped[datetime | None]
