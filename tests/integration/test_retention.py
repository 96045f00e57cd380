"""The retention button on the real cluster, a real PostgreSQL and a real git repository (with a
bare repository as its remote): instant raises, reviewed raises, refusals, the revert at expiry,
and an apply while the controller quorum is down."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import git
import pytest
from confluent_kafka.admin import ConfigResource, ResourceType
from sqlalchemy import Engine, text

from monitor.act import ledger
from monitor.act.gitrepo import ConfigRepo
from monitor.act.model import RetentionError
from monitor.act.service import RetentionService
from monitor.core.clock import FakeClock
from monitor.core.records import Identity
from monitor.core.settings import ClusterConfig, RetentionConfig
from monitor.store.partitions import ensure_partitions
from tests.fixtures.kafka import KafkaTestHelper

GiB = 2**30
DAY_MS = 86_400_000
CLUSTER = "retention-test"

POLICY = """
limits: {max_retention_ms: 30d, max_retention_bytes: 1TiB, max_multiple: 10, max_duration: 14d}
instant: {max_retention_ms: 7d, max_retention_bytes: 100GiB, max_multiple: 3, max_duration: 2d}
disk_usage_ceiling: 0.8
reviewers: [kafka-platform]
notify_before_expiry: 1h
"""
OWNERS = """
teams:
  - name: payments
    topics: ['payments-.*']
  - name: search
    topics: ['search-.*']
