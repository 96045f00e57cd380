"""What the local Kafka and Spark clusters share about the JVM processes they start: finding
Java, checking a port, telling whether a process is still there, waiting for it to go, and the
tail of its log for an error message."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from monitor.core.errors import DevEnvironmentError

TAIL_LINES: Final = 30


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a text file, or a note that it is missing or empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path.name} does not exist)"
    kept = text.splitlines()[-lines:]
    return "\n".join(kept) if kept else f"({path.name} is empty)"


def java_executable(needed_by: str) -> str:
    """`$JAVA_HOME/bin/java`, else `java` on PATH. Raises DevEnvironmentError naming `needed_by`."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise DevEnvironmentError(
            f"`java` is not on PATH and JAVA_HOME is unset; {needed_by} needs Java 17 or newer "
            "(e.g. `apt-get install openjdk-17-jre-headless`)"
        )
    return found


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on (or holds) `port`. SO_REUSEADDR as the JVM sets it, so
    sockets in TIME_WAIT do not count as "in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def accepts_connections(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection on `port` now: refused at once when nothing
    listens, so a caller need not wait out a client's timeout to learn it."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def process_alive(pid: int) -> bool:
    """True until the process has released its resources (ports included): a zombie (exited,
    not yet reaped) counts as gone."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError:
        stat = ""
    if stat:
        try:
            return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except IndexError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_gone(pids: Iterable[int], timeout: float) -> bool:
    """Wait up to `timeout` seconds for every process of `pids` to be gone; False if one is not."""
    waiting = list(pids)
    deadline = time.monotonic() + timeout
    while any(process_alive(pid) for pid in waiting):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def launch_detached(command: list[str], cwd: Path, log: Path) -> int:
    """Start `command` in `cwd` as a process that outlives this one, its output appended to
    `log`; returns its pid. Raises DevEnvironmentError when it could not be started.

    `sh` backgrounds the command and exits, so the process is not our child: it outlives this
    process and is never left as our zombie. A new session keeps it away from our signals. Its
    soft open-file limit is raised to the hard one (a broker keeps a file open per partition,
    and shells often start with 1024 of a much higher hard limit).
    """
    raise_limit = 'ulimit -n "$(ulimit -H -n)" 2>/dev/null'
    script = raise_limit + '; log=$1; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!'
    result = subprocess.run(
        ["sh", "-c", script, "sh", str(log), *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
        check=False,
    )
    if result.returncode != 0 or not result.stdout.strip().isdigit():
        raise DevEnvironmentError(f"could not launch {Path(command[0]).name}: {result.stderr.strip()}")
    return int(result.stdout.strip())


def running_pid(pid_file: Path, *markers: str) -> int | None:
    """The pid in `pid_file` if that process is alive and its command line holds every one of
    `markers` (so a reused pid is not taken for it)."""
    try:
        pid = int(pid_file.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if Path("/proc/self").exists():
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return None
        return pid if all(marker in cmdline for marker in markers) else None
    return pid if process_alive(pid) else None


def send_signal(pid: int, signum: signal.Signals) -> None:
    """Send `signum` to `pid`; a process already gone is not an error."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
