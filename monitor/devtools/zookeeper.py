"""The ZooKeeper server of a dev cluster in ZooKeeper mode (Kafka 2.8): one standalone server on
127.0.0.1, run from the jars Kafka itself depends on (org.apache.zookeeper from Maven Central),
as a detached JVM like the brokers.

State under `<cluster home>/zookeeper/`: `zoo.cfg` (rendered at every start), `data/`,
`console.log` (its log), `pid`.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.processes import (
    launch_detached,
    port_in_use,
    running_pid,
    send_signal,
    tail,
    wait_gone,
)

MAIN_CLASS: Final = "org.apache.zookeeper.server.ZooKeeperServerMain"
_POLL_SECONDS: Final = 0.2


class DevZooKeeper:
    """Start and stop the one ZooKeeper server of a dev cluster; the constructor starts nothing."""

    def __init__(
        self,
        directory: Path,
        libs_dir: Path,
        host: str,
        port: int,
        java: str,
        jvm_options: Sequence[str] = (),
    ) -> None:
        self.directory = directory
        self.libs_dir = libs_dir
        self.host = host
        self.port = port
        self.java = java
        self.jvm_options = list(jvm_options)

    def __repr__(self) -> str:
        return f"DevZooKeeper({self.host}:{self.port}, {str(self.directory)!r})"

    @property
    def config_file(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        return self.directory / "console.log"

    @property
    def _pid_file(self) -> Path:
        return self.directory / "pid"

    def config(self) -> str:
        """zoo.cfg: a short tick, so that a killed broker's session ends within seconds."""
        return "\n".join(
            [
                "# Rendered by `kafka-health dev-cluster up`; changes are overwritten at the next up.",
                f"dataDir={self.directory / 'data'}",
                f"clientPortAddress={self.host}",
                f"clientPort={self.port}",
                "tickTime=500",
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "",
            ]
        )

    def pid(self) -> int | None:
        return running_pid(self._pid_file, MAIN_CLASS, str(self.config_file))

    def start(self, timeout: float) -> None:
        """Start the server unless it runs, and wait until it accepts connections."""
        if self.pid() is not None:
            return
        if port_in_use(self.host, self.port):
            raise DevEnvironmentError(
                f"port {self.port} on {self.host} (ZooKeeper's) is already in use; stop whatever "
                "listens there or choose another base port (--base-port or dev_kafka.base_port)"
            )
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(self.config(), encoding="utf-8")
        command = [self.java, "-Xmx128m", *self.jvm_options, "-cp", f"{self.libs_dir}/*", MAIN_CLASS]
        command.append(str(self.config_file))
        pid = launch_detached(command, self.directory, self.log_file)
        self._pid_file.write_text(f"{pid}\n", encoding="utf-8")
        deadline = time.monotonic() + timeout
        while not port_in_use(self.host, self.port):
            if self.pid() is None or time.monotonic() > deadline:
                self.stop(5.0)
                raise DevEnvironmentError(
                    f"ZooKeeper did not start on {self.host}:{self.port} within {timeout:g}s.\n"
                    f"Last lines of {self.log_file}:\n{tail(self.log_file)}"
                )
            time.sleep(_POLL_SECONDS)

    def stop(self, timeout: float) -> None:
        """SIGTERM, then SIGKILL after `timeout`."""
        pid = self.pid()
        if pid is not None:
            send_signal(pid, signal.SIGTERM)
            if not wait_gone([pid], timeout):
                send_signal(pid, signal.SIGKILL)
                wait_gone([pid], 10.0)
        self._pid_file.unlink(missing_ok=True)
