"""Scenarios end to end on the real cluster: collect -> evaluate (Spark, default rule pack) ->
findings, asserting the rule and the severity each incident raises.

The scenarios that stop no broker are each a cluster of their own, set up one after another and
then evaluated in one evaluation of all their clusters, as the daemon evaluates every cluster it
watches at once: an entity's verdict reads the rows of its own cluster only, so each scenario
raises what it would alone. The two that stop brokers change the whole Kafka cluster: broker 3
stops and the one's topic is collected, then broker 2 and the other's, and the two are evaluated
together after the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine

from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.populated import MINUTE, Scenario, evaluate_together, now_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The shared evaluation's fixture does the work of seven tests within one test's timeout.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

Make = Callable[[str, list[str]], Scenario]


@dataclass(frozen=True)
class Case:
    scenario: Scenario
    subject: str
    """The group or topic its findings are about."""


def _lagging(kafka: KafkaTestHelper, make: Make) -> Case:
    topic = kafka.create_topic()
    start = now_ms() - 20 * MINUTE  # records appended over the last 20 minutes
    kafka.produce(topic, [b"m"] * 50, timestamps_ms=[start + i * 24_000 for i in range(50)])
    group = f"slow-{topic}"
    kafka.consume_and_commit(group, topic, 10)
    s = make("lagging", [topic])
    s.collect()
    return Case(s, group)


def _stopped(kafka: KafkaTestHelper, make: Make) -> Case:
    topic = kafka.create_topic()
    kafka.produce(topic, [b"s"] * 100)
    group = f"stopped-{topic}"
    s = make("stopped", [topic])
    committed_at: list[float] = []
    for n in (5, 5, 5):  # commits about a second apart, then nothing
        kafka.consume_and_commit(group, topic, n)
        committed_at.append(time.monotonic())
        s.collect()
        time.sleep(1)
    kafka.produce(topic, [b"s"] * 10)  # there is something new to read
    # No commit for longer than the commit window spans (STOP), however long the commits took.
    span = committed_at[-1] - committed_at[0]
    time.sleep(max(0.0, committed_at[-1] + span + 1.5 - time.monotonic()))
    s.collect()
    return Case(s, group)


def _dead(kafka: KafkaTestHelper, make: Make) -> Case:
    topic = kafka.create_topic()
    kafka.produce(topic, [b"d"] * 10)
    group = f"dead-{topic}"
    kafka.consume_and_commit(group, topic, 10)  # caught up, then every consumer is gone
    s = make("deadgroup", [topic])
    s.collect()
    kafka.produce(topic, [b"d"] * 30)
    s.collect()
    return Case(s, group)


def _idle(kafka: KafkaTestHelper, make: Make) -> Case:
    topic = kafka.create_topic()
    kafka.produce(topic, [b"i"] * 5)
    group = f"idle-{topic}"
    kafka.consume_and_commit(group, topic, 5)
    s = make("idle", [topic])
    for _ in range(3):
        s.collect()
        time.sleep(1.5)
    return Case(s, group)


def _shortfall(kafka: KafkaTestHelper, make: Make) -> Case:
    mib = 1024 * 1024
    topic = kafka.create_topic(
        config={"retention.bytes": str(mib), "segment.bytes": str(mib), "retention.ms": str(24 * 3600_000)}
    )
    payload = b"r" * 10_000
    for _ in range(4):
        kafka.produce(topic, [payload] * 100)  # 4 MB into a partition capped at 1 MB

    def trimmed() -> bool:
        kafka.produce(topic, [payload])
        low = kafka.admin.list_topics(topic, timeout=5)  # metadata round trip to pace the loop
        del low
        s_offsets = kafka_low_watermark(kafka, topic)
        return s_offsets > 0

    kafka.wait_for(trimmed, 60, "retention.bytes to delete the oldest segments")
    s = make("shortfall", [topic])
    s.collect(log_dirs=True)
    return Case(s, topic)


def kafka_low_watermark(kafka: KafkaTestHelper, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "lowwm"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low)
    finally:
        consumer.close()


def _at_risk(kafka: KafkaTestHelper, make: Make) -> Case:
    retention_ms = 7 * 3600_000
    topic = kafka.create_topic(config={"retention.ms": str(retention_ms)})
    old = now_ms() - retention_ms + 10 * MINUTE  # deleted by retention in about 10 minutes
    kafka.produce(topic, [b"a"] * 20, timestamps_ms=[old + i for i in range(20)])
    group = f"atrisk-{topic}"
    kafka.consume_and_commit(group, topic, 2)
    s = make("atrisk", [topic])
    s.collect()
    s.collect()  # two samples: the group made no progress between them, so it will not read in time
    return Case(s, group)


def _lost_data(kafka: KafkaTestHelper, make: Make) -> Case:
    topic = kafka.create_topic(
        config={"retention.ms": "1000", "segment.ms": "500", "file.delete.delay.ms": "0"}
    )
    kafka.produce(topic, [b"l"] * 10)
    group = f"lost-{topic}"
    kafka.consume_and_commit(group, topic, 2)

    def deleted() -> bool:
        kafka.produce(topic, [b"n"])
        return kafka_low_watermark(kafka, topic) > 2

    kafka.wait_for(deleted, 60, "retention to delete past the committed offset")
    s = make("lostdata", [topic])
    s.collect()
    return Case(s, group)


# The ones that wait for retention first; the one whose value is a time until deletion last,
# nearest the evaluation.
CASES: dict[str, Callable[[KafkaTestHelper, Make], Case]] = {
    "shortfall": _shortfall, "lostdata": _lost_data, "stopped": _stopped, "idle": _idle,
    "deadgroup": _dead, "lagging": _lagging, "atrisk": _at_risk,
}  # fmt: skip


@dataclass(frozen=True)
class Evaluated:
    cases: dict[str, Case]
    result: dict[str, Any]


@pytest.fixture(scope="module")
def evaluated(kafka: KafkaTestHelper, engine: Engine, spark: SparkSession, db_url: str) -> Evaluated:
    made: list[Scenario] = []

    def make(name: str, topics: list[str]) -> Scenario:
        made.append(Scenario(name, kafka, engine, spark, db_url, topics))
        return made[-1]

    try:
        cases = {name: build(kafka, make) for name, build in CASES.items()}
        result = evaluate_together(made)
    finally:
        for s in made:  # their findings stay readable; their collectors stop before a broker does
            s.close()
    return Evaluated(cases, result)


def test_lagging_consumer(evaluated: Evaluated) -> None:
    case = evaluated.cases["lagging"]
    found = case.scenario.rules_for(case.subject)
    # 40 records x 24 s = 16 min behind
    assert found.get("ConsumerAppendLag") == "warning", case.scenario.findings()
    assert found.get("ConsumerLagSeconds") == "warning"  # the oldest unread message is 16 min old


def test_stopped_consumer(evaluated: Evaluated) -> None:
    case = evaluated.cases["stopped"]
    assert "ConsumerGroupStatus" in case.scenario.rules_for(case.subject), case.scenario.findings()


def test_all_consumers_dead_while_producers_write(evaluated: Evaluated) -> None:
    case = evaluated.cases["deadgroup"]
    assert case.scenario.rules_for(case.subject).get("ConsumerGroupNoMembers") == "warning", (
        case.scenario.findings()
    )


def test_idle_topic_raises_nothing(evaluated: Evaluated) -> None:
    case, result = evaluated.cases["idle"], evaluated.result
    assert result["rows"]["group_partition"] >= 1
    assert case.scenario.rules_for(case.subject) == {}, case.scenario.findings()
    # The phases are timed on the driver's clock: the lazy JDBC reads are part of compute.
    assert set(result["seconds"]) == {"compute", "write"}
    assert all(seconds > 0 for seconds in result["seconds"].values())


def test_retention_shortfall_from_retention_bytes(evaluated: Evaluated) -> None:
    case = evaluated.cases["shortfall"]
    assert case.scenario.rules_for(case.subject).get("RetentionShortfall") == "warning", (
        case.scenario.findings()
    )


def test_group_about_to_lose_data(evaluated: Evaluated) -> None:
    s = evaluated.cases["atrisk"].scenario
    assert s.rules_for(evaluated.cases["atrisk"].subject).get("TimeUntilDataLoss") == "critical", s.findings()
    (value,) = [f["value"] for f in s.findings() if f["rule"] == "TimeUntilDataLoss"]
    assert 8 * 60 <= value <= 10 * 60 + 5


def test_group_that_lost_data(evaluated: Evaluated) -> None:
    case = evaluated.cases["lostdata"]
    assert case.scenario.rules_for(case.subject).get("DataLossOccurred") == "critical", (
        case.scenario.findings()
    )


@dataclass(frozen=True)
class Stopped:
    one: Scenario
    """Its topic's 3 partitions collected with broker 3 stopped."""
    two: Scenario
    """Its topic (min.insync.replicas 2) collected with brokers 2 and 3 stopped."""
    topics: tuple[str, str]


