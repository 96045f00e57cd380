"""What the local Kafka cluster records about itself in `home/cluster.json`: its id, version,
node count, base port and security, fixed when its storage is formatted (the base port at each
`up`). Read by every `monitor.devtools.kafka_cluster` operation, written by `up`.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from monitor.core.errors import DevEnvironmentError
from monitor.core.settings import DevKafkaConfig

PURGE_HINT: Final = "run `kafka-health dev-cluster down --purge` to delete it and start afresh"
STATE_FILE: Final = "cluster.json"


@dataclass(frozen=True, slots=True)
class ClusterState:
    """What `cluster.json` records: fixed when the storage is formatted (base_port at each up)."""

    cluster_id: str
    version: str
    nodes: int
    base_port: int
    security: str = "plaintext"  # absent from the files of clusters made before it existed


def new_cluster_id() -> str:
    """A KRaft cluster id: url-safe base64 of 16 random bytes without padding.

    Like Kafka's own `Uuid.randomUuid()`, never one starting with "-": command-line tools would
    read it as an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def read_state(home: Path) -> ClusterState | None:
    """The recorded state of the cluster in `home`; None when there is none."""
    path = home / STATE_FILE
    if not path.exists():
        return None
    try:
        return ClusterState(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise DevEnvironmentError(f"{path} is unreadable ({exc}); {PURGE_HINT}") from exc


def write_state(home: Path, state: ClusterState) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / STATE_FILE).write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")


def check_recorded(state: ClusterState, home: Path, wanted: int, config: DevKafkaConfig) -> None:
    """Refuse to start the recorded cluster with another node count, version or security than it
    was made with, naming how to start it or to start afresh."""
    if state.nodes != wanted:
        raise DevEnvironmentError(
            f"the cluster in {home} was formatted for {state.nodes} node(s), not {wanted}; "
            f"start it with --nodes {state.nodes}, or {PURGE_HINT}"
        )
    if state.version != config.version:
        raise DevEnvironmentError(
            f"the cluster in {home} was formatted by Kafka {state.version}, not "
            f"{config.version}; set dev_kafka.version to {state.version}, or {PURGE_HINT}"
        )
    if state.security != config.security:
        raise DevEnvironmentError(
            f"the cluster in {home} was made with security {state.security}, not "
            f"{config.security}; start it with --security {state.security}, or {PURGE_HINT}"
        )
