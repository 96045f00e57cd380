"""Reviewed repair actions: request -> guardrails -> review -> guardrails again -> apply -> audit ->
did it help. The same flow, identity, review rule and audit as the retention button.

The kinds of repair are registered in `KINDS` (kind -> the rules whose findings it repairs and its
planner); adding one is a planner in `monitor.act.repair_plan` and a line here.

1. `request`: a reason is required; the finding must be open and of a rule the kind repairs; the
   cluster is described live (every topic); the guardrails (`repair_plan.refusals`) and an empty
   plan refuse it, recorded; else it waits for a reviewer, with the plan as the reviewable diff;
2. `approve`: a member of the policy's reviewer teams other than the requester; then applied;
3. `apply`: the cluster is described again and the guardrails checked again (a broker may have
   died since the review); then, for a move, the replicas are reordered; then the preferred
   leaders elected. Kafka refusing or not answering: `failed`, with the error;
4. `check_outcomes`: once an evaluation after the apply has run, whether the finding resolved.

Who may do what: anyone identified asks (at most `web.identity.change_requests_per_minute` changes
a minute through the web guard); reviewers approve or reject; the requester withdraws.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Connection, Engine, text

from monitor.act import repair_plan
from monitor.act import repair_request as store
from monitor.act.ledger import SYSTEM_ACTOR
from monitor.act.model import REFUSALS
from monitor.act.policy import Policy
from monitor.act.repair_plan import Plan, Snapshot
from monitor.act.repair_request import Repair, RepairError
from monitor.core.clock import Clock
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.identity import Identity
from monitor.core.settings import ClusterConfig
from monitor.kafka.leaders import LeaderAdmin
from monitor.kafka.protocol import LeaderApi
from monitor.store import audit as audit_trail
from monitor.store.audit import Audit

log = logging.getLogger(__name__)

REORDER_WAIT_SECONDS: Final = 30.0
"""How long a move waits for the reordered replicas to show before electing."""


@dataclass(frozen=True, slots=True)
class RepairKind:
    rules: frozenset[str]
    """The rules whose findings this kind repairs."""
    plan: Callable[[Snapshot, int | None], Plan]
    summary: str


def _move(snapshot: Snapshot, broker_id: int | None) -> Plan:
    if broker_id is None:
        raise RepairError("invalid", "moving leadership needs a finding about one broker")
    return repair_plan.move_leadership(snapshot, broker_id)


KINDS: Final[Mapping[str, RepairKind]] = {
    "preferred_election": RepairKind(
        frozenset({"NonPreferredLeaders", "LeaderImbalance"}),
        repair_plan.preferred_election,
        "preferred leader election of the partitions the broker leads in another's place",
    ),
    "move_leadership": RepairKind(
        frozenset({"LeaderImbalance"}),
        _move,
        "move leadership off the overloaded broker (reorder replicas, then elect)",
    ),
}


@dataclass(frozen=True, slots=True)
class FindingRef:
    id: int
    rule: str
    cluster: str
    state: str
    broker_id: int | None
    evaluated_at: datetime


def finding(conn: Connection, finding_id: int) -> FindingRef:
    row = conn.execute(
        text(
            "SELECT id, rule, cluster, state, labels->>'broker_id' AS broker_id, evaluated_at"
            " FROM findings WHERE id = :id"
        ),
        {"id": finding_id},
    ).first()
    if row is None:
        raise RepairError(
            "not_found", f"no finding {finding_id}; see the alerts page or `kafka-health alerts list`"
        )
    broker = None if row.broker_id is None else int(row.broker_id)
    return FindingRef(int(row.id), str(row.rule), str(row.cluster), str(row.state), broker, row.evaluated_at)


def open_finding_id(conn: Connection, rule: str, entity_key: str) -> int:
    """The id of the open finding of `rule` on `entity_key` (what an alert on the page shows)."""
    found = conn.execute(
        text("SELECT id FROM findings WHERE rule = :r AND entity_key = :k AND state <> 'resolved'"),
        {"r": rule, "k": entity_key},
    ).scalar()
    if found is None:
        raise RepairError("not_found", f"no open {rule} finding on {entity_key}: it resolved meanwhile")
    return int(found)


def kinds_for(rule: str) -> list[str]:
    """The repair kinds that can act on a finding of `rule` (the buttons its page shows)."""
    return [kind for kind, spec in KINDS.items() if rule in spec.rules]


class RepairService:
    """Repairs over one database and the configured clusters. Constructing connects nothing; the
    Kafka clients are built on first use and closed by `stop()`."""

    def __init__(
        self,
        clusters: list[ClusterConfig],
        engine: Callable[[], Engine],
        clock: Clock,
        policy: Callable[[], Policy],
        admins: Callable[[ClusterConfig], LeaderApi] = LeaderAdmin,
    ) -> None:
        self._clusters = {c.name: c for c in clusters}
        self._engine = engine
        self._clock = clock
        self._policy = policy
        self._make_admin = admins
        self._admins: dict[str, LeaderApi] = {}

    def stop(self) -> None:
        for admin in self._admins.values():
            admin.close()
        self._admins = {}

    def admin(self, cluster: str) -> LeaderApi:
        if cluster not in self._admins:
            if cluster not in self._clusters:
                known = ", ".join(sorted(self._clusters)) or "none"
                raise RepairError("not_found", f"no cluster {cluster!r} is configured (known: {known})")
            admin = self._make_admin(self._clusters[cluster])
            admin.start()
            self._admins[cluster] = admin
        return self._admins[cluster]

    def snapshot(self, cluster: str) -> Snapshot:
        """Every partition of the cluster and its live brokers, from Kafka now; the plans count
        and move only the partitions of the topics the monitor watches there (the topic filter
        its findings are evaluated on), the guardrails look at all."""
        admin = self.admin(cluster)
        config = self._clusters[cluster]
        try:
            live = admin.describe_cluster().broker_ids
            topics = admin.describe_topics(admin.list_topic_names(include_internal=True), skip_unknown=True)
        except KafkaUnavailableError as exc:
            raise RepairError("unavailable", f"{exc}; a repair needs the cluster's state now") from exc
        except KafkaRequestError as exc:
            raise RepairError("unavailable", f"{exc}; try again in a moment") from exc
        return Snapshot.of(
            live,
            topics,
            lambda t: config.topics.accepts(t.name) and (config.include_internal_topics or not t.is_internal),
        )

    # -- asking -------------------------------------------------------------------------------

    def preview(self, finding_id: int, kind: str) -> dict[str, Any]:
        """What the repair would do, and what would refuse it, changing nothing."""
        spec = _kind(kind)
        with self._engine().connect() as conn:
            found = finding(conn, finding_id)
        _check_rule(found, kind, spec)
        snapshot = self.snapshot(found.cluster)
        plan = spec.plan(snapshot, found.broker_id)
        return {
            "kind": kind,
            "finding_id": finding_id,
            "refusals": repair_plan.refusals(snapshot),
            **plan.as_dict(),
        }

    def request(self, who: Identity, finding_id: int, kind: str, reason: str) -> Repair:
        """Ask for a repair of a finding. Returns it awaiting approval; raises RepairError
        ("refused") after recording a refusal."""
        if not reason.strip():
            raise RepairError("invalid", "give a reason: what the repair is for")
        spec = _kind(kind)
        now = self._clock.now()
        with self._engine().connect() as conn:
            found = finding(conn, finding_id)
        _check_rule(found, kind, spec)
        if found.state == "resolved":
            raise RepairError("conflict", f"finding {finding_id} is resolved already: nothing to repair")
        snapshot = self.snapshot(found.cluster)
        plan = spec.plan(snapshot, found.broker_id)
        refusal = "; ".join(repair_plan.refusals(snapshot)) or (
            None if plan.moves else f"nothing_to_do: the plan for {kind} moves no partition now"
        )
        values = {
            "cluster": found.cluster,
            "kind": kind,
            "state": "refused" if refusal else "awaiting_approval",
            "finding_id": found.id,
            "rule": found.rule,
            "broker_id": found.broker_id,
            "requested_by": who.user,
            "reason": reason,
            "plan": plan.as_dict(),
            "refusal": refusal,
        }
        asked = Audit.by(
            who,
            "requested",
            new_value=plan.as_dict(),
            reason=reason,
            detail=f"{kind} for finding {finding_id}",
        )
        decided = (
            Audit(SYSTEM_ACTOR, "refused", detail=refusal)
            if refusal
            else Audit(
                SYSTEM_ACTOR,
                "awaiting_approval",
                detail=f"a member of {', '.join(self._policy().reviewers)} other than {who.user} "
                "must approve",
            )
        )
        with self._engine().begin() as conn:
            repair_id = store.insert_repair(conn, values, [asked, decided], now)
            repair = store.get(conn, repair_id)
        if refusal:
            raise RepairError("refused", f"repair {repair_id} refused: {refusal}", {"repair_id": repair_id})
        return repair

    # -- deciding -----------------------------------------------------------------------------

    def approve(self, who: Identity, repair_id: int, comment: str = "") -> Repair:
        """Approve a waiting repair (a reviewer other than the requester); it is then applied."""
        now = self._clock.now()
        with self._deciding(who, repair_id, "approve") as conn:
            repair = store.get(conn, repair_id, lock=True)
            self._reviewer(who, repair, "approve")
            store.transition(
                conn,
                repair,
                {"state": "approved", "approved_by": who.user, "approved_at": now},
                Audit.by(who, "approved", approver=who.user, reason=comment or None),
                now,
            )
        return self.apply(repair_id)

    def reject(self, who: Identity, repair_id: int, reason: str) -> Repair:
        """Reject a waiting repair (a reviewer), or withdraw one's own."""
        now = self._clock.now()
        with self._deciding(who, repair_id, "reject") as conn:
            if not reason.strip():
                raise RepairError("invalid", "say why (the requester reads it)")
            repair = store.get(conn, repair_id, lock=True)
            if who.user == repair.requested_by:
                return store.transition(
                    conn, repair, {"state": "cancelled"}, Audit.by(who, "cancelled", reason=reason), now
                )
            self._reviewer(who, repair, "reject")
            return store.transition(
                conn, repair, {"state": "rejected"}, Audit.by(who, "rejected", reason=reason), now
            )

    def _deciding(self, who: Identity, repair_id: int, verb: str) -> AbstractContextManager[Connection]:
        """The transaction of one decision; a refusal of it is on the audit trail."""

        def record(conn: Connection, exc: RepairError) -> None:
            if exc.code in REFUSALS:
                try:
                    cluster: str | None = store.get(conn, repair_id).cluster
                except RepairError:  # no such repair: the refusal is written against the id asked
                    cluster = None
                refused = Audit.by(who, "refused", detail=f"{verb}: {exc.code}: {exc}")
                store.write_audit(conn, repair_id, cluster, refused, self._clock.now())

        return audit_trail.refusals_recorded(self._engine(), RepairError, record)

    def _reviewer(self, who: Identity, repair: Repair, verb: str) -> None:
        policy = self._policy()
        if not policy.is_reviewer(who.teams):
            raise RepairError(
                "forbidden",
                f"only members of {', '.join(policy.reviewers)} may {verb} repairs; "
                f"{who.user} is in {', '.join(sorted(who.teams)) or 'no team'}",
            )
        if who.user == repair.requested_by:
            raise RepairError(
                "forbidden",
                f"{who.user} asked for repair {repair.id} and cannot {verb} it: another reviewer must",
            )

    # -- applying -----------------------------------------------------------------------------

    def apply(self, repair_id: int) -> Repair:
        """Apply an approved repair: guardrails again, then reorder (a move) and elect."""
        with self._engine().begin() as conn:
            repair = store.get(conn, repair_id, lock=True)
            if repair.state != "approved":
                raise RepairError("conflict", f"repair {repair_id} is {repair.state}, not approved")
            try:
                refused = repair_plan.refusals(self.snapshot(repair.cluster))
            except RepairError as exc:
                return self._failed(conn, repair, str(exc))
            if refused:
                detail = "; ".join(refused)
                return store.transition(
                    conn,
                    repair,
                    {"state": "refused", "refusal": detail},
                    Audit(SYSTEM_ACTOR, "refused", detail=f"at apply: {detail}"),
                    self._clock.now(),
                )
            plan = Plan.from_dict(repair.plan)
            try:
                result = carry_out(self.admin(repair.cluster), plan)
            except (KafkaUnavailableError, KafkaRequestError) as exc:
                return self._failed(conn, repair, str(exc))
            state = "failed" if result["errors"] and not result["elected"] else "applied"
            now = self._clock.now()
            return store.transition(
                conn,
                repair,
                {
                    "state": state,
                    "result": result,
                    "applied_at": now if state == "applied" else None,
                    "last_error": "; ".join(f"{k}: {v}" for k, v in result["errors"].items()) or None,
                },
                Audit(
                    SYSTEM_ACTOR,
                    state,
                    old_value={"leaders": repair.plan.get("leaders_before", {})},
                    new_value=result,
                    detail=f"{len(result['elected'])} of {len(plan.moves)} partition(s) led by "
                    "their new leader",
                ),
                now,
            )

    def _failed(self, conn: Connection, repair: Repair, error: str) -> Repair:
        return store.transition(
            conn,
            repair,
            {"state": "failed", "last_error": error},
            Audit(SYSTEM_ACTOR, "failed", detail=error),
            self._clock.now(),
        )

    # -- did it help --------------------------------------------------------------------------

    def check_outcomes(self) -> int:
        """Record, for every applied repair without an outcome, whether its finding resolved (or
        an evaluation after the apply still matched it). Returns how many were recorded."""
        recorded = 0
        now = self._clock.now()
        with self._engine().begin() as conn:
            for repair in store.list_repairs(conn, states=["applied"], limit=1000):
                if repair.outcome is not None or repair.applied_at is None:
                    continue
                found = finding(conn, repair.finding_id)
                if found.state == "resolved":
                    outcome = "resolved"
                elif found.evaluated_at > repair.applied_at:
                    outcome = "unresolved"
                else:
                    continue  # no evaluation since the apply: nothing known yet
                store.transition(
                    conn,
                    repair,
                    {"outcome": outcome, "outcome_at": now},
                    Audit(
                        SYSTEM_ACTOR, outcome, detail=f"finding {found.id} ({found.rule}) is {found.state}"
                    ),
                    now,
                )
                recorded += 1
        return recorded

    def tick(self) -> dict[str, int]:
        """The scheduled part: apply what was approved but not applied (a stop in between), and
        record outcomes."""
        with self._engine().connect() as conn:
            waiting = [r.id for r in store.list_repairs(conn, states=["approved"])]
        applied = 0
        for repair_id in waiting:
            try:
                self.apply(repair_id)
                applied += 1
            except Exception:  # one repair's failure must not stop the others
                log.exception("repair %s: apply failed; tried again next run", repair_id)
        return {"repairs_applied": applied, "repair_outcomes": self.check_outcomes()}


