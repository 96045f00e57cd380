"""The dev cluster and `monitor.kafka.KafkaAdmin` against a real 3-node Kafka."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.records import TopicInfo
from monitor.core.settings import ClusterConfig
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.kafka import KafkaAdmin
from tests.fixtures.kafka import KafkaTestHelper


@pytest.fixture
def admin(kafka: KafkaTestHelper) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(kafka.cluster_config(request_timeout_seconds=10)) as client:
        yield client


def describe_one(admin: KafkaAdmin, topic: str) -> TopicInfo:
    (info,) = admin.describe_topics([topic])
    return info


def node_states(output: str) -> dict[int, str]:
    """Node id -> "running"/"stopped" from the rows of `dev-cluster status`."""
    states = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│") if c.strip()]
        if len(cells) == 5 and cells[0].isdigit():
            states[int(cells[0])] = cells[4]
    return states


def test_the_cluster_lists_every_broker(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    info = admin.describe_cluster()

    assert info.broker_ids == kafka.broker_ids == [1, 2, 3]
    assert info.cluster_id
    assert info.controller_id in kafka.broker_ids
    assert {(b.host, b.port) for b in info.brokers} == {
        ("127.0.0.1", int(s.rsplit(":", 1)[1])) for s in kafka.bootstrap_servers.split(",")
    }


def test_isr_shrinks_when_a_broker_stops_and_recovers_when_it_returns(
    admin: KafkaAdmin, kafka: KafkaTestHelper
) -> None:
    topic = kafka.create_topic(partitions=3, replication_factor=3)
    kafka.produce(topic, [b"before-1", b"before-2"])
    before = describe_one(admin, topic)
    assert [len(p.isr) for p in before.partitions] == [3, 3, 3]
    assert not any(p.under_replicated for p in before.partitions)
    victim = 2

    kafka.stop_broker(victim)

    def shrunk() -> TopicInfo | None:
        info = describe_one(admin, topic)
        return info if all(victim not in p.isr for p in info.partitions) else None

    during = kafka.wait_for(shrunk, 60, f"broker {victim} to leave the ISR", ignore=(KafkaUnavailableError,))
    for partition in during.partitions:
        assert len(partition.replicas) == 3
        assert sorted(partition.isr) == [1, 3]
        assert partition.replicas_lost == 1
        assert partition.under_replicated
        assert not partition.offline
        assert partition.leader in (1, 3)
    kafka.produce(topic, [b"during"], partition=1)

    kafka.start_broker(victim)

    def recovered() -> TopicInfo | None:
        info = describe_one(admin, topic)
        return info if all(len(p.isr) == 3 for p in info.partitions) else None

    after = kafka.wait_for(recovered, 90, "the ISR to grow back to 3", ignore=(KafkaUnavailableError,))
    assert not any(p.under_replicated for p in after.partitions)


def test_status_shows_a_stopped_node(kafka_cluster: DevKafkaCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI works on var_dir()/kafka; point it at the test cluster's home.
    monkeypatch.setenv("KAFKA_HEALTH_VAR", str(kafka_cluster.home.parent))
    runner = CliRunner()

    stopped = runner.invoke(app, ["dev-cluster", "stop-node", "3"])
    status = runner.invoke(app, ["dev-cluster", "status"])

    assert stopped.exit_code == 0, stopped.output
    assert status.exit_code == 0, status.output
    assert node_states(status.output) == {1: "running", 2: "running", 3: "stopped"}
    assert [n.running for n in kafka_cluster.status()] == [True, True, False]

    started = runner.invoke(app, ["dev-cluster", "start-node", "3"])
    status = runner.invoke(app, ["dev-cluster", "status"])

    assert started.exit_code == 0, started.output
    assert node_states(status.output) == {1: "running", 2: "running", 3: "running"}


def test_a_killed_broker_drops_out_of_the_metadata(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    kafka.kill_broker(3)

    kafka.wait_for(
        lambda: admin.describe_cluster().broker_ids == [1, 2],
        60,
        "the controller to fence the killed broker",
        ignore=(KafkaUnavailableError,),
    )
    # The autouse guard starts broker 3 again after this test.


def test_admin_requests_through_the_adapter(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    name = f"adapter-{time.time_ns()}"

    admin.create_topic(name, partitions=2, replication_factor=3, configs={"retention.ms": "60000"})

    def led() -> TopicInfo | None:
        # Metadata reaches every broker a moment after the controller created the topic.
        info = describe_one(admin, name)
        return info if info.partitions and not any(p.offline for p in info.partitions) else None

    info = kafka.wait_for(led, 30, "leaders for the new topic", ignore=(KafkaRequestError,))
    assert [p.partition for p in info.partitions] == [0, 1]
    assert all(len(p.replicas) == 3 and p.leader in p.replicas for p in info.partitions)
    assert not info.is_internal
    kafka.wait_for(
        lambda: name in admin.list_topic_names(include_internal=False), 30, "the topic in the list"
    )


def test_internal_topics_are_listed_only_on_request(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic()
    kafka.produce(topic, [b"x"])
    kafka.consume_and_commit("internal-topics-group", topic, 1)  # creates __consumer_offsets

    kafka.wait_for(
        lambda: "__consumer_offsets" in admin.list_topic_names(include_internal=True),
        30,
        "__consumer_offsets in the list",
    )
    assert "__consumer_offsets" not in admin.list_topic_names(include_internal=False)
    (offsets_topic,) = admin.describe_topics(["__consumer_offsets"])
    assert offsets_topic.is_internal


def test_refused_requests_raise_request_errors(admin: KafkaAdmin, kafka: KafkaTestHelper) -> None:
    existing = kafka.create_topic()

    with pytest.raises(KafkaRequestError, match="no-such-topic"):
        admin.describe_topics(["no-such-topic"])
    with pytest.raises(KafkaRequestError, match="already exists"):
        admin.create_topic(existing, partitions=1, replication_factor=1)
    with pytest.raises(KafkaRequestError, match=r"(?i)replication factor"):
        admin.create_topic(f"too-many-replicas-{time.time_ns()}", partitions=1, replication_factor=5)


def test_nothing_listening_raises_unavailable_within_the_timeout() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cluster = ClusterConfig(
        name="nowhere", bootstrap_servers=[f"127.0.0.1:{port}"], request_timeout_seconds=2
    )

    with KafkaAdmin(cluster) as admin:
        for request in (
            admin.describe_cluster,
            lambda: admin.list_topic_names(include_internal=False),
            lambda: admin.describe_topics(["any"]),
        ):
            started = time.monotonic()
            with pytest.raises(KafkaUnavailableError, match=f"127.0.0.1:{port}"):
                request()
            assert time.monotonic() - started < 2 + 3


def test_helpers_produce_consume_and_commit(kafka: KafkaTestHelper) -> None:
    topic = kafka.create_topic(partitions=2, replication_factor=3, config={"retention.ms": "3600000"})
    now_ms = int(time.time() * 1000)

    offsets = kafka.produce(
        topic, [b"a", b"b", b"c"], partition=1, timestamps_ms=[now_ms - 3000, now_ms - 2000, now_ms]
    )

    assert offsets == [0, 1, 2]
    assert kafka.consume_and_commit("helpers-group", topic, 2, partition=1) == 2
    assert kafka.committed("helpers-group", topic, 1) == 2
    assert kafka.consume_and_commit("helpers-group", topic, 1, partition=1) == 3
    kafka.commit("helpers-group", topic, 1, 1)
    assert kafka.committed("helpers-group", topic, 1) == 1
    assert kafka.committed("helpers-group", topic, 0) is None
