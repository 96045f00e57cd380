"""A local Spark standalone cluster on 127.0.0.1: one master and one or more workers, run from
the installed PySpark (its `bin/spark-class`), so the evaluation job can be tried beyond
`local[*]` (`spark.master: spark://127.0.0.1:17077`, or spark-submit against it) without a real
cluster.

Ports come from one base port: the master listens on `base_port`, its web UI on `base_port + 1`;
worker k (from 0) on `base_port + 2 + 2k` and its web UI on the port after. The first worker's
files are named `worker`, the others `worker2`, `worker3` ... Each JVM runs detached in a session
of its own, so the cluster outlives the command that started it and a stop reaches the executors
a worker launched (they share the worker's process group).

State under `home/`:

    cluster.json           {"base_port", "worker_cores", "worker_memory", "workers"}, written at `up`
    spark-defaults.conf    the daemons' properties file (it also marks their command lines)
    master.log, worker.log each JVM's stdout and stderr (worker2.log ... for the other workers)
    master.pid, worker.pid "<pid> <process group>"
    work/                  the workers' work dir: each executor's stdout and stderr
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.processes import java_executable, port_in_use, process_alive, tail, wait_gone

HOST: Final = "127.0.0.1"
DEFAULT_BASE_PORT: Final = 17077
MASTER_CLASS: Final = "org.apache.spark.deploy.master.Master"
WORKER_CLASS: Final = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY: Final = "256m"
"""Heap of the master and worker JVMs themselves (executors get `spark.executor.memory`)."""
DRIVER_CONF: Final = {"spark.driver.host": HOST, "spark.driver.bindAddress": HOST}
"""What a driver on this machine needs so the executors can reach it on 127.0.0.1."""
_POLL_SECONDS: Final = 0.5
MAX_WORKERS: Final = 16

Role = str
"""A daemon's name: "master", "worker" (the first worker), "worker2", "worker3" ..."""
Report = Callable[[str], None]


def _quiet(_message: str) -> None:
    return None


def spark_home() -> Path:
    """The Spark distribution to run: `$SPARK_HOME`, else the one inside the PySpark package.

    Raises DevEnvironmentError when neither has `bin/spark-class`.
    """
    explicit = os.environ.get("SPARK_HOME")
    candidates = [Path(explicit)] if explicit else []
    try:
        import pyspark

        candidates.append(Path(pyspark.__file__).resolve().parent)
    except ImportError:
        pass
    for home in candidates:
        if (home / "bin" / "spark-class").is_file():
            return home
    raise DevEnvironmentError(
        "no Spark distribution found: neither $SPARK_HOME nor the installed pyspark package has "
        "bin/spark-class; install the project's dependencies (pip install -e .) or set SPARK_HOME"
    )


@dataclass(frozen=True, slots=True)
class _State:
    base_port: int
    worker_cores: int
    worker_memory: str
    workers: int = 1  # absent from a cluster.json written before there could be more than one

    @property
    def roles(self) -> list[Role]:
        return ["master", *(worker_role(k) for k in range(self.workers))]


def worker_role(index: int) -> Role:
    """The name of worker `index` (from 0): its pid, log and `status` row."""
    return "worker" if index == 0 else f"worker{index + 1}"


def _worker_index(role: Role) -> int:
    return 0 if role == "worker" else int(role.removeprefix("worker")) - 1


@dataclass(frozen=True, slots=True)
class ProcessStatus:
    role: Role
    port: int
    webui_port: int
    pid: int | None

    @property
    def running(self) -> bool:
        return self.pid is not None


@dataclass(frozen=True, slots=True)
class Worker:
    """A worker as the master's web UI lists it."""

    worker_id: str
    host: str
    port: int
    state: str
    cores: int
    memory_mb: int


