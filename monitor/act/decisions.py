"""Decisions about retention requests: approve, reject (or cancel), revert and extend.

Review rules: only members of the policy's reviewer teams approve or reject, never the person who
asked (for an extension: who asked for the extension); the owning team (or a reviewer) reverts;
only the owning team extends, and an extension waits for a reviewer like a new raise. An approval
of an in-force raise (its after-the-fact review, or an extension) is an empty commit in the
config repository, so `git log` shows who approved what.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine

from monitor.act import ledger
from monitor.act.apply import Applier
from monitor.act.gitrepo import ChangeRecord, ConfigRepo, ConfigRepoError
from monitor.act.model import REFUSALS, RetentionError, iso, show_value
from monitor.act.policy import Policy
from monitor.act.request import Request
from monitor.core.clock import Clock
from monitor.core.identity import Identity
from monitor.store import audit as audit_trail
from monitor.store.audit import Audit

log = logging.getLogger(__name__)


class Decisions:
    """What people decide. `RetentionService` exposes these methods and applies what an approval
    leaves `approved`; the decisions themselves never apply anything."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        clock: Clock,
        policy: Callable[[], Policy],
        repo: ConfigRepo,
        applier: Applier,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._policy = policy
        self._repo = repo
        self._applier = applier

    def approve(self, who: Identity, request_id: int, comment: str = "") -> Request:
        """Approve a waiting request (it is then `approved`, for the caller to apply), an instant
        raise's review, or an extension."""
        policy = self._policy()
        now = self._clock.now()
        with self._deciding(who, request_id, "approve") as conn:
            request = ledger.lock_existing(conn, request_id)
            self._reviewer(policy, who, request, "approve")
            if request.state == "awaiting_approval":
                return ledger.transition(
                    conn,
                    request,
                    {"state": "approved", "approved_by": who.user, "approved_at": now, "review": "approved"},
                    Audit.by(who, "approved", approver=who.user, reason=comment or None),
                    now,
                )
            if request.review_pending or request.extension_pending:
                return self._approve_in_force(conn, who, request, comment)
        raise RetentionError("conflict", f"request {request_id} is {request.state}: nothing awaits approval")

    def _deciding(self, who: Identity, request_id: int, verb: str) -> AbstractContextManager[Connection]:
        """The transaction of one decision; a refusal of it is on the audit trail."""

        def record(conn: Connection, exc: RetentionError) -> None:
            if exc.code in REFUSALS:
                request = ledger.get(conn, request_id)
                cluster, topic = (request.cluster, request.topic) if request else (None, None)
                refused = Audit.by(who, "refused", detail=f"{verb}: {exc.code}: {exc}")
                ledger.write_audit(conn, request_id, cluster, topic, refused, self._clock.now())

        return audit_trail.refusals_recorded(self._engine(), RetentionError, record)

    def _approve_in_force(self, conn: Connection, who: Identity, request: Request, comment: str) -> Request:
        now = self._clock.now()
        changes: dict[str, Any] = {
            "state": "verified",
            "review": "approved",
            "approved_by": who.user,
            "approved_at": now,
        }
        what = "review_approved"
        expires = request.expires_at
        if request.extension_ms and expires is not None:
            if who.user == request.extension_requested_by:
                raise RetentionError(
                    "forbidden", "the extension needs a reviewer other than who asked for it"
                )
            expires += timedelta(milliseconds=request.extension_ms)
            changes.update(
                expires_at=expires,
                extension_ms=None,
                extension_requested_by=None,
                extension_reason=None,
                expiry_notified_at=None,
            )
            what = "extended"
        sha = self._note(
            request,
            f"retention: {what.replace('_', ' ')} for request {request.id}",
            who.user,
            expires,
        )
        audit = Audit.by(
            who,
            what,
            approver=who.user,
            reason=comment or None,
            commit_id=sha,
            detail=f"expires at {iso(expires)}",
        )
        return ledger.transition(conn, request, changes, audit, now)

    def reject(self, who: Identity, request_id: int, reason: str) -> Request:
        policy = self._policy()
        now = self._clock.now()
        with self._deciding(who, request_id, "reject") as conn:
            if not reason.strip():
                raise RetentionError("invalid", "say why (the requester reads it)")
            request = ledger.lock_existing(conn, request_id)
            state = request.state
            if who.user == request.requested_by and request.withdrawable:
                return ledger.transition(
                    conn, request, {"state": "cancelled"}, Audit.by(who, "cancelled", reason=reason), now
                )
            self._reviewer(policy, who, request, "reject")
            if state == "awaiting_approval":
                return ledger.transition(
                    conn, request, {"state": "rejected"}, Audit.by(who, "rejected", reason=reason), now
                )
            if request.extension_pending:
                return ledger.transition(
                    conn,
                    request,
                    {"extension_ms": None, "extension_requested_by": None, "extension_reason": None},
                    Audit.by(who, "extension_rejected", reason=reason),
                    now,
                )
            if state == "pending_review":
                request = ledger.transition(
                    conn,
                    request,
                    {"state": "expiring", "review": "rolled_back"},
                    Audit.by(who, "rolled_back", reason=reason),
                    now,
                )
                return self._applier.revert(conn, request)
        raise RetentionError("conflict", f"request {request_id} is {state}: nothing to reject")

    def revert(self, who: Identity, request_id: int, reason: str) -> Request:
        """End a raise now (the owning team, or a reviewer)."""
        policy = self._policy()
        now = self._clock.now()
        with self._deciding(who, request_id, "revert") as conn:
            request = ledger.lock_existing(conn, request_id)
            if request.team not in who.teams and not policy.is_reviewer(who.teams):
                raise RetentionError(
                    "forbidden",
                    f"only team {request.team!r} or a reviewer "
                    f"({', '.join(policy.reviewers)}) may revert request {request_id}",
                )
            if not request.in_force:
                raise RetentionError("conflict", f"request {request_id} is {request.state}, not in force")
            request = ledger.transition(
                conn,
                request,
                {"state": "expiring"},
                Audit.by(who, "expiring", reason=reason or "reverted by hand"),
                now,
            )
            return self._applier.revert(conn, request)

    def extend(self, who: Identity, request_id: int, duration_ms: int, reason: str) -> Request:
        """Ask for `duration_ms` more; a reviewer approves it like a new raise."""
        policy = self._policy()
        now = self._clock.now()
        with self._deciding(who, request_id, "extend") as conn:
            request = ledger.lock_existing(conn, request_id)
            if request.team not in who.teams:
                raise RetentionError(
                    "forbidden", f"only team {request.team!r} may extend request {request_id}"
                )
            if not request.in_force:
                raise RetentionError("conflict", f"request {request_id} is {request.state}, not in force")
            if not 0 < duration_ms <= policy.limits.max_duration_ms:
                raise RetentionError(
                    "refused",
                    f"max_duration: an extension lasts between 1s and "
                    f"{show_value('retention.ms', policy.limits.max_duration_ms)}",
                )
            request = ledger.transition(
                conn,
                request,
                {"extension_ms": duration_ms, "extension_requested_by": who.user, "extension_reason": reason},
                Audit.by(
                    who,
                    "extension_requested",
                    reason=reason,
                    detail=f"{show_value('retention.ms', duration_ms)} more",
                ),
                now,
            )
            for team in policy.reviewers:
                ledger.add_notice(
                    conn,
                    request,
                    team=team,
                    kind="extension",
                    severity="info",
                    summary=f"Extension of the retention raise on {request.topic} awaits approval",
                    description=f"{who.user}: {reason}",
                    now=now,
                )
            return request

    # -- checks and records ---------------------------------------------------------------------

    @staticmethod
    def _reviewer(policy: Policy, who: Identity, request: Request, verb: str) -> None:
        if not policy.is_reviewer(who.teams):
            raise RetentionError(
                "forbidden",
                f"only members of {', '.join(policy.reviewers)} may {verb} "
                f"retention requests; {who.user} is in {', '.join(sorted(who.teams)) or 'no team'}",
            )
        if who.user == request.requested_by:
            raise RetentionError(
                "forbidden",
                f"{who.user} asked for request {request.id} and cannot {verb} it: another reviewer must",
            )

    def _note(self, request: Request, title: str, approver: str, expires: datetime | None) -> str | None:
        record = ChangeRecord(
            title=title,
            request_id=request.id,
            requester=request.requested_by,
            reason=request.extension_reason or request.reason,
            expires=iso(expires) or "-",
            approver=approver,
            changes={},
        )
        try:
            sha = self._repo.note(record)
        except ConfigRepoError as exc:
            log.error("request %s: %s", request.id, exc)
            return None
        self._repo.push()
        return sha
