"""The retention button on the real cluster, a real PostgreSQL and a real git repository (with a
bare repository as its remote): instant raises, reviewed raises, refusals, the revert at expiry,
and an apply while the controller quorum is down."""

from __future__ import annotations

from datetime import UTC, datetime

import git
import pytest
from sqlalchemy import text

from monitor.act import ledger
from monitor.act.model import RetentionError
from monitor.core.identity import Identity
from tests.fixtures.retention import ALICE, BOB, CAROL, CLUSTER, DAY_MS, Rig

GiB = 2**30


def _commit(retention_rig: Rig, sha: str) -> git.Commit:
    return git.Repo(retention_rig.remote).commit(sha)


def test_instant_raise_is_applied_within_seconds_and_committed(retention_rig: Rig) -> None:
    topic = retention_rig.topic()
    started = datetime.now(UTC)
    request = retention_rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, DAY_MS, "ledger behind"
    )
    assert (datetime.now(UTC) - started).total_seconds() < 20
    assert request.state == "pending_review"
    retention_rig.expect_retention_ms(topic, str(2 * DAY_MS))
    commit = _commit(retention_rig, request.commit_id)  # pushed to the remote
    assert f"Request: {request.id}" in commit.message
    assert "Requested-by: alice" in commit.message
    assert "Approved-by: pending review (instant tier)" in commit.message
    assert f"retention.ms: {DAY_MS} -> {2 * DAY_MS}" in commit.message
    assert retention_rig.actions(request.id) == ["requested", "approved", "committed", "applied", "verified"]

    # A reviewer approves it afterwards: recorded as an empty commit.
    reviewed = retention_rig.service.approve(BOB, request.id, "fine")
    assert reviewed.state == "verified" and reviewed.review == "approved"
    assert retention_rig.actions(request.id)[-1] == "review_approved"
    retention_rig.service.revert(ALICE, request.id, "caught up")


def test_large_raise_waits_for_a_reviewer_other_than_the_requester(retention_rig: Rig) -> None:
    topic = retention_rig.topic()
    request = retention_rig.service.raise_retention(
        CAROL, CLUSTER, topic, {"retention.ms": 5 * DAY_MS}, DAY_MS, "replay"
    )
    assert request.state == "awaiting_approval"
    retention_rig.expect_retention_ms(topic, str(DAY_MS))
    with pytest.raises(RetentionError, match=r"carol asked for request \d+ and cannot approve it") as own:
        retention_rig.service.approve(CAROL, request.id)
    assert own.value.code == "forbidden"
    with pytest.raises(RetentionError, match="only members of kafka-platform may approve"):
        retention_rig.service.approve(ALICE, request.id)
    approved = retention_rig.service.approve(BOB, request.id, "ok for a day")
    assert approved.state == "verified"
    retention_rig.expect_retention_ms(topic, str(5 * DAY_MS))
    assert "Approved-by: bob" in _commit(retention_rig, approved.commit_id).message
    assert retention_rig.actions(request.id) == [
        "requested", "awaiting_approval", "refused", "refused", "approved", "committed", "applied", "verified",
    ]  # fmt: skip
    with retention_rig.engine.connect() as conn:
        refusals = [
            (a["actor"], a["detail"]) for a in ledger.audit_of(conn, request.id) if a["action"] == "refused"
        ]
    assert refusals[0][0] == "carol" and refusals[0][1].startswith(
        "approve: forbidden: carol asked for request"
    )
    assert refusals[1][0] == "alice" and "only members of kafka-platform may approve" in refusals[1][1]
    retention_rig.service.revert(CAROL, request.id, "done")


def test_automatic_revert_at_expiry_with_notices_before_and_after(retention_rig: Rig) -> None:
    topic = retention_rig.topic()
    request = retention_rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, 2 * 3_600_000, "lag"
    )
    retention_rig.expect_retention_ms(topic, str(2 * DAY_MS))
    retention_rig.clock.advance(3600 + 60)  # within notify_before_expiry (1 h)
    retention_rig.service.tick()
    retention_rig.clock.advance(3600)  # past the expiry
    counts = retention_rig.service.tick()
    assert counts["reverted"] >= 1
    with retention_rig.engine.connect() as conn:
        row = ledger.get(conn, request.id)
        kinds = [r.kind for r in conn.execute(
            text("SELECT kind FROM notices WHERE request_id = :r ORDER BY id"), {"r": request.id})]  # fmt: skip
    assert row is not None and row.state == "reverted"
    retention_rig.expect_retention_ms(topic, str(DAY_MS))
    assert kinds == ["applied", "expiring", "reverted"]
    revert = _commit(retention_rig, row.revert_commit_id)
    assert f"retention.ms: {2 * DAY_MS} -> {DAY_MS}" in revert.message
    assert retention_rig.actions(request.id)[-3:] == ["expiring", "committed", "reverted"]


