"""Putting a request into force and taking it back out: commit, apply, read back, record.

Both directions take the same path, so a revert is reviewed-as-code exactly like the raise:

1. commit the topic's file in the config-as-code repository (once per direction: a retry reuses
   the commit), and push it;
2. IncrementalAlterConfigs with only the changed keys (a revert SETs the old value, or DELETEs
   the topic's own value when the old one was the broker's default);
3. read the configs back until they show the wanted values (`verify_seconds`);
4. record the outcome on the request with its audit entry, and a notice for the owning team.

Failure policy: Kafka does not answer -> the request keeps its place (`retrying` before it is in
force, `expiring` while it is reverted) with the error, and the scheduled job tries again after
`retry_seconds`; nothing is half-applied silently, since the read-back decides. Kafka refuses ->
`failed` (the raise; its commit is undone by a second commit), or the revert stays `expiring`
and tells the team, as a refused revert needs a person.

Every step runs with the request's row locked, so two daemons never apply one request twice.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.act import ledger
from monitor.act.gitrepo import ChangeRecord, ConfigRepo, ConfigRepoError
from monitor.act.ledger import SYSTEM_ACTOR
from monitor.act.model import describe_change, iso
from monitor.act.request import Request
from monitor.core.clock import Clock
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.settings import RetentionConfig
from monitor.kafka.alter import SOURCE_DYNAMIC_TOPIC, ConfigChange, TopicConfigWriter, differs
from monitor.store.audit import Audit

log = logging.getLogger(__name__)

PENDING_REVIEW_APPROVER = "pending review (instant tier)"


class Applier:
    """Applies and reverts requests on their clusters (one config writer per cluster)."""

    def __init__(
        self,
        config: RetentionConfig,
        repo: ConfigRepo,
        writers: Callable[[str], TopicConfigWriter],
        clock: Clock,
    ) -> None:
        self._config = config
        self._repo = repo
        self._writers = writers
        self._clock = clock

    # -- forward ----------------------------------------------------------------------------

    def apply(self, conn: Connection, request: Request) -> Request:
        """Put an approved (or retrying) request into force; returns the updated row."""
        now = self._clock.now()
        new: dict[str, str | None] = {k: str(v) for k, v in request.new_configs.items()}
        if request.commit_id is None:
            try:
                request = self._commit(conn, request, new, forward=True)
            except ConfigRepoError as exc:
                return self._retry(conn, request, "retrying", exc)  # no commit, no change
        writer = self._writers(request.cluster)
        try:
            writer.alter_configs(request.topic, [ConfigChange(k, v) for k, v in new.items()])
        except KafkaUnavailableError as exc:
            return self._retry(conn, request, "retrying", exc)
        except KafkaRequestError as exc:
            return self._refused_raise(conn, request, exc)
        expires = now + timedelta(milliseconds=int(request.duration_ms))
        request = ledger.transition(
            conn,
            request,
            {
                "state": "applied",
                "applied_at": now,
                "expires_at": expires,
                "last_error": None,
                "next_attempt_at": None,
            },
            Audit(SYSTEM_ACTOR, "applied", request.old_values(), new, commit_id=request.commit_id),
            now,
        )
        wrong = self._read_back(writer, request.topic, new)
        if wrong:
            detail = f"the read-back still shows other values for {', '.join(wrong)}"
            return ledger.transition(
                conn,
                request,
                {"state": "failed", "last_error": detail},
                Audit(SYSTEM_ACTOR, "failed", detail=detail),
                self._clock.now(),
            )
        in_force = "pending_review" if request.review == "pending" else "verified"
        request = ledger.transition(
            conn,
            request,
            {"state": in_force, "verified_at": self._clock.now()},
            Audit(SYSTEM_ACTOR, "verified", new_value=new, detail="read back from Kafka"),
            self._clock.now(),
        )
        self._notice(
            conn,
            request,
            "applied",
            "info",
            f"Retention of {request.topic} raised until {iso(expires)}",
            f"{describe_change(request)} on cluster {request.cluster}, requested by "
            f"{request.requested_by}: {request.reason}. It reverts by itself at {iso(expires)}.",
        )
        return request

    # -- backward ---------------------------------------------------------------------------

    def revert(self, conn: Connection, request: Request) -> Request:
        """Restore the old values of an `expiring` request; returns the updated row."""
        writer = self._writers(request.cluster)
        try:
            current = writer.read_configs(request.topic, list(request.new_configs))
        except KafkaUnavailableError as exc:
            return self._retry(conn, request, "expiring", exc)
        except KafkaRequestError as exc:
            return self._refused_revert(conn, request, exc)
        # A key someone changed since (by hand, or the Kafka team) is theirs now: left alone.
        ours = {k: v for k, v in request.new_configs.items() if not differs(current, {k: str(v)})}
        skipped = sorted(set(request.new_configs) - set(ours))
        restore = {k: self._restore_value(request, k) for k in ours}
        if request.revert_commit_id is None:
            try:
                request = self._commit(conn, request, restore, forward=False)
            except ConfigRepoError as exc:
                return self._retry(conn, request, "expiring", exc)
        try:
            writer.alter_configs(request.topic, [ConfigChange(k, v) for k, v in restore.items()])
        except KafkaUnavailableError as exc:
            return self._retry(conn, request, "expiring", exc)
        except KafkaRequestError as exc:
            return self._refused_revert(conn, request, exc)
        wrong = self._read_back(writer, request.topic, restore)
        if wrong:
            return self._retry(conn, request, "expiring", KafkaUnavailableError(f"read-back shows {wrong}"))
        now = self._clock.now()
        detail = f"left alone, changed by someone else since: {', '.join(skipped)}" if skipped else None
        request = ledger.transition(
            conn,
            request,
            {"state": "reverted", "reverted_at": now, "last_error": None, "next_attempt_at": None},
            Audit(
                SYSTEM_ACTOR,
                "reverted",
                request.new_configs,
                request.old_values(),
                commit_id=request.revert_commit_id,
                detail=detail,
            ),
            now,
        )
        self._notice(
            conn,
            request,
            "reverted",
            "info",
            f"Retention of {request.topic} is back to its old value",
            f"Request {request.id} on cluster {request.cluster} reverted ({describe_change(request)} "
            "undone)." + (f" {detail}." if detail else ""),
        )
        return request

    @staticmethod
    def _restore_value(request: Request, name: str) -> str | None:
        entry = request.old_configs.get(name) or {}
        return str(entry["value"]) if entry.get("source") == SOURCE_DYNAMIC_TOPIC else None

    # -- steps ------------------------------------------------------------------------------

    def _commit(
        self, conn: Connection, request: Request, values: Mapping[str, str | None], *, forward: bool
    ) -> Request:
        old = request.old_values()
        if forward:
            changes = {k: (old.get(k), v) for k, v in values.items()}
            approver = request.approved_by or PENDING_REVIEW_APPROVER
            title = f"retention: raise {request.topic} on {request.cluster} (request {request.id})"
        else:
            changes = {k: (str(request.new_configs[k]), v) for k, v in values.items()}
            approver = request.approved_by or PENDING_REVIEW_APPROVER
            title = f"retention: revert {request.topic} on {request.cluster} (request {request.id})"
        record = ChangeRecord(
            title=title,
            request_id=int(request.id),
            requester=str(request.requested_by),
            reason=str(request.reason),
            expires=iso(request.expires_at) or f"{int(request.duration_ms) // 1000}s after it is applied",
            approver=str(approver),
            changes=changes,
        )
        sha = self._repo.commit_topic(request.cluster, request.topic, values, record)
        column = "commit_id" if forward else "revert_commit_id"
        request = ledger.transition(
            conn,
            request,
            {column: sha},
            Audit(
                SYSTEM_ACTOR, "committed", {k: c[0] for k, c in changes.items()}, dict(values), commit_id=sha
            ),
            self._clock.now(),
        )
        failure = self._repo.push()
        if failure:
            log.warning("request %s: %s", request.id, failure)
            ledger.write_audit(
                conn,
                int(request.id),
                request.cluster,
                request.topic,
                Audit(SYSTEM_ACTOR, "push_failed", commit_id=sha, detail=failure),
                self._clock.now(),
            )
        return request

    def _read_back(
        self, writer: TopicConfigWriter, topic: str, wanted: Mapping[str, str | None]
    ) -> list[str]:
        """The keys that still differ after `verify_seconds` of reading back (brokers pick a change
        up from the controller's metadata a moment after it is accepted)."""
        deadline = time.monotonic() + self._config.verify_seconds
        wrong = list(wanted)
        while True:
            with contextlib.suppress(KafkaUnavailableError):  # a broker moving: read again
                wrong = differs(writer.read_configs(topic, list(wanted)), wanted)
            if not wrong or time.monotonic() > deadline:
                return wrong
            time.sleep(0.3)

    def _retry(self, conn: Connection, request: Request, state: str, exc: Exception) -> Request:
        now = self._clock.now()
        retry_at: datetime = now + timedelta(seconds=self._config.retry_seconds)
        return ledger.transition(
            conn,
            request,
            {
                "state": state,
                "attempts": int(request.attempts or 0) + 1,
                "next_attempt_at": retry_at,
                "last_error": str(exc),
            },
            Audit(SYSTEM_ACTOR, "retrying", detail=f"{exc}; next attempt at {iso(retry_at)}"),
            now,
        )

    def _refused_raise(self, conn: Connection, request: Request, exc: Exception) -> Request:
        now = self._clock.now()
        old = {k: request.old_values().get(k) for k in request.new_configs}
        restore = {k: self._restore_value(request, k) for k in request.new_configs}
        sha = self._commit_quietly(
            request.cluster,
            request.topic,
            restore,
            ChangeRecord(
                title=f"retention: undo request {request.id} on {request.topic}: Kafka refused it",
                request_id=int(request.id),
                requester=str(request.requested_by),
                reason=str(exc),
                expires="-",
                approver="-",
                changes={k: (str(request.new_configs[k]), old[k]) for k in restore},
            ),
        )
        request = ledger.transition(
            conn,
            request,
            {"state": "failed", "last_error": str(exc), "revert_commit_id": sha},
            Audit(SYSTEM_ACTOR, "failed", commit_id=sha, detail=str(exc)),
            now,
        )
        self._notice(
            conn,
            request,
            "failed",
            "warning",
            f"Retention raise of {request.topic} failed",
            f"Kafka refused request {request.id} ({describe_change(request)}): {exc}",
        )
        return request

    def _commit_quietly(
        self, cluster: str, topic: str, values: dict[str, str | None], record: ChangeRecord
    ) -> str | None:
        try:
            return self._repo.commit_topic(cluster, topic, values, record)
        except ConfigRepoError as exc:
            log.error("cannot record the undo in the config repository: %s", exc)
            return None

    def _refused_revert(self, conn: Connection, request: Request, exc: Exception) -> Request:
        request = self._retry(conn, request, "expiring", exc)
        self._notice(
            conn,
            request,
            "revert_failed",
            "warning",
            f"Retention of {request.topic} could not be reverted",
            f"Kafka refused to restore the old values of request {request.id}: {exc}. It is tried "
            "again; if it keeps failing, restore them by hand and cancel the request.",
        )
        return request

    def _notice(
        self, conn: Connection, request: Request, kind: str, severity: str, summary: str, body: str
    ) -> None:
        ledger.add_notice(
            conn,
            request,
            team=request.team,
            kind=kind,
            severity=severity,
            summary=summary,
            description=body,
            now=self._clock.now(),
        )
