"""The local Spark standalone cluster's layout and its refusal of a busy port (no JVM started)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from monitor.core.errors import DevEnvironmentError
from monitor.devtools import spark_cluster
from monitor.devtools.spark_cluster import MASTER_CLASS, WORKER_CLASS, DevSparkCluster


def test_ports_and_command_lines_follow_the_base_port(tmp_path: Path) -> None:
    cluster = DevSparkCluster(tmp_path / "spark", base_port=27050, worker_cores=2, worker_memory="2g")
    assert cluster.master_url == "spark://127.0.0.1:27050"
    assert cluster.web_url == "http://127.0.0.1:27051"
    master, worker = cluster.command("master"), cluster.command("worker")
    assert master[1] == MASTER_CLASS and master[master.index("--port") + 1] == "27050"
    assert master[master.index("--webui-port") + 1] == "27051"
    assert worker[1:3] == [WORKER_CLASS, "spark://127.0.0.1:27050"]
    assert worker[worker.index("--port") + 1] == "27052"
    assert worker[worker.index("--cores") + 1] == "2" and worker[worker.index("--memory") + 1] == "2g"
    assert worker[worker.index("--work-dir") + 1] == str(tmp_path / "spark" / "work")
    assert [s.running for s in cluster.status()] == [False, False]


def test_each_worker_takes_the_next_two_ports(tmp_path: Path) -> None:
    cluster = DevSparkCluster(tmp_path / "spark", base_port=27050, workers=3)
    assert cluster.roles == ["master", "worker", "worker2", "worker3"]
    assert [(s.role, s.port, s.webui_port) for s in cluster.status()] == [
        ("master", 27050, 27051),
        ("worker", 27052, 27053),
        ("worker2", 27054, 27055),
        ("worker3", 27056, 27057),
    ]
    third = cluster.command("worker3")
    assert third[1:3] == [WORKER_CLASS, "spark://127.0.0.1:27050"]
    assert third[third.index("--port") + 1] == "27056"
    assert third[third.index("--webui-port") + 1] == "27057"
    assert cluster.log_file("worker2") == tmp_path / "spark" / "worker2.log"


def test_a_running_cluster_keeps_its_recorded_workers(tmp_path: Path) -> None:
    """Asked with the defaults (one worker), a cluster recorded with two still shows and stops two."""
    home = tmp_path / "spark"
    home.mkdir()
    (home / "cluster.json").write_text(
        '{"base_port": 27050, "worker_cores": 1, "worker_memory": "1g", "workers": 2}', encoding="utf-8"
    )
    (home / "worker2.pid").write_text("999999999 999999999\n", encoding="utf-8")  # no such process
    cluster = DevSparkCluster(home, base_port=27060)
    assert cluster.roles == ["master", "worker"], "nothing runs: the requested layout"
    cluster.down()
    assert not (home / "worker2.pid").exists(), "a left pid file of an extra worker is cleared"


def test_up_names_the_busy_port_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The port is checked before anything is launched, so no Java is needed: only its path.
    monkeypatch.setattr(spark_cluster, "java_executable", lambda needed_by: str(tmp_path / "bin" / "java"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = DevSparkCluster(tmp_path / "spark", base_port=port)
        with pytest.raises(DevEnvironmentError, match=rf"port {port} .*master's port.*--base-port"):
            cluster.up()
    assert cluster.status()[0].pid is None


def test_up_without_java_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    cluster = DevSparkCluster(tmp_path / "spark", base_port=27050)
    with pytest.raises(DevEnvironmentError, match=r"`java` is not on PATH.*Spark needs Java 17.*openjdk"):
        cluster.up()
    assert not (tmp_path / "spark").exists(), "nothing written before Java is found"


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DevEnvironmentError, match="at least one core"):
        DevSparkCluster(tmp_path, worker_cores=0)
    with pytest.raises(DevEnvironmentError, match="base port"):
        DevSparkCluster(tmp_path, base_port=80)
    with pytest.raises(DevEnvironmentError, match=r"1024-65526 \(4 worker\(s\) take the 9 ports"):
        DevSparkCluster(tmp_path, base_port=65530, workers=4)
    with pytest.raises(DevEnvironmentError, match="1 to 16 workers, not 0"):
        DevSparkCluster(tmp_path, workers=0)