@pytest.mark.parametrize(
    ("who", "prefix", "new", "duration", "rate", "rule", "words"),
    [
        (ALICE, "search", {"retention.ms": 2 * DAY_MS}, DAY_MS, 1000.0, "owner_team", "belongs to team 'search'"),
        (ALICE, "payments", {"retention.ms": DAY_MS // 2}, DAY_MS, 1000.0, "higher_than_current",
         "retention.ms 12 h is not higher than the current 1 d"),
        (ALICE, "payments", {"retention.ms": 3650 * DAY_MS}, DAY_MS, 1000.0, "max_value",
         "above the policy's limit of 30 d"),
        # 10 MB/s for one more day is ~805 GiB on each broker: 100 + 805 of 1000 GiB is over 80%.
        (ALICE, "payments", {"retention.ms": 2 * DAY_MS}, DAY_MS, 10_000_000.0, "disk_headroom",
         "broker 1: 100.0 GiB used + 804.7 GiB for this raise of 1000.0 GiB = 90.5%"),
    ],
    ids=["other-team", "lower", "absurd", "disk"],
)  # fmt: skip
def test_refusals_name_the_rule_and_the_numbers(
    retention_rig: Rig,
    who: Identity,
    prefix: str,
    new: dict[str, int],
    duration: int,
    rate: float,
    rule: str,
    words: str,
) -> None:
    topic = retention_rig.topic(prefix, rate=rate)
    with pytest.raises(RetentionError) as refused:
        retention_rig.service.raise_retention(who, CLUSTER, topic, new, duration, "please")
    assert refused.value.code == "refused"
    assert f"{rule}: " in str(refused.value) and words in str(refused.value), str(refused.value)
    request_id = refused.value.details["request_id"]
    with retention_rig.engine.connect() as conn:
        row = ledger.get(conn, request_id)
    assert row is not None and row.state == "refused" and rule in row.refusal
    assert retention_rig.actions(request_id) == ["requested", "refused"]
    retention_rig.expect_retention_ms(topic, str(DAY_MS))


def test_a_second_concurrent_request_is_refused(retention_rig: Rig) -> None:
    topic = retention_rig.topic()
    first = retention_rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 5 * DAY_MS}, DAY_MS, "one"
    )
    with pytest.raises(RetentionError, match=f"one_open_request: request {first.id} is still open"):
        retention_rig.service.raise_retention(
            CAROL, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, DAY_MS, "two"
        )
    cancelled = retention_rig.service.reject(ALICE, first.id, "not needed after all")
    assert cancelled.state == "cancelled"


def test_kafka_down_at_apply_time_is_applied_after_it_returns(retention_rig: Rig) -> None:
    topic = retention_rig.topic()
    request = retention_rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 4 * DAY_MS}, DAY_MS, "replay"
    )
    victims = [b for b in retention_rig.kafka.broker_ids if b != retention_rig.kafka.broker_ids[0]]
    for broker in victims:  # two of three controllers gone: no quorum, no config change possible
        retention_rig.kafka.stop_broker(broker)
    try:
        waiting = retention_rig.service.approve(BOB, request.id, "go")
        assert waiting.state == "retrying", waiting
        assert waiting.last_error
    finally:
        for broker in victims:
            retention_rig.kafka.start_broker(broker)
    retention_rig.service.writer(CLUSTER).close()  # as after a restart of the daemon: nothing kept in memory
    retention_rig.service.stop()
    retention_rig.clock.advance(2)

    def applied() -> bool:
        retention_rig.service.tick()
        with retention_rig.engine.connect() as conn:
            row = ledger.get(conn, request.id)
        retention_rig.clock.advance(2)
        return row is not None and row.state == "verified"

    retention_rig.kafka.wait_for(applied, 120, "the retried apply")
    retention_rig.expect_retention_ms(topic, str(4 * DAY_MS))
    actions = retention_rig.actions(request.id)
    assert actions[:4] == ["requested", "awaiting_approval", "approved", "committed"]
    assert "retrying" in actions
    assert actions[-2:] == ["applied", "verified"]
    assert actions.count("committed") == 1  # the retry reuses the commit
