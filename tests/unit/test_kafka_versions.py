"""The dev cluster at each Kafka version it runs: KRaft from 3.3, ZooKeeper for 2.8, and how a
node of each logs. Nothing here starts a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.core.errors import DevEnvironmentError
from monitor.core.settings import DevKafkaConfig, environment_overrides
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.kafka_modes import kafka_mode
from monitor.devtools.zookeeper import DevZooKeeper
from tests.fixtures.dev_cluster import properties, write_state

RUN = [
    ("2.8.2", "zookeeper", True),
    ("2.8.0", "zookeeper", True),
    ("3.3.2", "kraft", True),
    ("3.6.2", "kraft", True),
    ("3.9.1", "kraft", True),
    ("4.0.0", "kraft", False),
    ("4.1.2", "kraft", False),
    ("4.4.0", "kraft", False),
]
REFUSED = ["2.7.1", "3.0.0", "3.2.3", "5.0.0", "4.1", "4.1.2-rc1", "latest", "", "4.1.2 ", "../4.1.2"]


def make(tmp_path: Path, version: str, nodes: int = 3, base_port: int = 29092) -> DevKafkaCluster:
    config = DevKafkaConfig(version=version, nodes=nodes, base_port=base_port)  # type: ignore[arg-type]
    return DevKafkaCluster(config, tmp_path / "home", tmp_path / "cache")


@pytest.mark.parametrize(("version", "metadata", "log4j1"), RUN)
def test_each_supported_version_has_its_mode_and_is_accepted_by_the_settings(
    version: str, metadata: str, log4j1: bool
) -> None:
    mode = kafka_mode(version)

    assert (mode.metadata, mode.log4j1) == (metadata, log4j1)
    assert mode.formats_storage is (metadata == "kraft")
    assert DevKafkaConfig(version=version).version == version


@pytest.mark.parametrize("version", REFUSED)
def test_other_versions_are_refused_by_the_settings_and_the_cluster(version: str) -> None:
    with pytest.raises(DevEnvironmentError, match=r"2\.8\.x \(ZooKeeper\), 3\.3\.x to 3\.9\.x and 4\.x"):
        kafka_mode(version)
    with pytest.raises(ValidationError, match="version"):
        DevKafkaConfig(version=version)


def test_a_zookeeper_node_registers_in_zookeeper_and_has_no_controller(tmp_path: Path) -> None:
    cluster = make(tmp_path, "2.8.2", nodes=3, base_port=29092)

    props = properties(cluster.server_properties(2))

    assert props["broker.id"] == "2"
    assert props["zookeeper.connect"] == "127.0.0.1:29191"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29093"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT"
    kraft_only = {"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"}
    assert not kraft_only & set(props)
    assert props["offsets.topic.replication.factor"] == "3"
    zookeeper = cluster.zookeeper
    assert zookeeper is not None and zookeeper.port == 29191
    assert zookeeper.libs_dir == tmp_path / "cache" / "kafka-2.8.2" / "libs"


def test_a_kraft_cluster_before_4_has_no_zookeeper_and_logs_through_both_log4j(tmp_path: Path) -> None:
    cluster = make(tmp_path, "3.9.1", nodes=1)

    props = properties(cluster.server_properties(1))
    command = cluster.java_command(1)

    assert cluster.zookeeper is None
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29192"
    assert "zookeeper.connect" not in props
    log4j1 = tmp_path / "home" / "node-1" / "log4j.properties"
    assert f"-Dlog4j.configuration=file:{log4j1}" in command
    assert not any("log4j.configuration=" in arg for arg in make(tmp_path / "4", "4.4.0").java_command(1))


def test_the_recorded_version_decides_jars_and_mode_for_later_commands(tmp_path: Path) -> None:
    write_state(tmp_path / "home", version="2.8.2")
    cluster = make(tmp_path, "4.1.2")

    assert cluster.version == "2.8.2"
    assert cluster.libs_dir == tmp_path / "cache" / "kafka-2.8.2" / "libs"
    assert cluster.zookeeper is not None
    with pytest.raises(DevEnvironmentError, match=r"formatted by Kafka 2\.8\.2.*down --purge"):
        cluster.up()


def test_zookeeper_listens_on_loopback_with_a_short_tick(tmp_path: Path) -> None:
    server = DevZooKeeper(tmp_path / "zk", tmp_path / "libs", "127.0.0.1", 29191, "java")

    config = properties(server.config())

    assert config["clientPortAddress"] == "127.0.0.1"
    assert config["clientPort"] == "29191"
    assert config["dataDir"] == str(tmp_path / "zk" / "data")
    assert int(config["tickTime"]) <= 1000
    assert config["admin.enableServer"] == "false"
    assert server.pid() is None


@pytest.mark.parametrize(
    "variable", ["KAFKA_HEALTH_TEST_KAFKA_VERSION", "KAFKA_HEALTH_TEST_SOAK_PG_PORT", "KAFKA_HEALTH_TEST_X"]
)
def test_the_test_suites_variables_are_not_settings(variable: str) -> None:
    merged = environment_overrides({}, {variable: "2.8.2", "KAFKA_HEALTH_LOG_LEVEL": "DEBUG"})

    assert merged == {"log_level": "DEBUG"}
