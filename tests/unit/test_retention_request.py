"""A retention request's allowed state moves: one table, checked on every change of state."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.act import ledger
from monitor.act.ledger import SYSTEM_ACTOR
from monitor.act.model import RetentionError, describe_change, display_state, request_json
from monitor.act.request import (
    INITIAL_STATES,
    TRANSITIONS,
    WITHDRAWABLE_STATES,
    IllegalTransition,
    check_transition,
)
from monitor.store.audit import Audit
from monitor.store.retention import IN_FORCE_STATES, OPEN_STATES, REQUEST_STATES
from tests.fixtures.retention_requests import CREATED, request_in

FINAL = {"refused", "rejected", "cancelled", "failed", "reverted"}


def test_every_state_has_a_row_and_only_the_final_ones_lead_nowhere() -> None:
    assert set(TRANSITIONS) == set(REQUEST_STATES)
    assert {s for s, moves in TRANSITIONS.items() if not moves} == FINAL
    assert all(target in REQUEST_STATES for moves in TRANSITIONS.values() for target in moves)
    assert set(OPEN_STATES) == set(REQUEST_STATES) - FINAL
    assert {"awaiting_approval", "approved", "retrying"} == WITHDRAWABLE_STATES


def test_every_open_state_can_reach_a_final_one() -> None:
    for start in OPEN_STATES:
        seen, todo = {start}, [start]
        while todo:
            for target in TRANSITIONS[todo.pop()] - seen:
                seen.add(target)
                todo.append(target)
        assert seen & FINAL, start


@pytest.mark.parametrize(
    ("current", "wanted"),
    [
        (None, "awaiting_approval"), (None, "approved"), (None, "refused"),
        ("awaiting_approval", "approved"), ("approved", "applied"), ("applied", "pending_review"),
        ("pending_review", "verified"), ("verified", "expiring"), ("expiring", "reverted"),
        ("retrying", "retrying"), ("expiring", "expiring"),
    ],
)  # fmt: skip
def test_the_flow_s_moves_are_allowed(current: str | None, wanted: str) -> None:
    check_transition(7, current, wanted)


@pytest.mark.parametrize(
    ("current", "wanted"),
    [
        (None, "verified"), ("awaiting_approval", "applied"), ("refused", "approved"),
        ("reverted", "expiring"), ("verified", "cancelled"), ("applied", "reverted"),
        ("approved", "nonsense"),
    ],
)  # fmt: skip
def test_other_moves_are_a_clear_error(current: str | None, wanted: str) -> None:
    with pytest.raises(IllegalTransition, match=f"cannot move from '.*' to '{wanted}'"):
        check_transition(7, current, wanted)


def test_the_error_names_the_request_and_where_it_may_go() -> None:
    with pytest.raises(IllegalTransition) as caught:
        check_transition(7, "verified", "cancelled")
    assert str(caught.value) == (
        "retention request 7 cannot move from 'verified' to 'cancelled'; "
        "from 'verified' it may move to: expiring, verified"
    )
    with pytest.raises(IllegalTransition, match="it may move to: none: it is final"):
        check_transition(7, "reverted", "expiring")


class _NoDatabase:
    def execute(self, *_: Any) -> None:
        raise AssertionError("an illegal transition must fail before anything is written")


def test_the_ledger_refuses_an_illegal_move_before_writing() -> None:
    request = request_in("reverted")
    with pytest.raises(RetentionError, match="cannot move from 'reverted' to 'applied'") as refused:
        ledger.transition(_NoDatabase(), request, {"state": "applied"}, Audit(SYSTEM_ACTOR, "x"), CREATED)  # type: ignore[arg-type]
    assert refused.value.code == "conflict"
    with pytest.raises(ValueError, match=r"no column\(s\) \['colour'\]"):
        ledger.transition(_NoDatabase(), request, {"colour": "red"}, Audit(SYSTEM_ACTOR, "x"), CREATED)  # type: ignore[arg-type]


def test_what_a_request_s_state_says() -> None:
    assert request_in("pending_review", review="pending").awaits_decision
    assert request_in("verified", extension_ms=1000).awaits_decision
    assert not request_in("verified", review="approved").awaits_decision
    assert request_in("approved").withdrawable and not request_in("applied").withdrawable
    assert {s for s in REQUEST_STATES if request_in(s).in_force} == set(IN_FORCE_STATES)
    assert all(s in INITIAL_STATES for s in ("refused", "approved", "awaiting_approval"))


def test_a_request_in_words_and_as_json() -> None:
    request = request_in("pending_review")
    assert display_state(request) == "applied-pending-review"
    assert describe_change(request) == "retention.ms 1 d -> 2 d"
    shown = request_json(request)
    assert shown["created_at"] == "2026-01-05T03:00:00+00:00" and shown["id"] == 1
    assert shown["change"] == "retention.ms 1 d -> 2 d"
    assert (
        request.with_changes({"state": "verified"}).state == "verified" and request.state == "pending_review"
    )
