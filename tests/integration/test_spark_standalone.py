"""The evaluation beyond local mode: a Spark standalone master and two workers, started from the
installed PySpark on 127.0.0.1, run the same job and write exactly what local mode writes.

One synthetic cluster (the evaluation benchmark's generator, at its smallest size: every input
table, groups that keep up, fall behind, stopped or lost data, partitions under-replicated or
offline) is evaluated at one fixed time three ways, the findings and derived rows cleared in
between:

1. in local mode, on the test session's SparkSession;
2. by `spark-submit --master spark://...` of `deploy/spark_evaluate.py`;
3. by the daemon's evaluate stage with `spark.master` set to the standalone master. A process
   holds one SparkContext and this one keeps the local session, so the stage runs in a child
   Python process (`run_stage`).

The standalone runs must equal the local one (order-insensitive), and the master must list both
applications as finished, each with the two workers' cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from sqlalchemy import Engine, delete, select, text

from bench.evaluate import CLUSTER, T0, fill
from monitor.devtools.jdbc import ensure_jdbc_driver
from monitor.devtools.paths import project_root, var_dir
from monitor.devtools.spark_cluster import DRIVER_CONF, DevSparkCluster
from monitor.evaluate.job import run_evaluation
from monitor.evaluate.rules import default_rule_paths, load_rules
from monitor.evaluate.spark import jdbc_target
from monitor.store.evaluation import DERIVED_TABLES, Finding

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.standalone]

BASE_PORT = int(os.environ.get("KAFKA_HEALTH_TEST_SPARK_PORT", "27077"))
"""The master's port; its web UI, then each worker and its web UI take the next five."""
WORKERS = 2
GROUP_PARTITIONS = 2_000
SHUFFLE_PARTITIONS = 2
"""As the session-wide local session has them: few tasks for a small input on one core."""
SUBMIT_TIMEOUT = 300


@pytest.fixture(scope="module")
def standalone() -> Iterator[DevSparkCluster]:
    cluster = DevSparkCluster(
        var_dir() / "test" / f"spark-standalone-{BASE_PORT}",
        base_port=BASE_PORT,
        worker_cores=1,
        workers=WORKERS,
    )
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="module")
def inputs(engine: Engine) -> Engine:
    fill(engine, GROUP_PARTITIONS, samples=5, interval=180)
    return engine


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every derived row at T0 and every finding, without the findings' ids, sorted."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for entity, table in DERIVED_TABLES.items():
            rows = conn.execute(select(table).where(table.c.evaluated_at == T0)).all()
            found[entity] = sorted((_normal(row) for row in rows), key=repr)
        columns = [c for c in Finding.__table__.columns if c.name != "id"]
        rows = conn.execute(select(*columns)).all()
        found["findings"] = sorted((_normal(row) for row in rows), key=repr)
    return found


def _normal(row: Any) -> tuple[Any, ...]:
    # Sums and averages may add up in another order on another partitioning: compare doubles to
    # 12 significant digits; labels as sorted JSON.
    def value(v: Any) -> Any:
        if isinstance(v, float):
            return float(f"{v:.12g}")
        if isinstance(v, dict):
            return json.dumps(v, sort_keys=True)
        return v

    return tuple(value(v) for v in row)


def clear(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in DERIVED_TABLES.values():
            conn.execute(delete(table).where(table.c.evaluated_at == T0))
        conn.execute(delete(Finding.__table__))
    left = {name: len(rows) for name, rows in snapshot(engine).items() if rows}
    assert not left, f"rows left after clearing: {left}"


def differences(expected: dict[str, list[tuple[Any, ...]]], got: dict[str, list[tuple[Any, ...]]]) -> str:
    lines = []
    for name, rows in expected.items():
        missing = sorted(set(rows) - set(got[name]), key=repr)
        extra = sorted(set(got[name]) - set(rows), key=repr)
        if missing or extra or len(rows) != len(got[name]):
            lines.append(f"{name}: {len(rows)} rows in local mode, {len(got[name])} on the cluster")
            lines += [f"  only local:   {r}" for r in missing[:3]]
            lines += [f"  only cluster: {r}" for r in extra[:3]]
    return "\n".join(lines)


def finished_apps(cluster: DevSparkCluster) -> list[dict[str, Any]]:
    state = httpx.get(f"{cluster.web_url}/json/", timeout=10).json()
    return [app for app in state["completedapps"] if app["state"] == "FINISHED"]


def run_stage(master: str, database_url: str, evaluated_at: str) -> None:
    """In a child process: the daemon's evaluate stage on `master`, one evaluation at `evaluated_at`."""
    from monitor.core.clock import FakeClock
    from monitor.core.scheduler import Scheduler
    from monitor.core.settings import EvaluateConfig, SparkConfig
    from monitor.evaluate.stage import EvaluateStage
    from monitor.store.engine import make_engine

    engine = make_engine(database_url)
    spark = SparkConfig(
        master=master, app_name="standalone-stage", shuffle_partitions=SHUFFLE_PARTITIONS, conf=DRIVER_CONF
    )
    stage = EvaluateStage(
        spark, EvaluateConfig(), 30, database_url, [CLUSTER], lambda: engine,
        FakeClock(datetime.fromisoformat(evaluated_at)), Scheduler(), ensure_jdbc_driver,
    )  # fmt: skip
    stage.start()  # the scheduler is never started: the test calls the job itself
    try:
        assert stage._session is not None
        print("master:", stage._session.sparkContext.master, flush=True)
        stage.evaluate()
    finally:
        stage.stop()
        engine.dispose()


def ship_package(path: Path) -> Path:
    """The `monitor` package as a zip, the way it is shipped to a cluster with --py-files."""
    with zipfile.ZipFile(path, "w") as archive:
        for source in sorted((project_root() / "monitor").rglob("*.py")):
            archive.write(source, source.relative_to(project_root()))
    return path


def _child_env(cluster: DevSparkCluster, db_url: str) -> dict[str, str]:
    env = cluster.environment()
    env["DATABASE_URL"] = db_url
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project_root()), env.get("PYTHONPATH")]))
    return env


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{tail}"


