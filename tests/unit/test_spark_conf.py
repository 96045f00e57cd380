"""JDBC targets and session settings, without starting a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.core.errors import ConfigError
from monitor.core.settings import SparkConfig
from monitor.evaluate.spark import (
    SMALL_FLEET_ROWS,
    driver_memory,
    fleet_heap_mb,
    jdbc_target,
    outgrown,
    session_conf,
)


def test_sqlalchemy_url_becomes_jdbc() -> None:
    target = jdbc_target("postgresql+psycopg://kh:pa%40ss@db.example:6543/monitor?sslmode=require")
    assert target.url == "jdbc:postgresql://db.example:6543/monitor?sslmode=require"
    assert target.user == "kh" and target.password == "pa@ss"
    assert target.options()["driver"] == "org.postgresql.Driver"
    assert "pa@ss" not in repr(target)


def test_default_port_and_no_password() -> None:
    target = jdbc_target("postgresql://kh@127.0.0.1/kafka_health")
    assert target.url == "jdbc:postgresql://127.0.0.1:5432/kafka_health"
    assert "password" not in target.options()


@pytest.mark.parametrize(
    ("url", "expected"),
    [("postgresql+psycopg:///kh?host=/run/pg", "needs a host"), ("sqlite:///x.db", "PostgreSQL only")],
)
def test_unusable_urls_refused(url: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        jdbc_target(url)


def test_session_conf_user_settings_win(tmp_path: Path) -> None:
    jar = tmp_path / "postgresql-42.jar"
    conf = session_conf(
        SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "3", "spark.x": "y"}), jar
    )
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.jars"] == str(jar)
    assert conf["spark.sql.shuffle.partitions"] == "3" and conf["spark.x"] == "y"
    assert conf["spark.driver.host"] == "127.0.0.1"
    remote = session_conf(SparkConfig(master="spark://10.1.2.3:7077"), jar)
    assert "spark.driver.host" not in remote


def test_session_keeps_a_bounded_history_of_its_work(tmp_path: Path) -> None:
    jar = tmp_path / "postgresql-42.jar"
    conf = session_conf(SparkConfig(), jar)
    assert int(conf["spark.sql.ui.retainedExecutions"]) <= 50
    assert int(conf["spark.ui.retainedJobs"]) <= 200 and int(conf["spark.ui.retainedStages"]) <= 200
    assert int(conf["spark.ui.retainedTasks"]) <= 5000
    mine = session_conf(SparkConfig(conf={"spark.sql.ui.retainedExecutions": "500"}), jar)
    assert mine["spark.sql.ui.retainedExecutions"] == "500"


def test_session_keeps_the_code_a_warm_evaluation_reuses(tmp_path: Path) -> None:
    conf = session_conf(SparkConfig(), tmp_path / "postgresql-42.jar")
    assert int(conf["spark.sql.codegen.cache.maxEntries"]) >= 300, "one evaluation's generated classes fit"
    mine = session_conf(SparkConfig(conf={"spark.sql.codegen.cache.maxEntries": "50"}), tmp_path / "j.jar")
    assert mine["spark.sql.codegen.cache.maxEntries"] == "50"


def test_session_sends_no_python_call_sites_unless_asked_to(tmp_path: Path) -> None:
    conf = session_conf(SparkConfig(), tmp_path / "postgresql-42.jar")
    assert conf["spark.python.sql.dataFrameDebugging.enabled"] == "false"
    mine = session_conf(
        SparkConfig(conf={"spark.python.sql.dataFrameDebugging.enabled": "true"}), tmp_path / "j.jar"
    )
    assert mine["spark.python.sql.dataFrameDebugging.enabled"] == "true", "for a developer reading an error"


@pytest.mark.parametrize(
    ("rows", "heap_mb"),
    [
        (0, 1024),  # nothing collected yet
        (11_000, 1024),  # 10,000 group-partitions on 1,000 partitions
        (20_000, 1024),
        (20_001, 1280),  # the first step past a small fleet
        (101_000, 1536),  # 100,000 group-partitions on 1,000 partitions
        (1_010_000, 5120),  # bench/evaluate.py's 1M needed 4g
        (3_030_000, 13_312),
    ],
)
def test_an_auto_heap_grows_with_the_fleet(rows: int, heap_mb: int) -> None:
    assert fleet_heap_mb(rows) == heap_mb
    assert driver_memory(SparkConfig(), rows) == f"{heap_mb}m"


def test_the_heap_only_grows_and_in_whole_steps() -> None:
    sizes = [fleet_heap_mb(rows) for rows in range(0, 2_000_000, 7_919)]
    assert sizes == sorted(sizes)
    assert all(size % 256 == 0 for size in sizes)


def test_a_given_heap_is_kept_whatever_the_fleet(tmp_path: Path) -> None:
    assert SparkConfig().driver_memory == "auto"
    given = SparkConfig(driver_memory="3g")
    assert driver_memory(given, 2_000_000) == "3g"
    assert session_conf(given, tmp_path / "j.jar", 0)["spark.driver.memory"] == "3g"
    assert session_conf(SparkConfig(), tmp_path / "j.jar", 500_000)["spark.driver.memory"] == "3072m"
    assert outgrown(given, 0, 2_000_000) is None


def test_a_fleet_that_outgrows_its_auto_heap_is_told_what_to_do() -> None:
    config = SparkConfig()
    assert outgrown(config, 11_000, 20_000) is None, "the same heap still fits"
    assert outgrown(config, 101_000, 11_000) is None, "a fleet that shrank keeps its larger heap"
    told = outgrown(config, 11_000, 150_000)
    assert told is not None
    assert "1024m for 11,000" in told and "150,000" in told and "1792m" in told
    assert "Restart the daemon" in told and "spark.driver_memory" in told


def test_a_small_fleets_driver_collects_on_one_thread_and_every_driver_gives_back_its_idle_heap(
    tmp_path: Path,
) -> None:
    def options(rows: int) -> list[str]:
        return session_conf(SparkConfig(), tmp_path / "j.jar", rows)["spark.driver.extraJavaOptions"].split()

    for rows in (0, 11_000, SMALL_FLEET_ROWS):
        assert "-Dlog4j2.level=WARN" in options(rows) and "-XX:+UseSerialGC" in options(rows), rows
        assert not any("G1" in o for o in options(rows)), rows
        # The heap an evaluation's peak grew is given back beyond 40 % free (the JVM's default: 70).
        assert "-XX:MaxHeapFreeRatio=40" in options(rows) and "-XX:MinHeapFreeRatio=20" in options(rows), rows
    for rows in (SMALL_FLEET_ROWS + 1, 1_000_000):
        assert "-Dlog4j2.level=WARN" in options(rows) and "-XX:+UseG1GC" in options(rows), rows
        assert any(o.startswith("-XX:G1PeriodicGCInterval=") for o in options(rows)), rows
        assert "-XX:+UseSerialGC" not in options(rows), rows
    mine = session_conf(SparkConfig(conf={"spark.driver.extraJavaOptions": "-Dx=1"}), tmp_path / "j.jar")
    assert mine["spark.driver.extraJavaOptions"] == "-Dx=1"
