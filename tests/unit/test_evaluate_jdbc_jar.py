"""The evaluate stage takes the PostgreSQL JDBC driver's jar from its caller (`spark.jdbc_jar`, or
the one `kafka-health setup` installs, never fetched by the daemon) and refuses a missing one before
starting a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.app import find_jdbc_jar
from monitor.core.clock import SystemClock
from monitor.core.errors import ConfigError
from monitor.core.scheduler import Scheduler
from monitor.core.settings import EvaluateConfig, Settings, SparkConfig
from monitor.evaluate import jdbc_driver
from monitor.evaluate.stage import EvaluateStage


def test_a_configured_jar_is_used_as_given(tmp_path: Path) -> None:
    jar = tmp_path / "postgresql-42.jar"
    assert find_jdbc_jar(Settings(spark=SparkConfig(jdbc_jar=jar)))() == jar


def test_a_missing_jar_is_refused_naming_the_setting(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jar"
    stage = EvaluateStage(
        SparkConfig(), EvaluateConfig(), 30, "postgresql://u:p@127.0.0.1:1/x", ["c"],
        lambda: pytest.fail("no database before the jar is found"), SystemClock(), Scheduler(), lambda: missing,
    )  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        stage.start()
    assert caught.value.problems == [
        f"spark.jdbc_jar: no file at {missing}; install the PostgreSQL JDBC driver with "
        "`kafka-health setup` (it fetches it once), or give its jar in spark.jdbc_jar"
    ]


def test_the_daemon_looks_for_the_installed_driver_and_never_fetches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_CACHE", str(tmp_path))
    monkeypatch.setattr(jdbc_driver.httpx, "stream", lambda *a, **k: pytest.fail("the daemon fetched"))
    assert find_jdbc_jar(Settings())() == tmp_path / "jdbc" / f"postgresql-{jdbc_driver.VERSION}.jar"
