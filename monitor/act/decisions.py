"""Decisions about retention requests: approve, reject (or cancel), revert and extend.

Review rules: only members of the policy's reviewer teams approve or reject, never the person who
asked (for an extension: who asked for the extension); the owning team (or a reviewer) reverts;
only the owning team extends, and an extension waits for a reviewer like a new raise. An approval
of an in-force raise (its after-the-fact review, or an extension) is an empty commit in the
config repository, so `git log` shows who approved what.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from monitor.act import ledger
from monitor.act.gitrepo import ChangeRecord, ConfigRepoError
from monitor.act.ledger import Audit
from monitor.act.model import RetentionError, iso, show_value
from monitor.act.policy import Policy
from monitor.core.records import Identity
from monitor.store.retention import IN_FORCE_STATES

if TYPE_CHECKING:
    from monitor.act.service import RetentionService

log = logging.getLogger(__name__)


class Decisions:
    """What people decide; part of `RetentionService`, which exposes these methods."""

    def __init__(self, service: RetentionService) -> None:
        self._s = service

    def approve(self, who: Identity, request_id: int, comment: str = "") -> dict[str, Any]:
        policy = self._s.policy()
        now = self._s.clock.now()
        with self._s.engine().begin() as conn:
            request = self._s.locked(conn, request_id)
            self._reviewer(policy, who, request, "approve")
            state = request["state"]
            if state == "awaiting_approval":
                request = ledger.transition(
                    conn,
                    request,
                    {"state": "approved", "approved_by": who.user, "approved_at": now, "review": "approved"},
                    Audit.by(who, "approved", approver=who.user, reason=comment or None),
                    now,
                )
            elif state in IN_FORCE_STATES and (request["review"] == "pending" or request["extension_ms"]):
                request = self._approve_in_force(conn, who, request, comment)
                return request
            else:
                raise RetentionError("conflict", f"request {request_id} is {state}: nothing awaits approval")
        return self._s.apply_now(request_id)

    def _approve_in_force(
        self, conn: Connection, who: Identity, request: dict[str, Any], comment: str
    ) -> dict[str, Any]:
        now = self._s.clock.now()
        changes: dict[str, Any] = {
            "state": "verified",
            "review": "approved",
            "approved_by": who.user,
            "approved_at": now,
        }
        what = "review_approved"
        if request["extension_ms"]:
            if who.user == request["extension_requested_by"]:
                raise RetentionError(
                    "forbidden", "the extension needs a reviewer other than who asked for it"
                )
            expires = request["expires_at"] + timedelta(milliseconds=int(request["extension_ms"]))
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
            f"retention: {what.replace('_', ' ')} for request {request['id']}",
            who.user,
            changes.get("expires_at", request["expires_at"]),
        )
        audit = Audit.by(
            who,
            what,
            approver=who.user,
            reason=comment or None,
            commit_id=sha,
            detail=f"expires at {iso(changes.get('expires_at', request['expires_at']))}",
        )
        return ledger.transition(conn, request, changes, audit, now)

    def reject(self, who: Identity, request_id: int, reason: str) -> dict[str, Any]:
        if not reason.strip():
            raise RetentionError("invalid", "say why (the requester reads it)")
        policy = self._s.policy()
        now = self._s.clock.now()
        with self._s.engine().begin() as conn:
            request = self._s.locked(conn, request_id)
            state = request["state"]
            if who.user == request["requested_by"] and state in ("awaiting_approval", "approved", "retrying"):
                return ledger.transition(
                    conn, request, {"state": "cancelled"}, Audit.by(who, "cancelled", reason=reason), now
                )
            self._reviewer(policy, who, request, "reject")
            if state == "awaiting_approval":
                return ledger.transition(
                    conn, request, {"state": "rejected"}, Audit.by(who, "rejected", reason=reason), now
                )
            if state in IN_FORCE_STATES and request["extension_ms"]:
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
                return self._s.applier.revert(conn, request)
        raise RetentionError("conflict", f"request {request_id} is {state}: nothing to reject")

    def revert(self, who: Identity, request_id: int, reason: str) -> dict[str, Any]:
        """End a raise now (the owning team, or a reviewer)."""
        policy = self._s.policy()
        now = self._s.clock.now()
        with self._s.engine().begin() as conn:
            request = self._s.locked(conn, request_id)
            if request["team"] not in who.teams and not policy.is_reviewer(who.teams):
                raise RetentionError(
                    "forbidden",
                    f"only team {request['team']!r} or a reviewer "
                    f"({', '.join(policy.reviewers)}) may revert request {request_id}",
                )
            if request["state"] not in IN_FORCE_STATES:
                raise RetentionError("conflict", f"request {request_id} is {request['state']}, not in force")
            request = ledger.transition(
                conn,
                request,
                {"state": "expiring"},
                Audit.by(who, "expiring", reason=reason or "reverted by hand"),
                now,
            )
            return self._s.applier.revert(conn, request)

    def extend(self, who: Identity, request_id: int, duration_ms: int, reason: str) -> dict[str, Any]:
        """Ask for `duration_ms` more; a reviewer approves it like a new raise."""
        policy = self._s.policy()
        now = self._s.clock.now()
        with self._s.engine().begin() as conn:
            request = self._s.locked(conn, request_id)
            if request["team"] not in who.teams:
                raise RetentionError(
                    "forbidden", f"only team {request['team']!r} may extend request {request_id}"
                )
            if request["state"] not in IN_FORCE_STATES:
                raise RetentionError("conflict", f"request {request_id} is {request['state']}, not in force")
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
                    summary=f"Extension of the retention raise on {request['topic']} awaits approval",
                    description=f"{who.user}: {reason}",
                    now=now,
                )
            return request

    # -- the scheduled job --------------------------------------------------------------------

    @staticmethod
    def _reviewer(policy: Policy, who: Identity, request: Mapping[str, Any], verb: str) -> None:
        if not policy.is_reviewer(who.teams):
            raise RetentionError(
                "forbidden",
                f"only members of {', '.join(policy.reviewers)} may {verb} "
                f"retention requests; {who.user} is in {', '.join(sorted(who.teams)) or 'no team'}",
            )
        if who.user == request["requested_by"]:
            raise RetentionError(
                "forbidden",
                f"{who.user} asked for request {request['id']} and cannot {verb} it: another reviewer must",
            )

    def _note(self, request: Mapping[str, Any], title: str, approver: str, expires: Any) -> str | None:
        record = ChangeRecord(
            title=title,
            request_id=int(request["id"]),
            requester=str(request["requested_by"]),
            reason=str(request["extension_reason"] or request["reason"]),
            expires=iso(expires) or "-",
            approver=approver,
            changes={},
        )
        try:
            sha = self._s.repo.note(record)
        except ConfigRepoError as exc:
            log.error("request %s: %s", request["id"], exc)
            return None
        self._s.repo.push()
        return sha
