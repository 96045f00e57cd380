"""A local Apache Kafka cluster on 127.0.0.1, for the demo and the integration tests.

The broker jars come from Maven Central through `mvn` (once per version, into the cache); every
node runs as a detached JVM, so the cluster outlives the command that started it. What differs
between versions is `monitor.devtools.kafka_modes`: from 3.3 on (KRaft) every node is broker and
controller; 2.8 runs its brokers beside one ZooKeeper server (`monitor.devtools.zookeeper`,
at `base_port + 99`). Node `n` listens on `base_port + n - 1` (clients) and
`base_port + 100 + n - 1` (controller quorum, KRaft only); a cluster made with `security="sasl_ssl"` also on
`base_port + 200 + n - 1` (SASL_SSL: PLAIN, SCRAM-SHA-256 and -512, and OAUTHBEARER against a
local OpenID provider) and `base_port + 300 + n - 1` (TLS with client certificates), as
`monitor.devtools.kafka_security` describes.

State under `home/`:

    cluster.json                 {"cluster_id", "version", "nodes", "base_port", "security"}
    security/                    the local CA, key stores and secrets (`security="sasl_ssl"` only)
    node-<id>/server.properties  rendered at every `up`
    node-<id>/log4j2.properties  (and log4j.properties before Kafka 4)
    node-<id>/data/              log.dirs; `meta.properties` there means "formatted"
    node-<id>/server.log         the broker's own log
    node-<id>/console.log        the JVM's stdout and stderr
    node-<id>/pid
    zookeeper/                   the ZooKeeper server's (ZooKeeper mode only)
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from monitor.core.errors import DevEnvironmentError
from monitor.core.settings import DevKafkaConfig
from monitor.devtools import kafka_node
from monitor.devtools.kafka_modes import ZOOKEEPER_PORT_OFFSET, KafkaMode, kafka_mode, log4j1_properties
from monitor.devtools.kafka_node import HOST, NodeStatus
from monitor.devtools.kafka_security import SASL_SSL_PORT_OFFSET, SSL_PORT_OFFSET, DevSecurity
from monitor.devtools.kafka_state import (
    PURGE_HINT,
    ClusterState,
    check_recorded,
    new_cluster_id,
    read_state,
    write_state,
)
from monitor.devtools.mvn import fetch_runtime
from monitor.devtools.processes import (
    java_executable,
    launch_detached,
    port_in_use,
    process_alive,
    running_pid,
    send_signal,
    tail,
    wait_gone,
)
from monitor.devtools.zookeeper import DevZooKeeper

CONTROLLER_PORT_OFFSET: Final = 100
SUPPORTED_NODE_COUNTS: Final = (1, 3)
_JARS_MARKER: Final = ".complete"
_POLL_SECONDS: Final = 0.5

Report = Callable[[str], None]


def _quiet(_message: str) -> None:
    return None


class DevKafkaCluster:
    """Install, format, start and stop the local cluster. The constructor starts nothing.

    Every method blocks until its work is done (`up` and `start_node` until the brokers answer)
    and raises DevEnvironmentError with the fix, or the tail of the failing node's log.
    """

    def __init__(
        self,
        config: DevKafkaConfig,
        home: Path,
        cache: Path,
        *,
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
    ) -> None:
        if config.nodes not in SUPPORTED_NODE_COUNTS:
            raise DevEnvironmentError(f"dev_kafka.nodes must be 1 or 3, not {config.nodes}")
        if home.exists() and not home.is_dir():
            raise DevEnvironmentError(f"{home} is a file; the cluster home must be a directory")
        if cache.exists() and not cache.is_dir():
            raise DevEnvironmentError(f"{cache} is a file; the download cache must be a directory")
        if start_timeout <= 0 or stop_timeout <= 0:
            raise ValueError("start_timeout and stop_timeout must be positive")
        kafka_mode(config.version)  # one the dev cluster runs, or a clear error now
        self.config = config
        self.home = home
        self.cache = cache
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout

    def __repr__(self) -> str:
        return f"DevKafkaCluster(home={str(self.home)!r}, version={self.config.version!r})"

    # -- layout -----------------------------------------------------------------------------

    @property
    def version(self) -> str:
        """The Kafka version: the recorded cluster's, else the configuration's."""
        state = self._read_state()
        return state.version if state is not None else self.config.version

    @property
    def libs_dir(self) -> Path:
        """The jars of `version`."""
        return self._libs(self.version)

    def _libs(self, version: str) -> Path:
        return self.cache / f"kafka-{version}" / "libs"

    @property
    def secured(self) -> bool:
        """Whether the nodes have the SASL_SSL and mutual-TLS listeners (the recorded cluster's
        choice, else the configuration's)."""
        state = self._read_state()
        return (state.security if state is not None else self.config.security) == "sasl_ssl"

    @property
    def security(self) -> DevSecurity:
        """The CA, certificates and secrets of the secured listeners (made by `up`)."""
        return DevSecurity(self.home / "security")

    def _layout(self) -> tuple[int, int]:
        """(node count, base port): the recorded cluster's, else the configuration's."""
        state = self._read_state()
        if state is not None:
            return state.nodes, state.base_port
        return self.config.nodes, self.config.base_port

    @property
    def exists(self) -> bool:
        """Whether a cluster has been created in `home` (it may be stopped)."""
        return self._read_state() is not None

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self._layout()[0] + 1))

    def _check_node(self, node_id: int) -> None:
        ids = self.node_ids
        if node_id not in ids:
            raise DevEnvironmentError(
                f"there is no node {node_id}; this cluster has nodes {ids[0]}-{ids[-1]}"
            )

    @property
    def base_port(self) -> int:
        """The first client port (the recorded cluster's, else the configuration's)."""
        return self._layout()[1]

    def broker_port(self, node_id: int) -> int:
        return self._layout()[1] + node_id - 1

    def controller_port(self, node_id: int) -> int:
        return self._layout()[1] + CONTROLLER_PORT_OFFSET + node_id - 1

    def sasl_ssl_port(self, node_id: int) -> int:
        return self._layout()[1] + SASL_SSL_PORT_OFFSET + node_id - 1

    def ssl_port(self, node_id: int) -> int:
        return self._layout()[1] + SSL_PORT_OFFSET + node_id - 1

    @property
    def mode(self) -> KafkaMode:
        """What the cluster's version runs on (the recorded cluster's, else the configuration's)."""
        return kafka_mode(self.version)

    @property
    def zookeeper(self) -> DevZooKeeper | None:
        """The ZooKeeper server of a cluster in ZooKeeper mode; None in KRaft mode."""
        if not self.mode.zookeeper:
            return None
        port = self._layout()[1] + ZOOKEEPER_PORT_OFFSET
        java = self._java()
        return DevZooKeeper(self.home / "zookeeper", self.libs_dir, HOST, port, java, self.jit_options())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{self.broker_port(n)}" for n in self.node_ids)

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{self.sasl_ssl_port(n)}" for n in self.node_ids)

    @property
    def ssl_bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{self.ssl_port(n)}" for n in self.node_ids)

    def _ports(self, node_id: int) -> list[tuple[str, int]]:
        """(kind, port) of every listener of one node."""
        ports = [("broker", self.broker_port(node_id))]
        if not self.mode.zookeeper:
            ports.append(("controller", self.controller_port(node_id)))
        if self.secured:
            ports += [("SASL_SSL", self.sasl_ssl_port(node_id)), ("mutual-TLS", self.ssl_port(node_id))]
        return ports

    def node_dir(self, node_id: int) -> Path:
        return self.home / f"node-{node_id}"

    def server_log(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "server.log"

    def server_properties(self, node_id: int) -> str:
        """The broker configuration of one node (`kafka_node.server_properties`)."""
        return kafka_node.server_properties(self, node_id)

    def log4j2_properties(self, node_id: int) -> str:
        return kafka_node.log4j2_properties(self.server_log(node_id))

    def jit_options(self) -> list[str]:
        return kafka_node.jit_options(self.config.quick_start)

    def java_command(self, node_id: int) -> list[str]:
        """The command line that runs one node (`kafka_node.java_command`)."""
        return kafka_node.java_command(self, node_id, self._java())

    # -- state ------------------------------------------------------------------------------

    def _read_state(self) -> ClusterState | None:
        return read_state(self.home)

    def _formatted(self, node_id: int) -> bool:
        return (self.node_dir(node_id) / "data" / "meta.properties").exists()

    def _existing_node_ids(self) -> list[int]:
        if not self.home.is_dir():
            return []
        found = (re.fullmatch(r"node-(\d+)", p.name) for p in self.home.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    # -- processes --------------------------------------------------------------------------

    def _pid_file(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "pid"

    def _running_pid(self, node_id: int) -> int | None:
        """The pid of the node's JVM if it is alive (and is really that node, not a reused pid)."""
        properties = str(self.node_dir(node_id) / "server.properties")
        return running_pid(self._pid_file(node_id), "kafka.Kafka", properties)

    def _java(self) -> str:
        return java_executable(f"Kafka {self.version}")

    def _launch(self, node_id: int) -> int:
        node = self.node_dir(node_id)
        try:
            pid = launch_detached(self.java_command(node_id), node, node / "console.log")
        except DevEnvironmentError as exc:
            raise DevEnvironmentError(f"Kafka node {node_id}: {exc}") from exc
        self._pid_file(node_id).write_text(f"{pid}\n", encoding="utf-8")
        return pid

    def _signal_and_wait(self, pids: dict[int, int], timeout: float) -> None:
        """SIGTERM every node in `pids`, wait up to `timeout`, then SIGKILL the rest."""
        for pid in pids.values():
            send_signal(pid, signal.SIGTERM)
        if not wait_gone(pids.values(), timeout):
            for pid in pids.values():
                if process_alive(pid):
                    send_signal(pid, signal.SIGKILL)
            wait_gone(pids.values(), 10.0)
        for node_id in pids:
            self._pid_file(node_id).unlink(missing_ok=True)

    def _died_error(self, node_id: int, doing: str) -> DevEnvironmentError:
        node = self.node_dir(node_id)
        return DevEnvironmentError(
            f"Kafka node {node_id} exited while {doing}.\n"
            f"Last lines of {node / 'server.log'}:\n{tail(node / 'server.log')}\n"
            f"Last lines of {node / 'console.log'}:\n{tail(node / 'console.log', 10)}"
        )

    def _check_ports_free(self, node_ids: Iterable[int]) -> None:
        for node_id in node_ids:
            for kind, port in self._ports(node_id):
                if port_in_use(HOST, port):
                    raise DevEnvironmentError(
                        f"port {port} on {HOST} ({kind} port of node {node_id}) is already in use; "
                        "stop whatever listens there or choose another base port "
                        "(--base-port or dev_kafka.base_port)"
                    )

    # -- readiness --------------------------------------------------------------------------

    def _wait_ready(self, waiting: list[int], expected: set[int], doing: str) -> None:
        """Block until every node in `waiting` answers with metadata listing all `expected` brokers."""
        deadline = time.monotonic() + self.start_timeout
        pending = list(waiting)
        last_seen: dict[int, set[int] | None] = {}
        missing: dict[int, int] = {}
        while pending:
            for node_id in list(pending):
                # Gone on two polls in a row: a process caught between fork and exec (or a
                # launcher re-executing itself) can fail one look at its command line.
                if self._running_pid(node_id) is None:
                    missing[node_id] = missing.get(node_id, 0) + 1
                    if missing[node_id] >= 2:
                        raise self._died_error(node_id, doing)
                    continue
                missing.pop(node_id, None)
                last_seen[node_id] = seen = kafka_node.brokers_seen_by(node_id, self.broker_port(node_id))
                if seen is not None and expected <= seen:
                    pending.remove(node_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                node_id = pending[0]
                seen_text = sorted(last_seen.get(node_id) or []) or "no answer"
                raise DevEnvironmentError(
                    f"Kafka node {node_id} did not list brokers {sorted(expected)} within "
                    f"{self.start_timeout:g}s while {doing} (it gave: {seen_text}).\n"
                    f"Last lines of {self.server_log(node_id)}:\n{tail(self.server_log(node_id))}"
                )
            time.sleep(_POLL_SECONDS)

    # -- public operations ------------------------------------------------------------------

    def ensure_jars(self, report: Report = _quiet) -> Path:
        """Fetch the broker jars for `config.version` once; later calls return at once."""
        version = self.config.version
        libs = self._libs(version)
        if (libs / _JARS_MARKER).is_file():
            return libs
        report(f"fetching the Apache Kafka {version} broker jars with mvn into {libs} (first run only)")
        fetch_runtime(
            "kafka", libs, "kafka_2.13-*.jar", f"the Apache Kafka {version} broker jars",
            {"kafka.version": version},
        )  # fmt: skip
        report(f"fetched {sum(1 for _ in libs.glob('*.jar'))} jars")
        return libs

    def up(self, nodes: int | None = None, report: Report = _quiet) -> None:
        """Start the cluster (format it first if new) and wait until every broker answers.

        Idempotent: nodes already running are left alone.
        """
        wanted = self.config.nodes if nodes is None else nodes
        if wanted not in SUPPORTED_NODE_COUNTS:
            raise DevEnvironmentError(f"a dev cluster has 1 or 3 nodes, not {wanted}")
        state = self._check_existing(wanted)
        node_ids = list(range(1, wanted + 1))
        running = {n for n in node_ids if self._running_pid(n) is not None}
        if state is not None and len(running) == wanted:
            report(f"Kafka is already running ({wanted} node(s)): {self.bootstrap_servers}")
            return
        self.ensure_jars(report)
        self._java()
        # 1. Record the layout: ports follow the configuration unless some node is still up.
        base_port = state.base_port if state is not None and running else self.config.base_port
        cluster_id = state.cluster_id if state is not None else new_cluster_id()
        recorded = ClusterState(cluster_id, self.config.version, wanted, base_port, self.config.security)
        write_state(self.home, recorded)
        if self.secured:
            self.security.ensure()
            self.security.write_clusters_file(
                "local", self.sasl_ssl_bootstrap_servers.split(","), self.ssl_bootstrap_servers.split(",")
            )
        # 2. Render every node's configuration.
        to_start = [n for n in node_ids if n not in running]
        for node_id in to_start:
            node = self.node_dir(node_id)
            (node / "data").mkdir(parents=True, exist_ok=True)
            (node / "server.properties").write_text(self.server_properties(node_id), encoding="utf-8")
            (node / "log4j2.properties").write_text(self.log4j2_properties(node_id), encoding="utf-8")
            if self.mode.log4j1:
                log4j1 = log4j1_properties(str(self.server_log(node_id)))
                (node / "log4j.properties").write_text(log4j1, encoding="utf-8")
        # 3. Ports, then storage (or ZooKeeper), then processes; roll back what this call started.
        self._check_ports_free(to_start)
        if self.mode.formats_storage:
            self._format([n for n in to_start if not self._formatted(n)], cluster_id, report)
        zookeeper = self.zookeeper
        if zookeeper is not None:
            report(f"starting ZooKeeper on {HOST}:{zookeeper.port}")
            zookeeper.start(self.start_timeout)
        report(f"starting {len(to_start)} Kafka node(s) on {HOST}")
        started: dict[int, int] = {}
        try:
            for node_id in to_start:
                started[node_id] = self._launch(node_id)
            report("waiting for every broker to answer")
            self._wait_ready(node_ids, set(node_ids), "starting the cluster")
        except BaseException:
            self._signal_and_wait(started, 10.0)
            raise
        report(f"Kafka {self.config.version} is up: {self.bootstrap_servers}")

    def _check_existing(self, wanted: int) -> ClusterState | None:
        state = self._read_state()
        if state is None:
            if any(self._formatted(n) for n in self._existing_node_ids()):
                raise DevEnvironmentError(f"{self.home} holds Kafka data but no cluster.json; {PURGE_HINT}")
            return None
        check_recorded(state, self.home, wanted, self.config)
        return state

    def _format(self, node_ids: list[int], cluster_id: str, report: Report) -> None:
        if node_ids:
            report(f"formatting storage of node(s) {', '.join(map(str, node_ids))} (cluster id {cluster_id})")
            kafka_node.format_storage(self, node_ids, cluster_id, self._java())

    def down(self, purge: bool = False) -> None:
        """Stop every node (SIGTERM, then SIGKILL after the stop timeout); `purge` deletes the data."""
        pids = {n: pid for n in self._existing_node_ids() if (pid := self._running_pid(n)) is not None}
        self._signal_and_wait(pids, self.stop_timeout)
        zookeeper = self.zookeeper
        if zookeeper is not None:  # after the brokers: a broker's controlled shutdown needs it
            zookeeper.stop(self.stop_timeout)
        if purge:
            for node_id in self._existing_node_ids():
                shutil.rmtree(self.node_dir(node_id))
            shutil.rmtree(self.security.directory, ignore_errors=True)
            shutil.rmtree(self.home / "zookeeper", ignore_errors=True)
            (self.home / "cluster.json").unlink(missing_ok=True)
            if self.home.is_dir() and not any(self.home.iterdir()):
                self.home.rmdir()

    def status(self) -> list[NodeStatus]:
        result = []
        secured = self.secured
        for node_id in self.node_ids:
            pid = self._running_pid(node_id)
            sasl_ssl, ssl = (self.sasl_ssl_port(node_id), self.ssl_port(node_id)) if secured else (None, None)
            ports = (self.broker_port(node_id), self.controller_port(node_id))
            result.append(NodeStatus(node_id, *ports, pid, pid is not None, sasl_ssl, ssl))
        return result

    def stop_node(self, node_id: int) -> None:
        """Stop one node cleanly (SIGTERM: controlled shutdown), SIGKILL after the stop timeout."""
        self._check_node(node_id)
        pid = self._running_pid(node_id)
        if pid is not None:
            self._signal_and_wait({node_id: pid}, self.stop_timeout)

    def kill_node(self, node_id: int) -> None:
        """Kill one node with SIGKILL (a hard failure: no controlled shutdown)."""
        self._check_node(node_id)
        pid = self._running_pid(node_id)
        if pid is not None:
            send_signal(pid, signal.SIGKILL)
            wait_gone([pid], 10.0)
            self._pid_file(node_id).unlink(missing_ok=True)

    def start_node(self, node_id: int) -> None:
        """Start one stopped node of an existing cluster; wait until it is back in the metadata."""
        self._check_node(node_id)
        if self._read_state() is None or not self._formatted(node_id):
            raise DevEnvironmentError("the cluster has not been created; run `kafka-health dev-cluster up`")
        if self._running_pid(node_id) is not None:
            return
        self._check_ports_free([node_id])
        pid = self._launch(node_id)
        expected = {n for n in self.node_ids if self._running_pid(n) is not None} | {node_id}
        try:
            self._wait_ready([node_id], expected, f"starting node {node_id}")
        except BaseException:
            self._signal_and_wait({node_id: pid}, 10.0)
            raise