def test_standalone_cluster_writes_what_local_mode_writes(
    standalone: DevSparkCluster, inputs: Engine, spark: SparkSession, db_url: str, tmp_path: Path
) -> None:
    ruleset = load_rules(default_rule_paths())
    assert not ruleset.problems, ruleset.problems

    # 1. Local mode.
    local = run_evaluation(spark, jdbc_target(db_url), inputs, ruleset.rules, [CLUSTER], T0)
    expected = snapshot(inputs)
    # Every entity the generator makes has rows (it makes no share groups and no lag objective is
    # configured: theirs stay empty, and must be empty in the standalone runs too).
    made = [e for e in DERIVED_TABLES if not e.startswith("share_group") and e != "lag_objective"]
    assert all(expected[entity] for entity in made), {k: len(v) for k, v in expected.items()}
    rules_found = {row[0] for row in expected["findings"]}
    assert len(rules_found) >= 3, f"too few kinds of findings to compare: {rules_found}"
    assert local.rows == {entity: len(expected[entity]) for entity in DERIVED_TABLES}
    clear(inputs)

    # 2. spark-submit of the job's entry file to the standalone master, with the package shipped
    #    as the README says: a zip in --py-files (first on the driver's path too, so the rules
    #    come from evaluate.rules_dir: a zip has no alert_rules/ beside the package).
    package = ship_package(tmp_path / "kafka_health.zip")
    config = tmp_path / "monitor.yaml"
    config.write_text(
        f"clusters:\n  - name: {CLUSTER}\n    bootstrap_servers: ['127.0.0.1:9']\n"
        f"evaluate:\n  rules_dir: {project_root() / 'alert_rules'}\n"
    )
    driver_conf = [arg for key, value in DRIVER_CONF.items() for arg in ("--conf", f"{key}={value}")]
    submit = [
        str(standalone.spark_submit()), "--master", standalone.master_url, "--name", "standalone-submit",
        "--jars", str(ensure_jdbc_driver()), "--py-files", str(package), *driver_conf,
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.sql.shuffle.partitions={SHUFFLE_PARTITIONS}",
        str(project_root() / "deploy" / "spark_evaluate.py"),
        "--config", str(config), "--evaluated-at", T0.isoformat(),
    ]  # fmt: skip
    done = subprocess.run(
        submit, env=_child_env(standalone, db_url), capture_output=True, text=True,
        timeout=SUBMIT_TIMEOUT, check=False,
    )  # fmt: skip
    _check(done, "spark-submit")
    assert f"evaluated at {T0.isoformat()}" in done.stdout, done.stdout
    # spark-submit passes the driver's stderr on through its stdout
    assert f"the monitor package from {package}" in done.stdout, done.stdout
    submitted = snapshot(inputs)
    assert not differences(expected, submitted), differences(expected, submitted)
    clear(inputs)

    # 3. The daemon's evaluate stage with spark.master set to the standalone master.
    code = (
        "import sys; from tests.integration.test_spark_standalone import run_stage; run_stage(*sys.argv[1:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, standalone.master_url, db_url, T0.isoformat()],
        env=_child_env(standalone, db_url), capture_output=True, text=True, timeout=SUBMIT_TIMEOUT,
        check=False,
    )  # fmt: skip
    _check(done, "the evaluate stage")
    assert f"master: {standalone.master_url}" in done.stdout, done.stdout
    staged = snapshot(inputs)
    assert not differences(expected, staged), differences(expected, staged)
    with inputs.connect() as conn:
        status, counts = conn.execute(
            text("SELECT status, counts FROM collection_runs WHERE job = 'evaluate' ORDER BY id DESC LIMIT 1")
        ).one()
    assert status == "ok", counts
    assert {e: counts[f"rows_{e}"] for e in DERIVED_TABLES} == local.rows

    # Both ran on the standalone cluster, on a core of each worker.
    assert [w.state for w in standalone.workers()] == ["ALIVE"] * WORKERS
    apps = {app["name"]: app for app in finished_apps(standalone)}
    assert {"standalone-submit", "standalone-stage"} <= set(apps), list(apps)
    assert all(apps[name]["cores"] == WORKERS for name in ("standalone-submit", "standalone-stage")), apps
