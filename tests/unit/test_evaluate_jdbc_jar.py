"""The evaluate stage takes the PostgreSQL JDBC driver's jar from its caller (`spark.jdbc_jar`, or
the one `kafka-health setup` installs, never fetched by the daemon) and refuses a missing one before
starting a JVM; a daemon that stops cancels the evaluation running (`EvaluateStage.halt`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from monitor.app import find_jdbc_jar
from monitor.core.clock import SystemClock
from monitor.core.errors import ConfigError, MonitorError
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


class _Session:
    def __init__(self) -> None:
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1


class _Recorder:
    """RunRecorder.run's contract: an escaping MonitorError fails the run with its message."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    @contextmanager
    def run(self, cluster: str | None, job: str) -> Iterator[object]:
        try:
            yield object()
        except MonitorError as exc:
            self.failures.append(str(exc))


def _stage() -> EvaluateStage:
    return EvaluateStage(
        SparkConfig(), EvaluateConfig(), 30, "postgresql://u:p@127.0.0.1:1/x", ["c"],
        lambda: pytest.fail("no database in this test"), SystemClock(), Scheduler(), lambda: Path("x.jar"),
    )  # fmt: skip


def test_a_halt_stops_the_spark_session_under_a_running_evaluation_and_it_fails_as_cancelled(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stage, session, recorder = _stage(), _Session(), _Recorder()
    monkeypatch.setattr(stage, "_session", session)
    monkeypatch.setattr(stage, "_recorder", recorder)

    def evaluation(run: object, running: object) -> None:
        assert running is session
        stage.halt()  # the daemon stops while the Spark job runs: the job fails
        assert session.stops == 1, "the session stopped at once, not after the evaluation"
        raise RuntimeError("Job 7 cancelled because SparkContext was shut down")

    monkeypatch.setattr(stage, "_evaluate", evaluation)
    with caplog.at_level(logging.INFO, logger="monitor.evaluate.stage"):
        stage.evaluate()
    assert recorder.failures == ["cancelled: the daemon is stopping; the next start evaluates in full"]
    assert "the daemon stops: an evaluation running now is cancelled" in caplog.text
    monkeypatch.setattr(stage, "_evaluate", lambda run, s: pytest.fail("an evaluation after the halt"))
    stage.evaluate()  # no evaluation, nor a session, after a halt
    assert recorder.failures == ["cancelled: the daemon is stopping; the next start evaluates in full"]


def test_an_evaluation_that_fails_while_nothing_halts_fails_with_its_own_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stage, recorder = _stage(), _Recorder()
    monkeypatch.setattr(stage, "_session", _Session())
    monkeypatch.setattr(stage, "_recorder", recorder)

    def evaluation(run: object, running: object) -> None:
        raise MonitorError("the store is gone")

    monkeypatch.setattr(stage, "_evaluate", evaluation)
    stage.evaluate()
    assert recorder.failures == ["the store is gone"]


def test_a_halt_while_no_evaluation_runs_stops_the_session_and_says_nothing_is_cancelled(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stage, session = _stage(), _Session()
    monkeypatch.setattr(stage, "_session", session)
    with caplog.at_level(logging.INFO, logger="monitor.evaluate.stage"):
        stage.halt()
    assert session.stops == 1
    assert "cancelled" not in caplog.text
