"""The test tiers' own checks: markers from fixtures, and the guard around each unit test."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import tiers


@dataclass
class _Item:
    """What `mark_tiers` reads of a collected test."""

    fspath: Path
    fixturenames: list[str]
    nodeid: str = "t"
    markers: list[str] = field(default_factory=list)

    def add_marker(self, marker: Any) -> None:
        self.markers.append(marker if isinstance(marker, str) else marker.name)


def test_markers_come_from_the_fixture_closure_and_the_folder() -> None:
    transform = _Item(tiers.TESTS / "integration" / "test_x.py", ["spark", "tmp_path"])
    page = _Item(tiers.TESTS / "integration" / "test_y.py", ["web", "chromium", "populated", "kafka_cluster"])
    pure = _Item(tiers.TESTS / "unit" / "test_z.py", ["tmp_path"])
    tiers.mark_tiers([transform, page, pure])  # type: ignore[list-item]
    assert transform.markers == ["spark", "integration"]
    assert page.markers == ["browser", "kafka", "integration"]
    assert pure.markers == ["unit"]


def test_a_unit_test_that_uses_a_service_is_refused_at_collection() -> None:
    wrong = _Item(tiers.TESTS / "unit" / "test_z.py", ["spark", "tmp_path"], nodeid="tests/unit/test_z.py::t")
    with pytest.raises(pytest.UsageError, match=r"tests/unit/test_z.py::t uses spark"):
        tiers.mark_tiers([wrong])  # type: ignore[list-item]


def test_the_guard_refuses_a_jvm_before_it_starts() -> None:
    with tiers.UnitGuard("t"), pytest.raises(tiers.StartedService, match=r"launched 'java' \(a JVM\)"):
        subprocess.run(["java", "-version"], check=False)
    with tiers.UnitGuard("t"), pytest.raises(tiers.StartedService, match="spark-submit"):
        subprocess.Popen("/opt/spark/bin/spark-submit --version", shell=True)


def test_a_script_standing_in_for_java_may_run(tmp_path: Path) -> None:
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\necho stand-in\n")
    java.chmod(0o755)
    with tiers.UnitGuard("t"):
        done = subprocess.run([str(java)], capture_output=True, text=True, check=True)
    assert done.stdout == "stand-in\n"


def test_the_guard_finds_a_server_left_listening() -> None:
    guard = tiers.UnitGuard("t")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert guard.left_running() == ["1 listening socket(s) of the test process (a server)"]
    assert guard.left_running() == []


def test_the_guard_finds_a_java_child_left_running() -> None:
    # A process whose program is named java, as the check sees a JVM (sleep, not a JVM).
    guard = tiers.UnitGuard("t")
    child = subprocess.Popen(["bash", "-c", "exec -a java sleep 30"])
    try:
        # until bash has replaced itself with "java" (a JVM of an earlier test may still run)
        for _ in range(100):
            if child.pid in tiers.java_children():
                break
            time.sleep(0.02)
        assert guard.left_running() == [f"Java process(es) [{child.pid}]"]
    finally:
        child.kill()
        child.wait()
    assert guard.left_running() == []
