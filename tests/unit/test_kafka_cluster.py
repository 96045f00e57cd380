"""The dev cluster's layout and rendering, and the Kafka adapter's configuration and errors.

Nothing here starts a JVM or connects to a broker.
"""

from __future__ import annotations

import gc
import socket
import stat
import weakref
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from monitor.core.errors import DevEnvironmentError, KafkaRequestError, KafkaUnavailableError
from monitor.core.records import PartitionInfo
from monitor.core.settings import ClusterConfig, DevKafkaConfig, Security
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.kafka_state import new_cluster_id
from monitor.kafka import KafkaAdmin, client_config
from tests.fixtures.dev_cluster import fake_jars, make_cluster, properties, write_state
from tests.fixtures.receivers import free_port

PASSWORD = "Sup3r-s3cret-pa55word"
KEY_PASSWORD = "key-Pa55-7d1c"


# -- layout ------------------------------------------------------------------------------------


def test_ports_follow_the_base_port_and_the_constructor_creates_nothing(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path, nodes=3, base_port=29092)

    layout = [(s.node_id, s.broker_port, s.controller_port, s.pid, s.running) for s in cluster.status()]

    assert layout == [
        (1, 29092, 29192, None, False),
        (2, 29093, 29193, None, False),
        (3, 29094, 29194, None, False),
    ]
    assert cluster.bootstrap_servers == "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    assert not cluster.exists
    assert not (tmp_path / "home").exists()
    assert not (tmp_path / "cache").exists()


def test_the_recorded_cluster_decides_the_layout(tmp_path: Path) -> None:
    write_state(tmp_path / "home", nodes=1, base_port=31000)
    cluster = make_cluster(tmp_path, nodes=3, base_port=29092)

    assert cluster.node_ids == [1]
    assert cluster.bootstrap_servers == "127.0.0.1:31000"
    assert cluster.controller_port(1) == 31100


def test_single_node_properties(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path, nodes=1, base_port=29092)

    props = properties(cluster.server_properties(1))

    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29192"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29192"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29092"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["log.dirs"] == str(tmp_path / "home" / "node-1" / "data")
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.retention.check.interval.ms"] == "5000"


@pytest.mark.parametrize(
    ("version", "share_timeout"), [("4.4.0", "10000"), ("4.1.2", "10000"), ("3.9.1", None), ("2.8.2", None)]
)
def test_a_killed_share_consumer_leaves_its_group_in_seconds_where_share_groups_exist(
    tmp_path: Path, version: str, share_timeout: str | None
) -> None:
    props = properties(DevKafkaCluster(
        DevKafkaConfig(nodes=1, version=version), tmp_path / "home", tmp_path / "cache"
    ).server_properties(1))  # fmt: skip

    assert props.get("group.share.session.timeout.ms") == share_timeout
    assert props.get("group.share.min.session.timeout.ms") == share_timeout


