"""What differs between the Apache Kafka versions the dev cluster runs.

- Metadata: KRaft (3.3 and later; every node is broker and controller, its storage formatted
  before the first start) or ZooKeeper (2.8: one ZooKeeper server beside the brokers, at
  `base_port + ZOOKEEPER_PORT_OFFSET`; a broker writes its own `meta.properties` when it first
  starts).
- Logging: Kafka 4 logs through log4j2 only; before 4.0 the broker also has log4j 1 calls (the
  binding its jars bring varies), so a node gets both configurations, writing the same file.

`kafka_mode(version)` is the one place that decides; nothing else in the dev cluster compares
version numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from monitor.core.errors import DevEnvironmentError

ZOOKEEPER_PORT_OFFSET: Final = 99
"""ZooKeeper's client port above the base port (below the controller ports, unused in that mode)."""
ZOOKEEPER_SESSION_MS: Final = 6000
"""A killed broker's registration lasts this long: short, so that it can be started again soon."""

SHARE_SESSION_MS: Final = 10_000
"""A share consumer that stops heartbeating leaves its share group after this long."""

Metadata = Literal["kraft", "zookeeper"]


@dataclass(frozen=True, slots=True)
class KafkaMode:
    """How the nodes of one Kafka version keep the cluster's metadata and log."""

    version: str
    metadata: Metadata
    log4j1: bool

    @property
    def zookeeper(self) -> bool:
        return self.metadata == "zookeeper"

    @property
    def formats_storage(self) -> bool:
        """Whether a node's storage is formatted (`kafka.tools.StorageTool`) before its first start."""
        return self.metadata == "kraft"

    def metadata_settings(
        self, node_id: int, controller_ports: Mapping[int, int], host: str, zookeeper_port: int
    ) -> dict[str, str]:
        """The server.properties entries of one node that name its role and its metadata quorum."""
        if self.zookeeper:
            return {
                "broker.id": str(node_id),
                "zookeeper.connect": f"{host}:{zookeeper_port}",
                "zookeeper.session.timeout.ms": str(ZOOKEEPER_SESSION_MS),
            }
        voters = ",".join(f"{n}@{host}:{port}" for n, port in sorted(controller_ports.items()))
        return {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
        }

    def format_features(self) -> list[str]:
        """Feature versions the storage is formatted with, beyond the version's defaults: share
        groups (KIP-932) are production-ready from Kafka 4.1, whose new clusters leave them off
        (`share.version` 0); from 4.2 on a new cluster has them on by itself."""
        major, minor = (int(part) for part in self.version.split(".")[:2])
        return ["--feature", "share.version=1"] if (major, minor) == (4, 1) else []

    def group_settings(self) -> dict[str, str]:
        """Share-group session timeouts (Kafka 4.x): a share consumer that is killed leaves its
        group after 10 s, not the default 45 s, so that a stopped group shows soon."""
        if self.log4j1:  # before Kafka 4: no share groups
            return {}
        timeout = str(SHARE_SESSION_MS)
        return {"group.share.min.session.timeout.ms": timeout, "group.share.session.timeout.ms": timeout}

    def controller_listener(self, host: str, port: int) -> tuple[str, str] | None:
        """(listener, protocol map entry) of the node's controller listener; None without one."""
        if self.zookeeper:
            return None
        return f"CONTROLLER://{host}:{port}", "CONTROLLER:PLAINTEXT"


_VERSION: Final = re.compile(r"(\d+)\.(\d+)\.(\d+)")
SUPPORTED_VERSIONS: Final = "2.8.x (ZooKeeper), 3.3.x to 3.9.x and 4.x (KRaft)"


def kafka_mode(version: str) -> KafkaMode:
    """The mode of an Apache Kafka `version`; DevEnvironmentError for one the dev cluster cannot run."""
    match = _VERSION.fullmatch(version)
    major, minor = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if (major, minor) == (2, 8):
        return KafkaMode(version, "zookeeper", log4j1=True)
    if major == 3 and minor >= 3:
        return KafkaMode(version, "kraft", log4j1=True)
    if major == 4:
        return KafkaMode(version, "kraft", log4j1=False)
    raise DevEnvironmentError(f"the dev cluster runs Apache Kafka {SUPPORTED_VERSIONS}, not {version!r}")


def log4j1_properties(log_file: str) -> str:
    """log4j 1 configuration writing to `log_file`, like the log4j2 one beside it."""
    return "\n".join(
        [
            "log4j.rootLogger=INFO, FILE",
            "log4j.appender.FILE=org.apache.log4j.FileAppender",
            f"log4j.appender.FILE.File={log_file}",
            "log4j.appender.FILE.Append=true",
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.FILE.layout.ConversionPattern=[%d] %p %m (%c)%n",
            "",
        ]
    )