class DevSparkCluster:
    """Start, inspect and stop the local standalone cluster. The constructor starts nothing.

    `up` blocks until the worker is registered with the master; `down` until both JVMs (and the
    executors) are gone. Both raise DevEnvironmentError naming the fix, or with the log tail of
    the daemon that failed.
    """

    def __init__(
        self,
        home: Path,
        *,
        base_port: int = DEFAULT_BASE_PORT,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        workers: int = 1,
        start_timeout: float = 120.0,
        stop_timeout: float = 20.0,
    ) -> None:
        if not 1 <= workers <= MAX_WORKERS:
            raise DevEnvironmentError(f"the cluster takes 1 to {MAX_WORKERS} workers, not {workers}")
        highest = 65534 - 2 * workers
        if not 1024 <= base_port <= highest:
            raise DevEnvironmentError(
                f"the base port must be within 1024-{highest} ({workers} worker(s) take the "
                f"{1 + 2 * workers} ports after it), not {base_port}"
            )
        if worker_cores < 1:
            raise DevEnvironmentError(f"the worker needs at least one core, not {worker_cores}")
        if home.exists() and not home.is_dir():
            raise DevEnvironmentError(f"{home} is a file; the Spark cluster home must be a directory")
        if start_timeout <= 0 or stop_timeout <= 0:
            raise ValueError("start_timeout and stop_timeout must be positive")
        self.home = home
        self._requested = _State(base_port, worker_cores, worker_memory, workers)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout

    def __repr__(self) -> str:
        return f"DevSparkCluster(home={str(self.home)!r}, master_url={self.master_url!r})"

    # -- layout -----------------------------------------------------------------------------

    @property
    def _state(self) -> _State:
        """The running cluster's layout (recorded at `up`) while one runs, else the requested one."""
        path = self.home / "cluster.json"
        if path.exists() and any(self._running_pid(role) for role in self._requested_and_recorded_roles()):
            try:
                return _State(**json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as exc:
                raise DevEnvironmentError(
                    f"{path} is unreadable ({exc}); stop the cluster (`kafka-health dev-spark down`) "
                    "and start it again"
                ) from exc
        return self._requested

    def _requested_and_recorded_roles(self) -> list[Role]:
        """Every daemon that may run: those requested, and the workers whose pid files are left."""
        roles = self._requested.roles
        found = sorted(self.home.glob("worker*.pid")) if self.home.is_dir() else []
        return roles + [p.stem for p in found if p.stem not in roles and _is_worker_role(p.stem)]

    @property
    def roles(self) -> list[Role]:
        """The master and the workers of the running cluster (else of the requested one)."""
        return self._state.roles

    def port(self, role: Role) -> int:
        base = self._state.base_port
        return base if role == "master" else base + 2 + 2 * _worker_index(role)

    def webui_port(self, role: Role) -> int:
        return self.port(role) + 1

    @property
    def master_url(self) -> str:
        """What `spark.master` (or spark-submit's --master) names to run on this cluster."""
        return f"spark://{HOST}:{self.port('master')}"

    @property
    def web_url(self) -> str:
        """The master's web UI (`/json/` is its state as JSON)."""
        return f"http://{HOST}:{self.webui_port('master')}"

    def log_file(self, role: Role) -> Path:
        return self.home / f"{role}.log"

    @property
    def work_dir(self) -> Path:
        return self.home / "work"

    def environment(self) -> dict[str, str]:
        """The environment of the daemons and of a spark-submit against them: Spark's home, the
        loopback address, and this interpreter for every Python process (driver and executors)."""
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP=HOST,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        )
        return env

    def spark_submit(self) -> Path:
        """The spark-submit of the Spark distribution the cluster runs."""
        return spark_home() / "bin" / "spark-submit"

    def command(self, role: Role) -> list[str]:
        """The command line of one daemon."""
        state = self._state
        spark_class = str(spark_home() / "bin" / "spark-class")
        common = ["--host", HOST, "--port", str(self.port(role)), "--webui-port", str(self.webui_port(role))]
        properties = ["--properties-file", str(self.home / "spark-defaults.conf")]
        if role == "master":
            return [spark_class, MASTER_CLASS, *common, *properties]
        return [
            spark_class, WORKER_CLASS, self.master_url, *common, *properties,
            "--cores", str(state.worker_cores), "--memory", state.worker_memory,
            "--work-dir", str(self.work_dir),
        ]  # fmt: skip

    # -- lifecycle --------------------------------------------------------------------------

    def up(self, report: Report = _quiet) -> None:
        """Start whichever daemon is not running, then wait until the worker is registered.

        Running `up` twice is harmless; a running cluster keeps the layout it was started with.
        """
        java_executable("Spark")
        running = {role: self._running_pid(role) for role in self._requested_and_recorded_roles()}
        if not any(running.values()):
            self.home.mkdir(parents=True, exist_ok=True)
            (self.home / "cluster.json").write_text(
                json.dumps(asdict(self._requested), indent=2) + "\n", encoding="utf-8"
            )
            (self.home / "spark-defaults.conf").write_text(
                "# Written by `kafka-health dev-spark up`; rewritten at the next up.\n"
                "spark.worker.cleanup.enabled true\n",
                encoding="utf-8",
            )
        if running["master"] is None:
            report(f"starting the Spark master on {self.master_url}")
            self._launch("master")
        self._wait(lambda state: state.get("status") == "ALIVE", "master", "the master to answer")
        workers = self.roles[1:]
        for role in workers:
            if running.get(role) is None:
                report(f"starting a Spark worker on {HOST}:{self.port(role)}")
                self._launch(role)
        for role in workers:
            self._wait(self._registered(role), role, f"the worker on port {self.port(role)} to register")
        report(f"Spark standalone cluster ready: {self.master_url} (web UI {self.web_url})")

    def down(self, report: Report = _quiet) -> None:
        """Stop the workers (and their executors), then the master: SIGTERM to each process group,
        SIGKILL to what is left after `stop_timeout`."""
        for role in reversed(self._requested_and_recorded_roles()):
            pid = self._running_pid(role)
            if pid is not None:
                report(f"stopping the Spark {role} (pid {pid})")
                self._stop(role, pid)
            self._pid_file(role).unlink(missing_ok=True)

    def status(self) -> list[ProcessStatus]:
        return [
            ProcessStatus(role, self.port(role), self.webui_port(role), self._running_pid(role))
            for role in self.roles
        ]

    def workers(self) -> list[Worker]:
        """The workers the master knows (alive or not). Raises DevEnvironmentError when the
        master's web UI does not answer."""
        state = self._master_state()
        if state is None:
            raise DevEnvironmentError(
                f"the Spark master's web UI ({self.web_url}) does not answer; "
                "start the cluster with `kafka-health dev-spark up`"
            )
        return [
            Worker(w["id"], w["host"], int(w["port"]), w["state"], int(w["cores"]), int(w["memory"]))
            for w in state.get("workers", [])
        ]

    # -- processes --------------------------------------------------------------------------

    def _pid_file(self, role: Role) -> Path:
        return self.home / f"{role}.pid"

    def _read_pids(self, role: Role) -> tuple[int, int] | None:
        try:
            pid, group = (int(part) for part in self._pid_file(role).read_text(encoding="utf-8").split())
        except (OSError, ValueError):
            return None
        return pid, group

    def _running_pid(self, role: Role) -> int | None:
        """The daemon's pid while it runs (checked against its command line: pids are reused)."""
        pids = self._read_pids(role)
        if pids is None or not process_alive(pids[0]):
            return None
        try:
            cmdline = (Path("/proc") / str(pids[0]) / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return pids[0]  # no /proc: trust the pid file
        cls = MASTER_CLASS if role == "master" else WORKER_CLASS
        return pids[0] if cls in cmdline and str(self.home) in cmdline else None

    def _launch(self, role: Role) -> None:
        for port, what in ((self.port(role), "port"), (self.webui_port(role), "web UI port")):
            if port_in_use(HOST, port):
                raise DevEnvironmentError(
                    f"port {port} on {HOST} (the Spark {role}'s {what}) is already in use; stop what "
                    "listens there or choose another base port (--base-port)"
                )
        if role != "master":
            self.work_dir.mkdir(parents=True, exist_ok=True)
        # `sh` backgrounds the JVM and exits, so the daemon is nobody's child here (never our
        # zombie); the new session makes it the leader of a process group its executors join.
        script = 'log=$1; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!'
        command = ["sh", "-c", script, "sh", str(self.log_file(role)), *self.command(role)]
        result = subprocess.run(
            command, cwd=self.home, env=self.environment(), capture_output=True, text=True,
            timeout=30, start_new_session=True, check=False,
        )  # fmt: skip
        if result.returncode != 0 or not result.stdout.strip().isdigit():
            raise DevEnvironmentError(f"could not launch the Spark {role}: {result.stderr.strip()}")
        pid = int(result.stdout.strip())
        try:
            group = os.getpgid(pid)
        except ProcessLookupError:
            raise self._died(role, "starting") from None
        self._pid_file(role).write_text(f"{pid} {group}\n", encoding="utf-8")

    def _stop(self, role: Role, pid: int) -> None:
        pids = self._read_pids(role)
        group = pids[1] if pids is not None else pid
        _signal_group(group, signal.SIGTERM)
        if not wait_gone([pid], self.stop_timeout):
            _signal_group(group, signal.SIGKILL)
            if not wait_gone([pid], 10.0):
                raise DevEnvironmentError(f"the Spark {role} (pid {pid}) did not exit after SIGKILL")
        # Executors and Python workers of the group may outlive their parent by a moment.
        _signal_group(group, signal.SIGKILL)

    # -- readiness --------------------------------------------------------------------------

    def _master_state(self) -> dict[str, Any] | None:
        try:
            response = httpx.get(f"{self.web_url}/json/", timeout=3.0)
            response.raise_for_status()
            state = response.json()
        except (httpx.HTTPError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def _registered(self, role: Role) -> Callable[[dict[str, Any]], bool]:
        port = self.port(role)

        def registered(state: dict[str, Any]) -> bool:
            workers = state.get("workers")
            if not isinstance(workers, list):
                return False
            alive = (w for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")
            return any(w.get("port") == port for w in alive)

        return registered

    def _wait(self, ready: Callable[[dict[str, Any]], bool], role: Role, doing: str) -> None:
        """Poll the master's state until `ready`; fail early when `role`'s JVM exits."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            state = self._master_state()
            if state is not None and ready(state):
                return
            for daemon in ("master", role):
                if self._running_pid(daemon) is None:
                    raise self._died(daemon, f"waiting for {doing}")
            if time.monotonic() > deadline:
                seen = (
                    "its web UI does not answer"
                    if state is None
                    else f"it is {state.get('status')} with {state.get('aliveworkers')} alive worker(s)"
                )
                raise DevEnvironmentError(
                    f"timed out after {self.start_timeout:.0f} s waiting for {doing} ({self.web_url}: "
                    f"{seen}).\nLast lines of {self.log_file(role)}:\n{tail(self.log_file(role))}"
                )
            time.sleep(_POLL_SECONDS)

    def _died(self, role: Role, doing: str) -> DevEnvironmentError:
        log = self.log_file(role)
        return DevEnvironmentError(
            f"the Spark {role} exited while {doing}.\nLast lines of {log}:\n{tail(log)}"
        )


def _is_worker_role(name: str) -> bool:
    return name in {worker_role(k) for k in range(MAX_WORKERS)}


def _signal_group(group: int, signum: signal.Signals) -> None:
    if group <= 1 or group == os.getpgrp():  # a stale or edited pid file must never reach us
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
