"""A retention request as the act stage handles it, and the moves its state may make.

`Request` is one row of `retention_requests`, typed; every step takes one and returns the updated
one (it is frozen: a step never changes a request behind the ledger's back). `Draft` is what a new
request is stored with. `TRANSITIONS` is the one table of the state moves the flow makes; the
ledger checks every change of state against it, so a step that tries another move fails
(`IllegalTransition`, which the ledger raises as `RetentionError("conflict")`) instead of writing
a state the flow cannot leave:

    awaiting_approval -> approved (a reviewer) | rejected | cancelled (the requester)
    approved, retrying -> retrying (Kafka did not answer) | applied | failed | cancelled
    applied -> verified | pending_review (read back; instant raises await their review) | failed
    pending_review -> verified (reviewed) | expiring (rolled back, reverted, expired)
    verified -> verified (an extension approved) | expiring (reverted, expired)
    expiring -> expiring (Kafka did not answer, or refused) | reverted

refused, rejected, cancelled, failed and reverted are final. A new request starts `refused`,
`approved` (instant tier) or `awaiting_approval` (reviewed tier).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from monitor.store.retention import IN_FORCE_STATES, OPEN_STATES, REQUEST_STATES, RetentionRequest

TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "awaiting_approval": frozenset({"approved", "rejected", "cancelled"}),
    "approved": frozenset({"retrying", "applied", "failed", "cancelled"}),
    "retrying": frozenset({"retrying", "applied", "failed", "cancelled"}),
    "applied": frozenset({"verified", "pending_review", "failed"}),
    "pending_review": frozenset({"verified", "expiring"}),
    "verified": frozenset({"verified", "expiring"}),
    "expiring": frozenset({"expiring", "reverted"}),
    "refused": frozenset(),
    "rejected": frozenset(),
    "cancelled": frozenset(),
    "failed": frozenset(),
    "reverted": frozenset(),
}
"""State -> the states a request in it may move to. Every state of `REQUEST_STATES` is a key."""
INITIAL_STATES: Final = frozenset({"refused", "approved", "awaiting_approval"})
"""The states a new request is stored in."""
WITHDRAWABLE_STATES: Final = frozenset(s for s, to in TRANSITIONS.items() if "cancelled" in to)
"""Not applied yet: the requester may still withdraw it."""


class IllegalTransition(ValueError):
    """A step tried a state move that `TRANSITIONS` does not allow (a bug in the step, or a
    request that moved on meanwhile)."""

    def __init__(self, request_id: int | None, current: str, wanted: str) -> None:
        allowed = ", ".join(sorted(TRANSITIONS.get(current, ()))) or "none: it is final"
        super().__init__(
            f"retention request {request_id if request_id is not None else '(new)'} cannot move from "
            f"{current!r} to {wanted!r}; from {current!r} it may move to: {allowed}"
        )
        self.current = current
        self.wanted = wanted


def check_transition(request_id: int | None, current: str | None, wanted: str) -> None:
    """Raise IllegalTransition unless a request in `current` (None: a new one) may move to `wanted`."""
    if wanted not in TRANSITIONS:
        raise IllegalTransition(request_id, current or "(new)", wanted)
    allowed = INITIAL_STATES if current is None else TRANSITIONS.get(current, frozenset())
    if wanted not in allowed:
        raise IllegalTransition(request_id, current or "(new)", wanted)


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """A request about to be stored: what was asked, and what the guardrails decided."""

    cluster: str
    topic: str
    state: str
    tier: str
    team: str | None
    requested_by: str
    reason: str
    old_configs: dict[str, dict[str, str | None]]
    """Config name -> {"value", "source"} before the raise, for the keys the raise changes."""
    new_configs: dict[str, str]
    duration_ms: int
    disk: dict[str, Any]
    refusal: str | None = None
    review: str | None = None

    def values(self) -> dict[str, Any]:
        """The columns to insert."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One retention request (a row of `retention_requests`; the columns are documented there)."""

    id: int
    cluster: str
    topic: str
    state: str
    tier: str
    team: str | None
    requested_by: str
    reason: str
    old_configs: dict[str, dict[str, str | None]]
    new_configs: dict[str, str]
    duration_ms: int
    expires_at: datetime | None
    disk: dict[str, Any]
    refusal: str | None
    review: str | None
    approved_by: str | None
    approved_at: datetime | None
    created_at: datetime
    updated_at: datetime
    applied_at: datetime | None
    verified_at: datetime | None
    reverted_at: datetime | None
    commit_id: str | None
    revert_commit_id: str | None
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    extension_ms: int | None = None
    extension_requested_by: str | None = None
    extension_reason: str | None = None
    expiry_notified_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Request:
        """A request from its table row (every column present)."""
        return cls(**{name: row[name] for name in COLUMNS})

    def with_changes(self, changes: Mapping[str, Any]) -> Request:
        """A copy with `changes` (column -> value); an unknown column is a ValueError."""
        unknown = set(changes) - set(COLUMNS)
        if unknown:
            raise ValueError(f"retention_requests has no column(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Column -> value (the JSON views and the templates read this)."""
        return {name: getattr(self, name) for name in COLUMNS}

    # -- what the state says ------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Holds its topic: no other request on it may open."""
        return self.state in OPEN_STATES

    @property
    def in_force(self) -> bool:
        """The raised values are in force (verified by reading them back)."""
        return self.state in IN_FORCE_STATES

    @property
    def withdrawable(self) -> bool:
        """Not applied yet: the requester may withdraw it."""
        return self.state in WITHDRAWABLE_STATES

    @property
    def review_pending(self) -> bool:
        """An instant raise in force that a reviewer has not looked at yet."""
        return self.in_force and self.review == "pending"

    @property
    def extension_pending(self) -> bool:
        """A raise in force whose extension waits for a reviewer."""
        return self.in_force and bool(self.extension_ms)

    @property
    def awaits_decision(self) -> bool:
        """A reviewer has something to decide: a waiting request, an instant raise's review, or an
        extension."""
        return self.state == "awaiting_approval" or self.review_pending or self.extension_pending

    def old_values(self) -> dict[str, str | None]:
        """Config name -> the value before the raise (`old_configs` keeps the source too)."""
        return {name: entry.get("value") for name, entry in self.old_configs.items()}


COLUMNS: Final[tuple[str, ...]] = tuple(RetentionRequest.__table__.columns.keys())
"""The columns of `retention_requests`, which are the fields of `Request`."""

if set(COLUMNS) != {f.name for f in dataclasses.fields(Request)}:  # pragma: no cover
    raise ImportError("monitor.act.request.Request no longer matches the retention_requests table")
if set(TRANSITIONS) != set(REQUEST_STATES):  # pragma: no cover
    raise ImportError("monitor.act.request.TRANSITIONS must name every state of REQUEST_STATES")
