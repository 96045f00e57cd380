"""Property-based tests of every operation of the HTTP API (JSON API, Burrow endpoints, alerts,
silences, acknowledgements, retention, repairs) against its own OpenAPI document: schemathesis in process
over ASGI, with all of its checks. For generated requests, valid and invalid, no answer is a 5xx,
every status is documented, every body conforms, invalid data is refused and schema-valid data is
accepted (or refused for a reason the document names: a business rule it cannot express).

The app reads the synthetic rows of `tests.fixtures.read_model`; the documented examples of the
path parameters (cluster `prod`, topic `orders`, group `billing`) make some cases hit real rows.
Changes are made with an API token of the platform team, so that generated bodies reach the
actions' own checks rather than stopping at authentication. Examples per operation are bounded so
the module runs in about a minute; then the `schemathesis run` command itself, over HTTP, with every
check over its examples, coverage and fuzzing phases (about three minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from sqlalchemy import Engine, text

from monitor.act.gitrepo import ConfigRepo
from monitor.act.policy import default_policy_path, load_policy
from monitor.act.repairs import RepairService
from monitor.act.service import RetentionService
from monitor.act.tokens import create_token
from monitor.core.clock import FakeClock, SystemClock
from monitor.core.owners import default_owners_path
from monitor.core.settings import ClusterConfig, IdentityConfig, RetentionConfig
from monitor.expose.web.app import create_app
from tests.fixtures.browser import serve_app
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.read_model import T1, fill

EXAMPLES = 15
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "410", "422", "429"]
CONFIG = schemathesis.config.SchemathesisConfig.from_dict(
    {
        "checks": {
            # Beyond schemathesis' defaults: rules the document cannot express, each documented on
            # the operation (a regular expression RE2 refuses, a silence longer than the configured
            # maximum, a retention raise the guardrails refuse: 422; an acknowledgement link that
            # expired: 410).
            "positive_data_acceptance": {"expected-statuses": ACCEPTED}
        }
    }
)
"""Every check of schemathesis is on; a 5xx fails all of them (`not_a_server_error`)."""
OPERATIONS = 47
"""Every operation of the document (a new one must be counted here, so it is tested)."""


@pytest.fixture(scope="module")
def retention(
    kafka: KafkaTestHelper, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RetentionService]:
    """The retention button against the real cluster, named like the synthetic one."""
    home = tmp_path_factory.mktemp("schema-retention")
    cluster = ClusterConfig(name="prod", bootstrap_servers=kafka.bootstrap_servers.split(","))
    service = RetentionService(RetentionConfig(), [cluster], lambda: engine, SystemClock(),
                               ConfigRepo(home / "configs"), default_policy_path(), default_owners_path())  # fmt: skip
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def repairs(kafka: KafkaTestHelper, engine: Engine) -> Iterator[RepairService]:
    """The repair actions against the real cluster, named like the synthetic one."""
    cluster = ClusterConfig(name="prod", bootstrap_servers=kafka.bootstrap_servers.split(","))
    service = RepairService(
        [cluster], lambda: engine, SystemClock(), lambda: load_policy(default_policy_path())
    )
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def api_app(engine: Engine, retention: RetentionService, repairs: RepairService) -> FastAPI:
    """The whole API (retention and repairs included) over the synthetic cluster."""
    with engine.begin() as conn:
        fill(conn)
        conn.execute(  # a recent collection, so that /readyz is ready
            text("INSERT INTO collection_runs (cluster, job, instance, started_at, finished_at, status)"
                 " VALUES ('prod', 'offsets', 'test', :t, :t, 'ok')"),
            {"t": T1},
        )  # fmt: skip
    return create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(T1), retention=retention,
                      repairs=repairs,
                      # every operation is tried many times: the rate limit (its own test in
                      # test_alert_api.py) would answer most of them with 429
                      identity=IdentityConfig(platform_teams=["kafka-platform"],
                                              change_requests_per_minute=100_000))  # fmt: skip


@pytest.fixture(scope="module")
def api_schema(api_app: FastAPI) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_asgi("/openapi.json", api_app, config=CONFIG)


@pytest.fixture(scope="module")
def token(engine: Engine) -> str:
    with engine.begin() as conn:
        return create_token(conn, name="schema", user="pat", teams=["kafka-platform"], created_by="test",
                            now=T1)  # fmt: skip


KNOWN = {"cluster": "prod", "topic": "orders", "group": "billing", "partition": 0}
"""Path parameters that name rows of the synthetic cluster (ids: 1)."""


def test_every_answer_conforms_to_the_document(api_schema: schemathesis.BaseSchema, token: str) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) == OPERATIONS, sorted(f"{o.method} {o.path}" for o in operations)
    for operation in operations:
        _conforms(operation, {"Authorization": f"Bearer {token}"})


def _conforms(operation: schemathesis.APIOperation, headers: dict[str, str]) -> None:
    """One known case, then generated ones (valid and invalid parameters)."""
    names = [p.name for p in operation.path_parameters]
    known = {n: KNOWN.get(n, 1) for n in names}
    if operation.body:
        pass  # generated below: a body has no single known example
    else:
        operation.Case(path_parameters=known, headers=headers).call_and_validate()

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def generated(case: schemathesis.Case) -> None:
        case.headers = {**(case.headers or {}), **headers}
        case.call_and_validate()

    generated()


RUN_EXAMPLES = 4
"""Generated cases per operation and phase in `schemathesis run`: the module stays within about
three minutes on the 2-core machine."""


def test_schemathesis_run_with_every_check_and_phase_finds_nothing(
    api_app: FastAPI, token: str, tmp_path: Path
) -> None:
    """The schemathesis command itself against the app served over HTTP, as a user would run it:
    every check (`--checks all`: no 5xx, every status and header documented, a 405 with its
    `Allow`, required headers, authentication ignored nowhere ...) over the examples, coverage
    (boundary values, every undocumented method) and fuzzing phases."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(f"[checks.positive_data_acceptance]\nexpected-statuses = {json.dumps(ACCEPTED)}\n")
    with serve_app(api_app) as url:
        run = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color", "run",
             f"{url}/openapi.json", "--checks", "all", "--phases", "examples,coverage,fuzzing",
             "--max-examples", str(RUN_EXAMPLES), "--seed", "26", "--workers", "1",
             "--header", f"Authorization: Bearer {token}", "--request-timeout", "30"],
            capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
        )  # fmt: skip
    report = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    assert f"{OPERATIONS} selected / {OPERATIONS} total" in run.stdout, report