"""

ALICE = Identity("alice", frozenset({"payments"}), "cli")
CAROL = Identity("carol", frozenset({"payments", "kafka-platform"}), "cli")
BOB = Identity("bob", frozenset({"kafka-platform"}), "cli")


@dataclass
class Rig:
    service: RetentionService
    clock: FakeClock
    engine: Engine
    kafka: KafkaTestHelper
    remote: Path

    def topic(self, prefix: str = "payments", retention_ms: int = DAY_MS, rate: float = 1000.0) -> str:
        """A topic with 1 partition on all three brokers, its produce rate as an evaluation saw it."""
        name = self.kafka.create_topic(
            f"{prefix}-{uuid.uuid4().hex[:8]}",
            replication_factor=3,
            config={"retention.ms": str(retention_ms)},
        )
        now = self.clock.now()
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO derived_cluster (cluster, evaluated_at) VALUES (:c, :t) ON CONFLICT DO NOTHING"
                ),
                {"c": CLUSTER, "t": now},
            )
            conn.execute(
                text(
                    "INSERT INTO derived_partition (cluster, topic, partition, evaluated_at, produce_bytes_rate)"
                    " VALUES (:c, :topic, 0, :t, :rate)"
                ),
                {"c": CLUSTER, "topic": name, "t": now, "rate": rate},
            )
            for broker in self.kafka.broker_ids:  # 1000 GiB disks, 100 GiB used, as last collected
                conn.execute(
                    text(
                        "INSERT INTO broker_disks (cluster, broker_id, log_dir, sampled_at, total_bytes,"
                        " usable_bytes) VALUES (:c, :b, '/data', :t, :total, :usable) ON CONFLICT DO NOTHING"
                    ),
                    {"c": CLUSTER, "b": broker, "t": now, "total": 1000 * GiB, "usable": 900 * GiB},
                )
        # A new topic reaches every broker's metadata a moment after it is created; the service may
        # ask any of them for its configs.
        self.kafka.wait_for(lambda: self._configs_readable(name), 30, f"every broker to know {name}")
        return name

    def _configs_readable(self, topic: str) -> bool:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        for _ in range(5):
            try:
                self.kafka.admin.describe_configs([resource])[resource].result(timeout=10)
                self.service.writer(CLUSTER).read_configs(topic, ["retention.ms"])
            except Exception:
                return False
        return True

    def expect_retention_ms(self, topic: str, expected: str) -> None:
        """retention.ms as Kafka reports it becomes `expected`: a broker that was just restarted
        catches up on config changes a moment later than the controller applied them."""
        seen: list[str] = []

        def reached() -> bool:
            seen.append(self.retention_ms(topic))
            return seen[-1] == expected

        try:
            self.kafka.wait_for(reached, 30, f"retention.ms of {topic} to be {expected}")
        except AssertionError:
            raise AssertionError(f"retention.ms of {topic}: {seen[-1:]} != {expected}") from None

    def retention_ms(self, topic: str) -> str:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entries = self.kafka.admin.describe_configs([resource])[resource].result(timeout=30)
        return str(entries["retention.ms"].value)

    def actions(self, request_id: int) -> list[str]:
        with self.engine.connect() as conn:
            return [a["action"] for a in ledger.audit_of(conn, request_id)]


@pytest.fixture(scope="module")
def rig(kafka: KafkaTestHelper, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    home = tmp_path_factory.mktemp("retention")
    (home / "policy.yaml").write_text(POLICY)
    (home / "owners.yaml").write_text(OWNERS)
    remote = home / "remote.git"
    git.Repo.init(remote, bare=True)
    clock = FakeClock(datetime.now(UTC))
    cluster = ClusterConfig(name=CLUSTER, bootstrap_servers=kafka.bootstrap_servers.split(","),
                            request_timeout_seconds=5)  # fmt: skip
    config = RetentionConfig(retry_seconds=1, verify_seconds=10)
    with engine.begin() as conn:
        ensure_partitions(conn, clock.now(), 30)
    service = RetentionService(config, [cluster], lambda: engine, clock,
                               ConfigRepo(home / "configs", remote=str(remote)),
                               home / "policy.yaml", home / "owners.yaml")  # fmt: skip
    service.start()
    try:
        yield Rig(service, clock, engine, kafka, remote)
    finally:
        service.stop()


def _commit(rig: Rig, sha: str) -> git.Commit:
    return git.Repo(rig.remote).commit(sha)


def test_instant_raise_is_applied_within_seconds_and_committed(rig: Rig) -> None:
    topic = rig.topic()
    started = datetime.now(UTC)
    request = rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, DAY_MS, "ledger behind"
    )
    assert (datetime.now(UTC) - started).total_seconds() < 20
    assert request.state == "pending_review"
    rig.expect_retention_ms(topic, str(2 * DAY_MS))
    commit = _commit(rig, request.commit_id)  # pushed to the remote
    assert f"Request: {request.id}" in commit.message
    assert "Requested-by: alice" in commit.message
    assert "Approved-by: pending review (instant tier)" in commit.message
    assert f"retention.ms: {DAY_MS} -> {2 * DAY_MS}" in commit.message
    assert rig.actions(request.id) == ["requested", "approved", "committed", "applied", "verified"]

    # A reviewer approves it afterwards: recorded as an empty commit.
    reviewed = rig.service.approve(BOB, request.id, "fine")
    assert reviewed.state == "verified" and reviewed.review == "approved"
    assert rig.actions(request.id)[-1] == "review_approved"
    rig.service.revert(ALICE, request.id, "caught up")


def test_large_raise_waits_for_a_reviewer_other_than_the_requester(rig: Rig) -> None:
    topic = rig.topic()
    request = rig.service.raise_retention(
        CAROL, CLUSTER, topic, {"retention.ms": 5 * DAY_MS}, DAY_MS, "replay"
    )
    assert request.state == "awaiting_approval"
    rig.expect_retention_ms(topic, str(DAY_MS))
    with pytest.raises(RetentionError, match=r"carol asked for request \d+ and cannot approve it") as own:
        rig.service.approve(CAROL, request.id)
    assert own.value.code == "forbidden"
    with pytest.raises(RetentionError, match="only members of kafka-platform may approve"):
        rig.service.approve(ALICE, request.id)
    approved = rig.service.approve(BOB, request.id, "ok for a day")
    assert approved.state == "verified"
    rig.expect_retention_ms(topic, str(5 * DAY_MS))
    assert "Approved-by: bob" in _commit(rig, approved.commit_id).message
    assert rig.actions(request.id) == [
        "requested", "awaiting_approval", "refused", "refused", "approved", "committed", "applied", "verified",
    ]  # fmt: skip
    with rig.engine.connect() as conn:
        refusals = [
            (a["actor"], a["detail"]) for a in ledger.audit_of(conn, request.id) if a["action"] == "refused"
        ]
    assert refusals[0][0] == "carol" and refusals[0][1].startswith(
        "approve: forbidden: carol asked for request"
    )
    assert refusals[1][0] == "alice" and "only members of kafka-platform may approve" in refusals[1][1]
    rig.service.revert(CAROL, request.id, "done")


def test_automatic_revert_at_expiry_with_notices_before_and_after(rig: Rig) -> None:
    topic = rig.topic()
    request = rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, 2 * 3_600_000, "lag"
    )
    rig.expect_retention_ms(topic, str(2 * DAY_MS))
    rig.clock.advance(3600 + 60)  # within notify_before_expiry (1 h)
    rig.service.tick()
    rig.clock.advance(3600)  # past the expiry
    counts = rig.service.tick()
    assert counts["reverted"] >= 1
    with rig.engine.connect() as conn:
        row = ledger.get(conn, request.id)
        kinds = [r.kind for r in conn.execute(
            text("SELECT kind FROM notices WHERE request_id = :r ORDER BY id"), {"r": request.id})]  # fmt: skip
    assert row is not None and row.state == "reverted"
    rig.expect_retention_ms(topic, str(DAY_MS))
    assert kinds == ["applied", "expiring", "reverted"]
    revert = _commit(rig, row.revert_commit_id)
    assert f"retention.ms: {2 * DAY_MS} -> {DAY_MS}" in revert.message
    assert rig.actions(request.id)[-3:] == ["expiring", "committed", "reverted"]


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
    rig: Rig,
    who: Identity,
    prefix: str,
    new: dict[str, int],
    duration: int,
    rate: float,
    rule: str,
    words: str,
) -> None:
    topic = rig.topic(prefix, rate=rate)
    with pytest.raises(RetentionError) as refused:
        rig.service.raise_retention(who, CLUSTER, topic, new, duration, "please")
    assert refused.value.code == "refused"
    assert f"{rule}: " in str(refused.value) and words in str(refused.value), str(refused.value)
    request_id = refused.value.details["request_id"]
    with rig.engine.connect() as conn:
        row = ledger.get(conn, request_id)
    assert row is not None and row.state == "refused" and rule in row.refusal
    assert rig.actions(request_id) == ["requested", "refused"]
    rig.expect_retention_ms(topic, str(DAY_MS))


def test_a_second_concurrent_request_is_refused(rig: Rig) -> None:
    topic = rig.topic()
    first = rig.service.raise_retention(ALICE, CLUSTER, topic, {"retention.ms": 5 * DAY_MS}, DAY_MS, "one")
    with pytest.raises(RetentionError, match=f"one_open_request: request {first.id} is still open"):
        rig.service.raise_retention(CAROL, CLUSTER, topic, {"retention.ms": 2 * DAY_MS}, DAY_MS, "two")
    cancelled = rig.service.reject(ALICE, first.id, "not needed after all")
    assert cancelled.state == "cancelled"


def test_kafka_down_at_apply_time_is_applied_after_it_returns(rig: Rig) -> None:
    topic = rig.topic()
    request = rig.service.raise_retention(
        ALICE, CLUSTER, topic, {"retention.ms": 4 * DAY_MS}, DAY_MS, "replay"
    )
    victims = [b for b in rig.kafka.broker_ids if b != rig.kafka.broker_ids[0]]
    for broker in victims:  # two of three controllers gone: no quorum, no config change possible
        rig.kafka.stop_broker(broker)
    try:
        waiting = rig.service.approve(BOB, request.id, "go")
        assert waiting.state == "retrying", waiting
        assert waiting.last_error
    finally:
        for broker in victims:
            rig.kafka.start_broker(broker)
    rig.service.writer(CLUSTER).close()  # as after a restart of the daemon: nothing kept in memory
    rig.service.stop()
    rig.clock.advance(2)

    def applied() -> bool:
        rig.service.tick()
        with rig.engine.connect() as conn:
            row = ledger.get(conn, request.id)
        rig.clock.advance(2)
        return row is not None and row.state == "verified"

    rig.kafka.wait_for(applied, 120, "the retried apply")
    rig.expect_retention_ms(topic, str(4 * DAY_MS))
    actions = rig.actions(request.id)
    assert actions[:4] == ["requested", "awaiting_approval", "approved", "committed"]
    assert "retrying" in actions
    assert actions[-2:] == ["applied", "verified"]
    assert actions.count("committed") == 1  # the retry reuses the commit
