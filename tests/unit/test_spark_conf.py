"""JDBC targets and session settings, without starting a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.core.errors import ConfigError
from monitor.core.settings import SparkConfig
from monitor.evaluate.spark import jdbc_target, session_conf


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