def test_three_node_properties(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path, nodes=3, base_port=29092)

    props = properties(cluster.server_properties(2))

    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29192,2@127.0.0.1:29193,3@127.0.0.1:29194"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29093,CONTROLLER://127.0.0.1:29193"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29093"
    assert props["log.dirs"] == str(tmp_path / "home" / "node-2" / "data")
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["transaction.state.log.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"


def test_java_command_sets_the_heap_and_the_node_files(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path, heap_mb=300)

    command = cluster.java_command(3)

    assert "-Xms300m" in command and "-Xmx300m" in command
    assert command[-2:] == ["kafka.Kafka", str(tmp_path / "home" / "node-3" / "server.properties")]
    assert f"-Dlog4j2.configurationFile={tmp_path / 'home' / 'node-3' / 'log4j2.properties'}" in command
    assert str(tmp_path / "home" / "node-3" / "server.log") in cluster.log4j2_properties(3)


@pytest.mark.parametrize(
    ("quick_start", "wanted", "unwanted"),
    [
        (False, ["-XX:+UseG1GC"], "-XX:TieredStopAtLevel=1"),
        (True, ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"], "-XX:+UseG1GC"),
    ],
)
def test_quick_start_runs_the_nodes_and_zookeeper_with_the_client_jit_and_serial_collector(
    tmp_path: Path, quick_start: bool, wanted: list[str], unwanted: str
) -> None:
    cluster = DevKafkaCluster(
        DevKafkaConfig(nodes=1, version="2.8.2", quick_start=quick_start),
        tmp_path / "home",
        tmp_path / "cache",
    )

    for command in (cluster.java_command(1), cluster.zookeeper.jvm_options if cluster.zookeeper else []):
        assert all(option in command for option in wanted), command
        assert unwanted not in command


def test_cluster_ids_are_url_safe_base64_of_16_bytes() -> None:
    ids = {new_cluster_id() for _ in range(500)}

    assert len(ids) == 500
    assert all(len(i) == 22 and "=" not in i and "+" not in i and "/" not in i for i in ids)
    assert not any(i.startswith("-") for i in ids)


# -- refusing to start -------------------------------------------------------------------------


def test_node_count_mismatch_asks_to_purge(tmp_path: Path) -> None:
    write_state(tmp_path / "home", nodes=1)
    cluster = make_cluster(tmp_path, nodes=3)

    with pytest.raises(DevEnvironmentError, match="formatted for 1 node") as caught:
        cluster.up()

    assert "kafka-health dev-cluster down --purge" in str(caught.value)
    with pytest.raises(DevEnvironmentError, match="down --purge"):
        make_cluster(tmp_path, nodes=1).up(nodes=3)


def test_version_mismatch_asks_to_purge(tmp_path: Path) -> None:
    write_state(tmp_path / "home", version="4.0.0")

    with pytest.raises(DevEnvironmentError, match=r"Kafka 4\.0\.0.*down --purge"):
        make_cluster(tmp_path).up()


def test_data_without_cluster_json_asks_to_purge(tmp_path: Path) -> None:
    data = tmp_path / "home" / "node-1" / "data"
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("version=1\n")

    with pytest.raises(DevEnvironmentError, match="down --purge"):
        make_cluster(tmp_path).up()


def test_only_one_or_three_nodes(tmp_path: Path) -> None:
    with pytest.raises(DevEnvironmentError, match="1 or 3"):
        make_cluster(tmp_path).up(nodes=2)


def test_a_home_that_is_a_file_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("")

    with pytest.raises(DevEnvironmentError, match="must be a directory"):
        make_cluster(tmp_path)


def test_a_busy_port_is_named(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = make_cluster(tmp_path, nodes=1, base_port=port)
        fake_jars(cluster)

        with pytest.raises(DevEnvironmentError, match=f"port {port} .*already in use"):
            cluster.up()


def test_start_node_needs_an_existing_cluster(tmp_path: Path) -> None:
    with pytest.raises(DevEnvironmentError, match="dev-cluster up"):
        make_cluster(tmp_path).start_node(1)
    with pytest.raises(DevEnvironmentError, match="no node 4"):
        make_cluster(tmp_path).stop_node(4)


def test_a_node_that_dies_on_start_shows_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_text(
        "#!/bin/sh\n"
        'case "$*" in *StorageTool*) exit 0 ;; esac\n'
        "echo 'Error: could not bind the listener (simulated)' >&2\n"
        "exit 1\n"
    )
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    cluster = make_cluster(tmp_path, nodes=1, base_port=free_port())
    fake_jars(cluster)

    with pytest.raises(DevEnvironmentError, match="node 1 exited while starting") as caught:
        cluster.up()

    assert "could not bind the listener (simulated)" in str(caught.value)
    assert [s.running for s in cluster.status()] == [False]


# -- jars ----------------------------------------------------------------------------------------


def test_missing_mvn_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    with pytest.raises(DevEnvironmentError, match="mvn"):
        make_cluster(tmp_path).ensure_jars()


def test_failing_mvn_shows_its_last_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\necho '[ERROR] Could not resolve org.apache.kafka:kafka_2.13:4.1.2'\nexit 1\n")
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    cluster = make_cluster(tmp_path)

    with pytest.raises(DevEnvironmentError, match="mvn failed") as caught:
        cluster.ensure_jars()

    assert "Could not resolve org.apache.kafka" in str(caught.value)
    assert not cluster.libs_dir.exists()


def test_fetched_jars_are_not_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    cluster = make_cluster(tmp_path)
    fake_jars(cluster)
    messages: list[str] = []

    assert cluster.ensure_jars(messages.append) == cluster.libs_dir
    assert messages == []


# -- client configuration and secrets ----------------------------------------------------------


def sasl_ssl_cluster() -> ClusterConfig:
    return ClusterConfig(
        name="prod",
        bootstrap_servers=["b1.example.com:9093", "b2.example.com:9093"],
        security=Security(
            protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username="monitor",
            sasl_password=PASSWORD,
            ssl_ca_location=Path("/etc/kafka/ca.pem"),
            ssl_key_password=KEY_PASSWORD,
            ssl_endpoint_identification=False,
        ),
        client_config={"socket.keepalive.enable": "true"},
    )


def test_client_config_for_sasl_ssl() -> None:
    config = client_config(sasl_ssl_cluster())

    assert dict(config) == {
        "bootstrap.servers": "b1.example.com:9093,b2.example.com:9093",
        "client.id": "kafka-health-prod",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "monitor",
        "sasl.password": PASSWORD,
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.key.password": KEY_PASSWORD,
        "ssl.endpoint.identification.algorithm": "none",
        "socket.keepalive.enable": "true",
    }


def test_client_config_for_plaintext_has_no_security_properties() -> None:
    cluster = ClusterConfig(name="local", bootstrap_servers=["127.0.0.1:9092"])

    config = client_config(cluster)

    assert dict(config) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "client.id": "kafka-health-local",
        "security.protocol": "PLAINTEXT",
    }


def test_passwords_never_appear_in_repr_or_str() -> None:
    cluster = sasl_ssl_cluster()
    config = client_config(cluster)
    admin = KafkaAdmin(cluster)

    for text in (repr(config), str(config), repr(cluster), str(cluster), repr(admin), str(admin)):
        assert PASSWORD not in text
        assert KEY_PASSWORD not in text
    assert "'sasl.password': '***'" in repr(config)


def test_passwords_are_scrubbed_from_error_messages() -> None:
    admin = KafkaAdmin(sasl_ssl_cluster())
    error = KafkaError(KafkaError._AUTHENTICATION, f"SASL authentication failed for password {PASSWORD}")

    with pytest.raises(KafkaRequestError) as caught, admin._call("describe the cluster"):
        raise KafkaException(error)

    assert PASSWORD not in str(caught.value)
    assert "SASL authentication failed" in str(caught.value)
    assert "'prod'" in str(caught.value)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (KafkaError._TRANSPORT, KafkaUnavailableError),
        (KafkaError._TIMED_OUT, KafkaUnavailableError),
        (KafkaError._ALL_BROKERS_DOWN, KafkaUnavailableError),
        (KafkaError.REQUEST_TIMED_OUT, KafkaUnavailableError),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaRequestError),
        (KafkaError.TOPIC_ALREADY_EXISTS, KafkaRequestError),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaRequestError),
        (KafkaError.INVALID_REPLICATION_FACTOR, KafkaRequestError),
    ],
)
def test_client_errors_become_named_errors(code: int, expected: type[Exception]) -> None:
    admin = KafkaAdmin(sasl_ssl_cluster())
    original = KafkaException(KafkaError(code))

    with pytest.raises(expected) as caught, admin._call("do something"):
        raise original

    assert caught.value.__cause__ is original
    assert "cannot do something on cluster 'prod'" in str(caught.value)


