"""What people do with the retention button, and the job that carries requests through.

Shared by the CLI, the HTTP API and the web page: every entry point names an `Identity` and
gets the same guardrails, the same review rules and the same audit trail.

- raise: guardrails (`guardrails.evaluate`), then instant (applied at once, reviewed afterwards)
  or reviewed (waits for a reviewer); a refusal is stored and audited too, and raised as
  `RetentionError("refused")` with every failed rule and its numbers;
- approve: by a member of a reviewer team who is not the requester; approves a waiting request
  (which is then applied), the review of an instant raise, or a pending extension;
- reject: a reviewer rejects a waiting request or a pending extension, or rolls an instant raise
  back; the requester withdrawing their own request not yet applied cancels it;
- revert: the owning team or a reviewer ends a raise now; extend: the owning team asks for more
  time, which a reviewer must approve;
- `tick` (scheduled): applies what is approved and due, retries what Kafka did not answer, tells
  the team before a raise expires, and reverts what expired.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from monitor.act import facts, ledger
from monitor.act.apply import Applier
from monitor.act.decisions import Decisions
from monitor.act.gitrepo import ConfigRepo
from monitor.act.guardrails import RaiseAsk, Verdict, evaluate
from monitor.act.ledger import SYSTEM_ACTOR, TopicBusy
from monitor.act.model import RetentionError, describe_change, iso, show_value
from monitor.act.policy import Policy, load_policy
from monitor.act.request import Draft, Request
from monitor.core.clock import Clock
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.identity import Identity
from monitor.core.owners import Owners, load_owners_file
from monitor.core.settings import ClusterConfig, RetentionConfig
from monitor.kafka.alter import TopicConfigWriter
from monitor.store.audit import Audit
from monitor.store.retention import IN_FORCE_STATES

log = logging.getLogger(__name__)


class RetentionService:
    """The retention flow over one database, one config repository and the configured clusters.

    Constructing connects nothing; `start()` opens the repository and builds the Kafka clients.
    Policy and ownership files are read on every request, so an edit applies at once. Without an
    ownership file (`owners_path` None) no team owns a topic: only reviewers may act.
    """

    name = "act"

    def __init__(
        self,
        config: RetentionConfig,
        clusters: list[ClusterConfig],
        engine: Callable[[], Engine],
        clock: Clock,
        repo: ConfigRepo,
        policy_path: Path,
        owners_path: Path | None,
    ) -> None:
        self.config = config
        self._clusters = {c.name: c for c in clusters}
        self.engine = engine
        self.clock = clock
        self.repo = repo
        self._policy_path = policy_path
        self._owners_path = owners_path
        self._writers: dict[str, TopicConfigWriter] = {}
        self.applier = Applier(config, repo, self.writer, clock)
        self._decisions = Decisions(engine, clock, self.policy, repo, self.applier)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self.policy()  # a bad policy file stops the start, with its lines
        self.repo.start()

    def stop(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}

    def writer(self, cluster: str) -> TopicConfigWriter:
        if cluster not in self._writers:
            if cluster not in self._clusters:
                known = ", ".join(sorted(self._clusters)) or "none"
                raise RetentionError("not_found", f"no cluster {cluster!r} is configured (known: {known})")
            writer = TopicConfigWriter(self._clusters[cluster])
            writer.start()
            self._writers[cluster] = writer
        return self._writers[cluster]

    def policy(self) -> Policy:
        return load_policy(self._policy_path)

    def owners(self) -> Owners:
        return load_owners_file(self._owners_path)

    # -- asking -------------------------------------------------------------------------------

    def preview(
        self, who: Identity, cluster: str, topic: str, new: Mapping[str, int], duration_ms: int
    ) -> dict[str, Any]:
        """What pressing the button would do, changing nothing: the current values, the lagging
        groups' time until data loss, every rule's verdict and the disk cost per broker."""
        with self.engine().connect() as conn:
            gathered, verdict = self._judge(conn, who, cluster, topic, new, duration_ms)
            lagging = facts.lagging_groups(conn, cluster, topic)
        return {
            "cluster": cluster,
            "topic": topic,
            "owner": gathered.facts.owner,
            "current": {
                n: {"value": c.value, "shown": show_value(n, c.value), "source": c.source}
                for n, c in gathered.configs.items()
            },
            "live": gathered.live,
            "lagging_groups": lagging,
            "ok": verdict.ok,
            "tier": verdict.tier if verdict.ok else None,
            "checks": [
                {"rule": c.rule, "ok": c.ok, "instant": c.instant, "message": c.message}
                for c in verdict.checks
            ],
            "disk": verdict.disk.as_dict(),
            "open_request": gathered.facts.open_request,
        }

    def _judge(
        self,
        conn: Connection,
        who: Identity,
        cluster: str,
        topic: str,
        new: Mapping[str, int],
        duration_ms: int,
    ) -> tuple[facts.Gathered, Verdict]:
        writer = self.writer(cluster)
        try:
            gathered = facts.gather(conn, writer, self.owners(), cluster, topic, self.clock.now())
        except KafkaRequestError as exc:
            raise RetentionError("not_found", f"topic {topic!r} on cluster {cluster!r}: {exc}") from exc
        except KafkaUnavailableError as exc:
            raise RetentionError("unavailable", str(exc)) from exc
        ask = RaiseAsk(who.user, who.teams, dict(new), duration_ms)
        return gathered, evaluate(self.policy(), gathered.facts, ask)

    def raise_retention(
        self,
        who: Identity,
        cluster: str,
        topic: str,
        new: Mapping[str, int],
        duration_ms: int,
        reason: str,
    ) -> Request:
        """Request a raise. Returns the request (applied and verified already when instant and Kafka
        answered). Raises RetentionError("refused") with every failed rule, after recording it.

        1. a reason is required; 2. the guardrails judge the raise on what is known about the
        topic; 3. the request is stored with its audit (refused, approved or awaiting approval);
        4. a refusal is raised; 5. an instant raise is applied now, a reviewed one tells the
        reviewers."""
        if not reason.strip():
            raise RetentionError("invalid", "give a reason: what is lagging, and why it needs more time")
        with self.engine().begin() as conn:
            gathered, verdict = self._judge(conn, who, cluster, topic, new, duration_ms)
            draft = _draft(who, cluster, topic, new, duration_ms, reason, gathered, verdict)
            request_id = self._record(conn, who, draft)
        if not verdict.ok:
            raise _refusal(request_id, verdict)
        if verdict.tier == "instant":
            return self.apply_now(request_id)
        return self._ask_reviewers(request_id, who)

    def _record(self, conn: Connection, who: Identity, draft: Draft) -> int:
        """Store the request with who asked and what was decided; returns its id."""
        now = self.clock.now()
        asked = Audit.by(
            who,
            "requested",
            {n: draft.old_configs.get(n, {}).get("value") for n in draft.new_configs},
            draft.new_configs,
            reason=draft.reason,
            detail=f"via {who.source}",
        )
        if draft.state == "refused":
            decided = Audit(SYSTEM_ACTOR, "refused", detail=draft.refusal)
        elif draft.state == "approved":
            decided = Audit(
                SYSTEM_ACTOR, "approved", detail="within the instant tier: applied now, reviewed afterwards"
            )
        else:
            decided = Audit(
                SYSTEM_ACTOR,
                "awaiting_approval",
                detail=f"above the instant tier: a member of {', '.join(self.policy().reviewers)} "
                "must approve",
            )
        try:
            return ledger.insert_request(conn, draft, [asked, decided], now)
        except TopicBusy as exc:
            raise RetentionError(
                "refused",
                f"one_open_request: another request on {draft.topic!r} opened "
                "just now; wait for it, extend it, or revert it first",
            ) from exc

    def _ask_reviewers(self, request_id: int, who: Identity) -> Request:
        """A notice to every reviewer team that the request awaits their approval."""
        now = self.clock.now()
        with self.engine().begin() as conn:
            request = ledger.get_existing(conn, request_id)
            for team in self.policy().reviewers:
                ledger.add_notice(
                    conn,
                    request,
                    team=team,
                    kind="awaiting_approval",
                    severity="info",
                    summary=f"Retention raise of {request.topic} awaits approval",
                    description=f"{who.user} asks for {describe_change(request)} on {request.cluster} "
                    f"for {show_value('retention.ms', request.duration_ms)}: {request.reason}. Approve "
                    f"with `kafka-health retention approve {request_id}`.",
                    now=now,
                )
        return request

    # -- deciding (monitor.act.decisions) ---------------------------------------------------------

    def approve(self, who: Identity, request_id: int, comment: str = "") -> Request:
        """Approve a waiting request (then applied), an instant raise's review, or an extension."""
        request = self._decisions.approve(who, request_id, comment)
        if request.state == "approved":
            return self.apply_now(request.id)
        return request

    def reject(self, who: Identity, request_id: int, reason: str) -> Request:
        """Reject a waiting request or an extension, roll back an instant raise, or cancel one's own."""
        return self._decisions.reject(who, request_id, reason)

    def revert(self, who: Identity, request_id: int, reason: str) -> Request:
        """End a raise now (the owning team, or a reviewer)."""
        return self._decisions.revert(who, request_id, reason)

    def extend(self, who: Identity, request_id: int, duration_ms: int, reason: str) -> Request:
        """Ask for more time; a reviewer approves it like a new raise."""
        return self._decisions.extend(who, request_id, duration_ms, reason)

    def tick(self) -> dict[str, int]:
        """Apply and retry what is due, warn before expiry, revert what expired. Returns counts."""
        counts = {"applied": 0, "reverted": 0, "notified": 0}
        now = self.clock.now()
        with self.engine().connect() as conn:
            applies = ledger.due_ids(conn, ("approved", "retrying"), now)
            reverts = ledger.due_ids(conn, ("expiring",), now)
            expired = ledger.due_ids(conn, IN_FORCE_STATES, now, expiring_at=True)
        for request_id in applies:
            counts["applied"] += self._step(request_id, ("approved", "retrying"), self.applier.apply)
        for request_id in expired:
            counts["reverted"] += self._step(request_id, IN_FORCE_STATES, self._expire)
        for request_id in reverts:
            counts["reverted"] += self._step(request_id, ("expiring",), self.applier.revert)
        counts["notified"] = self._warn_before_expiry()
        return counts

    def _step(
        self, request_id: int, states: tuple[str, ...], action: Callable[[Connection, Request], Request]
    ) -> int:
        try:
            with self.engine().begin() as conn:
                request = ledger.lock(conn, request_id, skip_locked=True)
                if request is None or request.state not in states:
                    return 0  # another instance has it, or it moved on
                action(conn, request)
                return 1
        except Exception:  # one request's failure must not stop the others
            log.exception("retention request %s: step failed; tried again next run", request_id)
            return 0

    def _expire(self, conn: Connection, request: Request) -> Request:
        request = ledger.transition(
            conn,
            request,
            {"state": "expiring"},
            Audit(SYSTEM_ACTOR, "expiring", reason="the raise expired"),
            self.clock.now(),
        )
        return self.applier.revert(conn, request)

    def _warn_before_expiry(self) -> int:
        now = self.clock.now()
        before = now + timedelta(milliseconds=self.policy().notify_before_expiry_ms)
        with self.engine().begin() as conn:
            soon = ledger.expiring_soon(conn, IN_FORCE_STATES, before)
            for request in soon:
                ledger.add_notice(
                    conn,
                    request,
                    team=request.team,
                    kind="expiring",
                    severity="warning",
                    summary=f"Retention raise of {request.topic} reverts at {iso(request.expires_at)}",
                    description=f"Request {request.id} ({describe_change(request)}) reverts by "
                    f"itself. If the consumers have not caught up, extend it: "
                    f"`kafka-health retention extend {request.id} --for 1d`.",
                    now=now,
                )
                ledger.transition(
                    conn,
                    request,
                    {"expiry_notified_at": now},
                    Audit(SYSTEM_ACTOR, "expiry_notice", detail="the owning team was told"),
                    now,
                )
        return len(soon)

    # -- helpers ------------------------------------------------------------------------------

    def apply_now(self, request_id: int) -> Request:
        self._step(request_id, ("approved", "retrying"), self.applier.apply)
        with self.engine().connect() as conn:
            return ledger.get_existing(conn, request_id)


