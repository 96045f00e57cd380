"""A repair request as the act stage handles it, the moves its state may make, and its storage.

`Repair` is one row of `repair_requests`, typed and frozen. `TRANSITIONS` is the one table of its
state moves; `transition` checks every change against it and writes the audit entry in the same
transaction (subject `repair_request`), as the retention ledger does for retention requests:

    awaiting_approval -> approved (a reviewer other than the requester) | rejected | cancelled
    approved -> applied | refused (a guardrail, checked again at apply) | failed (Kafka)

refused, rejected, cancelled, failed are final; applied is final too, apart from its `outcome`
(resolved or unresolved), recorded once the finding's next evaluations tell. A new request starts
`refused` or `awaiting_approval`. Functions take a connection and never commit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from monitor.act.model import RetentionError
from monitor.store import audit as audit_trail
from monitor.store.audit import Audit, AuditEntry
from monitor.store.repairs import REPAIR_STATES, RepairRequest

SUBJECT = "repair_request"
TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "awaiting_approval": frozenset({"approved", "rejected", "cancelled"}),
    "approved": frozenset({"applied", "refused", "failed"}),
    "applied": frozenset(),
    "refused": frozenset(),
    "rejected": frozenset(),
    "cancelled": frozenset(),
    "failed": frozenset(),
}
INITIAL_STATES: Final = frozenset({"refused", "awaiting_approval"})


class RepairError(RetentionError):
    """A repair that cannot be carried out as asked: the act stage's error codes (refused,
    forbidden, not_found, conflict, unavailable, invalid), answered by the API like a retention
    request's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Repair:
    """One repair request (a row of `repair_requests`; the columns are documented there)."""

    id: int
    cluster: str
    kind: str
    state: str
    finding_id: int
    rule: str
    broker_id: int | None
    requested_by: str
    reason: str
    plan: dict[str, Any]
    result: dict[str, Any] | None
    refusal: str | None
    approved_by: str | None
    approved_at: datetime | None
    created_at: datetime
    updated_at: datetime
    applied_at: datetime | None
    last_error: str | None
    outcome: str | None
    outcome_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Repair:
        return cls(**{name: row[name] for name in COLUMNS})

    def as_json(self) -> dict[str, Any]:
        """Column -> JSON value (the API, `repair show --json`)."""
        return {
            name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in ((n, getattr(self, n)) for n in COLUMNS)
        }


COLUMNS: Final[tuple[str, ...]] = tuple(RepairRequest.__table__.columns.keys())
if set(COLUMNS) != {f.name for f in dataclasses.fields(Repair)}:  # pragma: no cover
    raise ImportError("monitor.act.repair_request.Repair no longer matches the repair_requests table")
if set(TRANSITIONS) != set(REPAIR_STATES):  # pragma: no cover
    raise ImportError("monitor.act.repair_request.TRANSITIONS must name every state of REPAIR_STATES")


def write_audit(conn: Connection, repair_id: int, cluster: str | None, audit: Audit, now: datetime) -> None:
    audit_trail.write_entry(conn, audit, at=now, subject=SUBJECT, subject_id=repair_id, cluster=cluster)


def insert_repair(conn: Connection, values: Mapping[str, Any], audits: Sequence[Audit], now: datetime) -> int:
    """Store a new repair and its first audit entries; returns its id. RepairError("refused") when
    another repair on the cluster is open (two people asking at once)."""
    if values["state"] not in INITIAL_STATES:
        raise ValueError(f"a repair cannot start {values['state']!r}")
    try:
        with conn.begin_nested():
            repair_id = int(
                conn.execute(
                    insert(RepairRequest)
                    .values(**values, created_at=now, updated_at=now)
                    .returning(RepairRequest.id)
                ).scalar_one()
            )
    except IntegrityError as exc:
        if "uq_repair_requests_open" in str(exc.orig):
            raise RepairError(
                "refused",
                f"one_open_repair: another repair on cluster {values['cluster']!r} awaits approval "
                "or is being applied; decide that one first (`kafka-health repair list`)",
            ) from exc
        raise
    for audit in audits:
        write_audit(conn, repair_id, str(values["cluster"]), audit, now)
    return repair_id


def get(conn: Connection, repair_id: int, *, lock: bool = False) -> Repair:
    """The repair (its row locked for the transaction with `lock`); RepairError("not_found")."""
    query = select(RepairRequest.__table__).where(RepairRequest.id == repair_id)
    row = conn.execute(query.with_for_update() if lock else query).mappings().first()
    if row is None:
        raise RepairError("not_found", f"no repair {repair_id}; see `kafka-health repair list`")
    return Repair.from_row(row)


def transition(
    conn: Connection, repair: Repair, changes: Mapping[str, Any], audit: Audit, now: datetime
) -> Repair:
    """Update the repair with `changes` and write `audit`; a new state must be one `TRANSITIONS`
    allows, else RepairError("conflict") says which moves are allowed."""
    wanted = changes.get("state")
    if wanted is not None and wanted not in TRANSITIONS[repair.state]:
        allowed = ", ".join(sorted(TRANSITIONS[repair.state])) or "none: it is final"
        raise RepairError(
            "conflict",
            f"repair {repair.id} cannot move from {repair.state!r} to {wanted!r}; it may move to: {allowed}",
        )
    conn.execute(update(RepairRequest).where(RepairRequest.id == repair.id).values(**changes, updated_at=now))
    write_audit(conn, repair.id, repair.cluster, audit, now)
    return dataclasses.replace(repair, **changes, updated_at=now)


def list_repairs(
    conn: Connection, *, cluster: str | None = None, states: Sequence[str] | None = None, limit: int = 100
) -> list[Repair]:
    query = select(RepairRequest.__table__).order_by(RepairRequest.id.desc()).limit(limit)
    if cluster is not None:
        query = query.where(RepairRequest.cluster == cluster)
    if states:
        query = query.where(RepairRequest.state.in_(states))
    return [Repair.from_row(r) for r in conn.execute(query).mappings()]


def audit_of(conn: Connection, repair_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(AuditEntry.__table__)
        .where(AuditEntry.subject == SUBJECT, AuditEntry.subject_id == repair_id)
        .order_by(AuditEntry.id)
    )
    return [dict(r) for r in rows.mappings()]