def test_a_future_that_times_out_is_unavailable() -> None:
    admin = KafkaAdmin(sasl_ssl_cluster())

    with pytest.raises(KafkaUnavailableError, match="no answer within 10s"), admin._call("list topics"):
        raise TimeoutError


def test_a_translated_error_leaves_no_reference_cycle() -> None:
    # Whatever the failed request's frames hold (a client among them) must go when the error is
    # dropped, not at some later garbage collection on whichever thread it happens to run.
    admin = KafkaAdmin(sasl_ssl_cluster())

    class Held:
        pass

    def request(held: Held) -> None:
        with admin._call("list topics"):
            raise TimeoutError

    gc.disable()
    try:
        held = Held()
        ref = weakref.ref(held)
        with pytest.raises(KafkaUnavailableError):
            request(held)
        del held
        assert ref() is None
    finally:
        gc.enable()


def test_the_admin_does_not_connect_before_start() -> None:
    admin = KafkaAdmin(sasl_ssl_cluster())

    with pytest.raises(RuntimeError, match="start"):
        admin.describe_cluster()


# -- shared records ------------------------------------------------------------------------------


def test_partition_health_properties() -> None:
    healthy = PartitionInfo(partition=0, leader=1, replicas=(1, 2, 3), isr=(3, 1, 2))
    one_lost = PartitionInfo(partition=1, leader=3, replicas=(2, 3, 1), isr=(3, 1))
    offline = PartitionInfo(partition=2, leader=None, replicas=(1, 2, 3), isr=())

    assert (healthy.replicas_lost, healthy.under_replicated, healthy.offline) == (0, False, False)
    assert healthy.preferred_leader == 1
    assert (one_lost.replicas_lost, one_lost.under_replicated, one_lost.offline) == (1, True, False)
    assert one_lost.preferred_leader == 2
    assert (offline.replicas_lost, offline.under_replicated, offline.offline) == (3, True, True)
    assert PartitionInfo(partition=3, leader=None, replicas=(), isr=()).preferred_leader is None