def _draft(
    who: Identity,
    cluster: str,
    topic: str,
    new: Mapping[str, int],
    duration_ms: int,
    reason: str,
    gathered: facts.Gathered,
    verdict: Verdict,
) -> Draft:
    """The request to store: the values before and after, and the state the verdict gives it
    (refused; approved and pending review in the instant tier; awaiting approval otherwise)."""
    instant = verdict.ok and verdict.tier == "instant"
    state = "approved" if instant else "awaiting_approval" if verdict.ok else "refused"
    return Draft(
        cluster=cluster,
        topic=topic,
        state=state,
        tier=verdict.tier,
        team=gathered.facts.owner,
        requested_by=who.user,
        reason=reason,
        old_configs={
            n: {"value": str(c.value), "source": c.source} for n, c in gathered.configs.items() if n in new
        },
        new_configs={n: str(v) for n, v in new.items()},
        duration_ms=duration_ms,
        disk=verdict.disk.as_dict(),
        refusal=None if verdict.ok else verdict.refusal_text(),
        review="pending" if instant else None,
    )


def _refusal(request_id: int, verdict: Verdict) -> RetentionError:
    """The error a refused request raises: every failed rule, with its numbers."""
    return RetentionError(
        "refused",
        f"request {request_id} refused: {verdict.refusal_text()}",
        {
            "request_id": request_id,
            "checks": [{"rule": c.rule, "ok": c.ok, "message": c.message} for c in verdict.checks],
            "disk": verdict.disk.as_dict(),
        },
    )
