"""Test rig. Fixtures for the real services live in tests/fixtures/, one plugin per service:

- kafka:    `kafka_cluster` (session, 3 nodes on 127.0.0.1), `kafka` (helpers: create topics,
            produce with chosen timestamps, consume and commit as a group, stop/start a broker)
- share:    `share_kafka_cluster` (session, 1 node of Kafka 4.4.0, only for the tests that ask),
            `share_kafka` (its helper) and `share_consumers` (real Java share consumers)
- postgres: `pg_server` (session), `db_url` (per test module: a fresh database migrated to head),
            `engine` (per module)
- spark:    `spark` (session-scoped local SparkSession with the JDBC driver)
- populated: `populated` (session: a database filled by real collection runs, a Spark evaluation
            and an alert cycle; `Populated` says what it holds), and `Scenario`
- lag_workload: `lag_workload` (session: one workload of lagging, slow and keeping-up groups,
            sampled and evaluated once for the catch-up forecast and falling-behind tests)
- servers:  `prometheus_server`, `alertmanager_server`, `moto_server` (Debian's Prometheus and
            Alertmanager, moto standing in for CloudWatch; one process per test)
- daemon:   `e2e_daemon` (the daemon as a process on a topic of its own), `e2e_topic`, `web_port`
- retention: `retention_rig` (module: the retention service on the real cluster over a throwaway
            git repository)
- helm:     `helm` (session: the pinned Helm, built once from the Go module proxy) and
            `custom_resource_schemas` (the ServiceMonitor's strict schema)
- browser:  `chromium` (session, Debian's headless Chromium through Playwright), `browser_page`
            (fails the test on console errors and failed requests), `serve_app`, `web_url` and
            `web` (the real app over `populated`)

Tiers (tests/tiers.py): tests under tests/unit are marked `unit` (no JVM, no server; checked while
they run) and tests under tests/integration `integration`; every test is also marked by what its
fixtures start (`kafka`, `postgres`, `spark`, `browser`, `receivers`), so `-m "not spark"` leaves
out exactly the tests that need a SparkSession. `e2e` and `soak` are set by the tests themselves.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.session import SESSION_STARTED

pytest_plugins = [
    "tests.tiers",
    "tests.shards",
    "tests.fixtures.kafka",
    "tests.fixtures.share",
    "tests.fixtures.postgres",
    "tests.fixtures.spark",
    "tests.fixtures.receivers",
    "tests.fixtures.delivery",
    "tests.fixtures.populated",
    "tests.fixtures.lag_workload",
    "tests.fixtures.browser",
    "tests.fixtures.servers",
    "tests.fixtures.rules",
    "tests.fixtures.daemon",
    "tests.fixtures.retention",
    "tests.fixtures.helm",
]


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[SESSION_STARTED] = time.monotonic()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The Helm chart's tests run late, their Helm built meanwhile (tests/fixtures/helm.py); the
    # soak last, when the time budget left can be judged (tests/integration/test_soak.py).
    items.sort(
        key=lambda item: (
            item.get_closest_marker("soak") is not None,
            "helm" in getattr(item, "fixturenames", ()),
        )
    )
    # The version matrix's end-to-end run belongs to the matrix runs (`make test-compat`, and the
    # versions `make test` adds), which name their Kafka version; the whole suite at the default
    # version has its own end-to-end tests.
    if not os.environ.get("KAFKA_HEALTH_TEST_KAFKA_VERSION"):
        matrix = [item for item in items if item.get_closest_marker("compat") is not None]
        if matrix:
            config.hook.pytest_deselected(items=matrix)
            items[:] = [item for item in items if item.get_closest_marker("compat") is None]
    # The Spark standalone cluster check has its own target (`make test-spark-standalone`): a
    # master, a worker and three evaluations, minutes on two cores, for a deployment path that
    # changes with `deploy/spark_evaluate.py` and `monitor/evaluate/spark.py` only.
    if "standalone" not in (config.option.markexpr or ""):
        cluster = [item for item in items if item.get_closest_marker("standalone") is not None]
        if cluster:
            config.hook.pytest_deselected(items=cluster)
            items[:] = [item for item in items if item.get_closest_marker("standalone") is None]
