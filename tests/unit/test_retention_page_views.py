"""The retention button's page views: the form's numbers with units, the flash cookie, which
buttons a request offers, and the sections of /retention."""

from __future__ import annotations

import pytest

from monitor.act.policy import Policy, TierLimits
from monitor.act.request import Request
from monitor.core.identity import Identity
from monitor.expose.web.pages import retention_views as views
from tests.fixtures.retention_requests import request_in

DAY_MS = 86_400_000
LIMITS = TierLimits(max_retention_ms="30d", max_retention_bytes=2**40, max_multiple=10, max_duration="14d")
POLICY = Policy(LIMITS, LIMITS, 0.85, ("kafka-platform",), 3_600_000, "review")
ALICE = Identity("alice", frozenset({"payments"}), "proxy")
BOB = Identity("bob", frozenset({"kafka-platform"}), "proxy")


def _form(**fields: str) -> dict[str, str]:
    base = {"retention_ms_unit": "days", "retention_bytes_unit": "GiB", "duration_value": "12",
            "duration_unit": "hours", "reason": "lag"}  # fmt: skip
    return {**base, **fields}


def test_the_form_turns_numbers_with_units_into_milliseconds_and_bytes() -> None:
    asked = views.parse_raise_form(_form(retention_ms_value="1.5", retention_bytes_value="50"))
    assert asked.new == {"retention.ms": DAY_MS * 3 // 2, "retention.bytes": 50 * 2**30}
    assert asked.duration_ms == 12 * 3_600_000 and asked.reason == "lag"
    assert asked.fields["retention_ms_value"] == "1.5"


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({}, "give a new retention.ms and/or a new retention.bytes"),
        ({"retention_ms_value": "two"}, "new retention.ms: 'two' is not a number"),
        ({"retention_ms_value": "-1"}, "new retention.ms: '-1' is not a number"),
        ({"retention_ms_value": "٣"}, "new retention.ms: '٣' is not a number"),
        ({"retention_ms_value": "0.0"}, "give a number above 0"),
        ({"retention_ms_value": "2", "retention_ms_unit": "weeks"}, "choose a unit among minutes, hours, days"),
        ({"retention_ms_value": "2", "duration_value": ""}, "duration: say how long"),
        ({"retention_ms_value": "2", "reason": "  "}, "reason: say what is lagging"),
    ],
)  # fmt: skip
def test_a_bad_form_names_the_field_and_the_fix(fields: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        views.parse_raise_form(_form(**fields))


def test_a_flash_message_survives_its_cookie_and_garbage_is_ignored() -> None:
    value = views.flash_value("error", "Not changed: <b>refused</b>", ["disk_headroom: 90%"])
    assert views.read_flash(value) == {
        "kind": "error", "text": "Not changed: <b>refused</b>", "lines": ["disk_headroom: 90%"],
    }  # fmt: skip
    assert views.read_flash("not-base64!") is None
    assert views.read_flash(None) is None


def _request(state: str, **extra: object) -> Request:
    return request_in(state, requested_by="alice", team="payments", **extra)


def test_buttons_follow_who_may_do_what() -> None:
    waiting = _request("awaiting_approval")
    assert views.actions_for(waiting, BOB, POLICY) == ["approve", "reject"]
    assert views.actions_for(waiting, ALICE, POLICY) == ["withdraw"]
    assert views.actions_for(waiting, None, POLICY) == []
    instant = _request("pending_review", review="pending")
    assert views.actions_for(instant, BOB, POLICY) == ["approve", "reject", "revert"]
    assert views.actions_for(instant, ALICE, POLICY) == ["revert", "extend"]
    extended = _request("verified", extension_ms=DAY_MS)
    assert views.actions_for(extended, ALICE, POLICY) == ["revert"]


def test_open_requests_are_sorted_into_sections() -> None:
    assert views.section_of(_request("awaiting_approval")) == "awaiting"
    assert views.section_of(_request("verified", extension_ms=DAY_MS)) == "awaiting"
    assert views.section_of(_request("pending_review", review="pending")) == "review"
    assert views.section_of(_request("verified", review="approved")) == "applied"
    assert views.section_of(_request("retrying")) == "moving"


def test_audit_rows_say_old_and_new_in_words() -> None:
    rows = views.audit_view([
        {"old_value": {"retention.ms": str(DAY_MS)}, "new_value": {"retention.ms": str(2 * DAY_MS)}},
        {"old_value": None, "new_value": {"retention.ms": str(2 * DAY_MS)}},
        {"old_value": None, "new_value": None},
    ])  # fmt: skip
    assert [r["change"] for r in rows] == ["retention.ms 1 d → 2 d", "retention.ms = 2 d", ""]


@pytest.mark.parametrize(
    ("value", "words"),
    [("9" * 30, "more than Kafka can hold"), ("9" * 400, "too long for a number"), ("1e5000", "not a number"),
     ("1e999999999", "not a number")],
)  # fmt: skip
def test_form_numbers_beyond_what_kafka_holds_are_refused(value: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        views.parse_raise_form(_form(retention_ms_value=value))