def _kind(kind: str) -> RepairKind:
    spec = KINDS.get(kind)
    if spec is None:
        raise RepairError("invalid", f"unknown repair {kind!r}; one of {', '.join(KINDS)}")
    return spec


def _check_rule(found: FindingRef, kind: str, spec: RepairKind) -> None:
    if found.rule not in spec.rules:
        raise RepairError(
            "invalid",
            f"finding {found.id} is a {found.rule} finding; {kind} repairs {', '.join(sorted(spec.rules))} "
            f"findings (for {found.rule}: {', '.join(kinds_for(found.rule)) or 'no repair'})",
        )


def carry_out(admin: LeaderApi, plan: Plan) -> dict[str, Any]:
    """Apply `plan` on a cluster: reorder the replicas of the moves that need it (and wait until
    the metadata shows the new orders), then elect the preferred leaders. Returns what was done:
    `reordered` and `elected` partitions, and `errors` per partition."""
    errors: dict[str, str] = {}
    reordered: list[list[Any]] = []
    orders = {(m.topic, m.partition): m.new_replicas for m in plan.moves if m.reorders}
    if orders:
        moved = admin.reorder_replicas(orders)
        errors.update(moved.errors)
        reordered = [list(tp) for tp in moved.value]
        errors.update(_await_orders(admin, {tp: orders[tp] for tp in moved.value}))
    # A partition whose reorder failed is not elected: it would only keep its leader.
    asked = [(m.topic, m.partition) for m in plan.moves if f"{m.topic}:{m.partition}" not in errors]
    elected = admin.elect_preferred_leaders(asked)
    errors.update(elected.errors)
    return {"reordered": reordered, "elected": [list(tp) for tp in elected.value], "errors": errors}


def _await_orders(admin: LeaderApi, orders: Mapping[tuple[str, int], tuple[int, ...]]) -> dict[str, str]:
    """Wait until the metadata shows the new replica orders, so the election that follows
    elects the new first replica (before, it would answer "not needed" for the old one).
    Returns "topic:partition" -> why, for those that did not show within the wait."""
    deadline = time.monotonic() + REORDER_WAIT_SECONDS
    waiting = dict(orders)
    while waiting:
        topics = admin.describe_topics(sorted({t for t, _ in waiting}))
        shown = {(t.name, p.partition): p.replicas for t in topics for p in t.partitions}
        waiting = {tp: order for tp, order in waiting.items() if shown.get(tp) != order}
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {
        f"{t}:{p}": f"the new replica order did not show within {REORDER_WAIT_SECONDS:g}s" for t, p in waiting
    }