@pytest.fixture(scope="module")
def stopped_brokers(kafka: KafkaTestHelper, engine: Engine, spark: SparkSession, db_url: str) -> Stopped:
    """Broker 3 stopped, then broker 2: each state collected as a cluster of its own (over a topic
    of its own), then both evaluated at once; the brokers start again after the first test."""
    one_topic = kafka.create_topic(partitions=3, replication_factor=3)
    two_topic = kafka.create_topic(partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    one = Scenario("onebroker", kafka, engine, spark, db_url, [one_topic])
    two = Scenario("twobrokers", kafka, engine, spark, db_url, [two_topic])
    try:
        kafka.stop_broker(3)
        kafka.wait_for(lambda: _isr_sizes(kafka, one_topic) == {2}, 60, "the ISR to shrink to 2")
        one.collect()
        kafka.stop_broker(2)
        kafka.wait_for(lambda: _isr_sizes(kafka, two_topic) == {1}, 60, "the ISR to shrink to 1")
        two.collect()
        evaluate_together([one, two])
    finally:
        one.close()
        two.close()
    return Stopped(one, two, (one_topic, two_topic))


def test_one_broker_stopped_is_the_warning_tier(stopped_brokers: Stopped) -> None:
    s, topic = stopped_brokers.one, stopped_brokers.topics[0]
    found = {f["entity_key"]: (f["rule"], f["severity"]) for f in s.findings() if topic in f["entity_key"]}
    assert len(found) == 3 and set(found.values()) == {("PartitionReplicaLost", "warning")}, s.findings()
    assert not any(f["severity"] == "critical" and topic in f["entity_key"] for f in s.findings())


def test_two_brokers_stopped_with_min_isr_2_is_critical(stopped_brokers: Stopped) -> None:
    s, topic = stopped_brokers.two, stopped_brokers.topics[1]
    found = s.rules_for(topic)
    # The partition rules exclude each other: the worst one (under min ISR: acks=all producers fail) pages.
    assert found == {"PartitionUnderMinIsr": "critical"}, s.findings()
    (finding,) = [f for f in s.findings() if f["rule"] == "PartitionUnderMinIsr"]
    assert finding["labels"].get("page") == "true"


def _isr_sizes(kafka: KafkaTestHelper, topic: str) -> set[int]:
    meta = kafka.admin.list_topics(topic, timeout=5).topics[topic]
    return {len(p.isrs) for p in meta.partitions.values()}
