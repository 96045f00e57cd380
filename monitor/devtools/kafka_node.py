"""One node of the local Kafka cluster (`monitor.devtools.kafka_cluster`): the files it runs with
(`server.properties`, `log4j2.properties`), its command line, the formatting of its storage, and
the probe that says whether it answers with the brokers it should list.

The functions read the cluster's layout (ports, mode, security, heap) and write nothing: the
cluster renders the files at every `up` and launches the command.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from monitor.core.errors import DevEnvironmentError, MonitorError
from monitor.core.settings import ClusterConfig, DevKafkaConfig
from monitor.devtools.kafka_modes import ZOOKEEPER_PORT_OFFSET, KafkaMode
from monitor.devtools.kafka_security import DevSecurity
from monitor.devtools.processes import TAIL_LINES, accepts_connections
from monitor.kafka import KafkaAdmin
from monitor.kafka.properties import scrub


class Layout(Protocol):
    """What a node's files and command line are made from: the cluster's layout
    (`monitor.devtools.kafka_cluster.DevKafkaCluster` is one)."""

    config: DevKafkaConfig

    @property
    def node_ids(self) -> list[int]: ...
    @property
    def base_port(self) -> int: ...
    @property
    def secured(self) -> bool: ...
    @property
    def security(self) -> DevSecurity: ...
    @property
    def mode(self) -> KafkaMode: ...
    @property
    def libs_dir(self) -> Path: ...
    def node_dir(self, node_id: int) -> Path: ...
    def broker_port(self, node_id: int) -> int: ...
    def controller_port(self, node_id: int) -> int: ...
    def sasl_ssl_port(self, node_id: int) -> int: ...
    def ssl_port(self, node_id: int) -> int: ...


HOST: Final = "127.0.0.1"
_PROBE_TIMEOUT_SECONDS: Final = 3.0


@dataclass(frozen=True, slots=True)
class NodeStatus:
    node_id: int
    broker_port: int
    controller_port: int
    pid: int | None
    running: bool
    sasl_ssl_port: int | None = None
    ssl_port: int | None = None


def server_properties(cluster: Layout, node_id: int) -> str:
    """The broker configuration of one node (combined broker + controller)."""
    nodes = len(cluster.node_ids)
    replication, min_isr = min(3, nodes), min(2, nodes)
    plaintext = f"PLAINTEXT://{HOST}:{cluster.broker_port(node_id)}"
    secured = f"SASL_SSL://{HOST}:{cluster.sasl_ssl_port(node_id)},SSL://{HOST}:{cluster.ssl_port(node_id)}"
    advertised = f"{plaintext},{secured}" if cluster.secured else plaintext
    listeners, protocols = advertised, "PLAINTEXT:PLAINTEXT"
    mode = cluster.mode
    controller = mode.controller_listener(HOST, cluster.controller_port(node_id))
    if controller is not None:
        listeners, protocols = f"{listeners},{controller[0]}", f"{protocols},{controller[1]}"
    if cluster.secured:
        protocols += ",SASL_SSL:SASL_SSL,SSL:SSL"
    quorum = {n: cluster.controller_port(n) for n in cluster.node_ids}
    zookeeper_port = cluster.base_port + ZOOKEEPER_PORT_OFFSET
    settings = {
        **mode.metadata_settings(node_id, quorum, HOST, zookeeper_port),
        **mode.group_settings(),
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(cluster.node_dir(node_id) / "data"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": str(replication),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min_isr),
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        # Fast retention for tests: check every 5 s, delete removed segments after 1 s.
        "log.retention.check.interval.ms": "5000",
        "log.segment.delete.delay.ms": "1000",
        "num.network.threads": "2",
        "num.io.threads": "4",
    }
    if cluster.secured:
        settings.update(cluster.security.broker_properties())
    lines = ["# Rendered by `kafka-health dev-cluster up`; changes are overwritten at the next up."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def log4j2_properties(log_file: Path) -> str:
    """A node's log4j2 configuration: everything at INFO into `log_file`."""
    return "\n".join(
        [
            "status = warn",
            "appender.file.type = File",
            "appender.file.name = FILE",
            f"appender.file.fileName = {log_file}",
            "appender.file.append = true",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = FILE",
            "",
        ]
    )


def jit_options(quick_start: bool) -> list[str]:
    """The collector and compiler options of every JVM the cluster starts (`quick_start`: the
    serial collector and the first compiler tier only, which start a small node sooner)."""
    if quick_start:
        return ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    return ["-XX:+UseG1GC"]


def java_command(cluster: Layout, node_id: int, java: str) -> list[str]:
    """The command line that runs one node (heap from `config.heap_mb`)."""
    node = cluster.node_dir(node_id)
    heap = cluster.config.heap_mb
    log4j1 = [f"-Dlog4j.configuration=file:{node / 'log4j.properties'}"] if cluster.mode.log4j1 else []
    return [
        java,
        f"-Xms{heap}m",
        f"-Xmx{heap}m",
        *jit_options(cluster.config.quick_start),
        "-Djava.awt.headless=true",
        *(cluster.security.jvm_options() if cluster.secured else []),
        f"-Dlog4j2.configurationFile={node / 'log4j2.properties'}",
        *log4j1,
        "-cp",
        f"{cluster.libs_dir}/*",
        "kafka.Kafka",
        str(node / "server.properties"),
    ]


def format_storage(cluster: Layout, node_ids: list[int], cluster_id: str, java: str) -> None:
    """Format the storage of `node_ids` at once (KRaft), with the SCRAM user of a secured cluster;
    a failure names the node and the tail of the tool's output, its secrets scrubbed."""

    def format_one(node_id: int) -> subprocess.CompletedProcess[str]:
        node = cluster.node_dir(node_id)
        command = [
            java,
            *jit_options(cluster.config.quick_start),
            f"-Dlog4j2.configurationFile={node / 'log4j2.properties'}",
            "-cp", f"{cluster.libs_dir}/*", "kafka.tools.StorageTool", "format",
            "-t", cluster_id, "-c", str(node / "server.properties"),
        ]  # fmt: skip
        command += cluster.mode.format_features()
        if cluster.secured:  # the SCRAM user, written into the metadata with the storage
            command += cluster.security.format_arguments()
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    with ThreadPoolExecutor(max_workers=len(node_ids)) as pool:
        results = dict(zip(node_ids, pool.map(format_one, node_ids), strict=True))
    for node_id, result in results.items():
        if result.returncode != 0:
            text = scrub(result.stdout + result.stderr, _secret_values(cluster))
            output = text.strip().splitlines()[-TAIL_LINES:]
            raise DevEnvironmentError(
                f"formatting the storage of Kafka node {node_id} failed (exit code "
                f"{result.returncode}):\n" + ("\n".join(output) or "(no output)")
            )


def _secret_values(cluster: Layout) -> list[str]:
    if not cluster.secured:
        return []
    secrets = cluster.security.secrets()
    return [secrets.scram_password.get_secret_value(), secrets.key_passphrase.get_secret_value()]


def brokers_seen_by(node_id: int, port: int) -> set[int] | None:
    """Broker ids in the metadata a client bootstrapped from one node's port gets; None if no answer."""
    if not accepts_connections(HOST, port):
        return None  # not listening (yet, or any more): no client's timeout to wait out
    probe = ClusterConfig(
        name=f"dev-node-{node_id}",
        bootstrap_servers=[f"{HOST}:{port}"],
        request_timeout_seconds=_PROBE_TIMEOUT_SECONDS,
    )
    try:
        with KafkaAdmin(probe) as admin:
            return set(admin.describe_cluster().broker_ids)
    except MonitorError:
        return None
