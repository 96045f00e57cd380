"""The process helpers shared by the local Kafka and Spark clusters."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.processes import java_executable, port_in_use, process_alive, tail, wait_gone


def test_tail_gives_the_last_lines_or_says_why_there_are_none(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    assert tail(log) == "(server.log does not exist)"
    log.write_text("")
    assert tail(log) == "(server.log is empty)"
    log.write_text("".join(f"line {n}\n" for n in range(100)))
    assert tail(log, 3) == "line 97\nline 98\nline 99"


def test_a_listening_port_is_in_use_and_a_closed_one_is_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", port)


def test_a_process_is_alive_until_it_exits_and_a_zombie_counts_as_gone() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_alive(child.pid)
        assert not wait_gone([child.pid], 0.3)
        child.terminate()
        # Not reaped yet: a zombie holds no port any more, so it is gone for our purposes.
        assert wait_gone([child.pid], 10.0)
    finally:
        child.kill()
        child.wait()
    assert not process_alive(child.pid)


def test_missing_java_is_named_with_what_needs_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DevEnvironmentError, match="Spark needs Java 17"):
        java_executable("Spark")
