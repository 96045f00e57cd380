"""The monitor over a secured cluster, for real: the dev cluster's SASL_SSL listener with each of
its mechanisms (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER with tokens from the local
OpenID provider) and its mutual-TLS listener. Over each: collect (metadata through
confluent-kafka, offsets and committed offsets, log dirs through kafka-python) and apply a
retention raise through the act stage, what was collected over all of them evaluated at once (the
evaluation reads PostgreSQL only); and a wrong password, a token the brokers do not
trust or an untrusted client certificate fails with an error naming the cluster, within the
request timeout, with no secret in any log. OAUTHBEARER tokens live 15 s here: both clients
fetch new ones and re-authenticate while collection goes on past their expiry. AWS MSK IAM
tokens are signed from AWS credentials in the environment and reach the brokers from both
clients (which refuse them: only MSK can check them)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git
import pytest
import trustme
from confluent_kafka.admin import ConfigResource, ResourceType
from cryptography.hazmat.primitives import serialization
from pydantic import SecretStr
from sqlalchemy import Engine

from monitor.act.gitrepo import ConfigRepo
from monitor.act.service import RetentionService
from monitor.collect.stage import ClusterCollector
from monitor.core.clock import FakeClock, SystemClock
from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.settings import (
    ClusterConfig,
    CollectConfig,
    NameFilter,
    RetentionConfig,
    SaslMechanism,
    Security,
    SecurityProtocol,
)
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.oidc_provider import DevOidcProvider
from monitor.devtools.paths import var_dir
from monitor.kafka.logdirs import LogDirClient
from monitor.kafka.oauth import REFRESH_AFTER
from monitor.store.buffer import BufferedWriter
from monitor.store.partitions import ensure_partitions
from monitor.store.runs import RunRecorder
from tests.fixtures.kafka import OIDC_TOKEN_SECONDS, Listener, SecuredKafkaHelper
from tests.fixtures.logs import RootRecords
from tests.fixtures.populated import Scenario, evaluate_together
from tests.fixtures.retention import ALICE, DAY_MS, OWNERS, POLICY
from tests.fixtures.sql import rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REQUEST_TIMEOUT = 3.0
LISTENERS: list[Listener] = ["sasl_ssl", "scram_sha_256", "plain", "oauthbearer", "mtls"]


def runs(engine: Engine, cluster: str) -> dict[str, dict[str, Any]]:
    """The latest collection run of each job of `cluster`."""
    found = rows(
        engine,
        "SELECT DISTINCT ON (job) job, status, error FROM collection_runs WHERE cluster = :c"
        " ORDER BY job, id DESC",
        c=cluster,
    )
    return {r["job"]: r for r in found}


@pytest.fixture(params=LISTENERS)
def secured(
    request: pytest.FixtureRequest, secured_kafka_cluster: DevKafkaCluster
) -> Iterator[SecuredKafkaHelper]:
    helper = SecuredKafkaHelper(secured_kafka_cluster, request.param)
    try:
        yield helper
    finally:
        helper.close()


def _retention_service(cluster: ClusterConfig, engine: Engine, home: Path) -> RetentionService:
    (home / "policy.yaml").write_text(POLICY)
    (home / "owners.yaml").write_text(OWNERS)
    remote = home / "remote.git"
    git.Repo.init(remote, bare=True)
    clock = FakeClock(datetime.now(UTC))
    with engine.begin() as conn:
        ensure_partitions(conn, clock.now(), 30)
    return RetentionService(
        RetentionConfig(retry_seconds=1, verify_seconds=10), [cluster], lambda: engine, clock,
        ConfigRepo(home / "configs", remote=str(remote)), home / "policy.yaml", home / "owners.yaml",
    )  # fmt: skip


def _retention_ms(secured: SecuredKafkaHelper, topic: str) -> str:
    """retention.ms as the broker reports it, asked over the PLAINTEXT listener."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = secured.admin.describe_configs([resource])[resource].result(timeout=30)
    return str(entries["retention.ms"].value)


@dataclass
class Collected:
    """What was collected over one listener: its monitored cluster, topic and group, or why the
    set-up or the collection failed (raised again by that listener's test alone)."""

    name: str
    topic: str = ""
    group: str = ""
    error: Exception | None = None


def _collect_over(
    listener: Listener, cluster: DevKafkaCluster, engine: Engine, spark: SparkSession, db_url: str
) -> tuple[Collected, Scenario | None]:
    """A topic with 30 records, a group 25 behind, collected twice over `listener` only (the
    produce rate needs two samples)."""
    collected = Collected(f"secured-{listener.replace('_', '-')}")
    helper = SecuredKafkaHelper(cluster, listener)
    scenario = None
    try:
        collected.topic = helper.create_topic(
            f"payments-{uuid.uuid4().hex[:8]}", config={"retention.ms": str(DAY_MS)}
        )
        collected.group = f"readers-{collected.topic}"
        helper.produce(collected.topic, [f"m{i}".encode() for i in range(20)])
        assert helper.consume_and_commit(collected.group, collected.topic, 5) == 5
        scenario = Scenario(collected.name, helper, engine, spark, db_url, [collected.topic])
        scenario.collect(log_dirs=True)
        helper.produce(collected.topic, [f"n{i}".encode() for i in range(10)])
        time.sleep(1)
        scenario.collect(log_dirs=True)
    except Exception as exc:  # the listener's own test raises it again
        collected.error = exc
    finally:
        helper.close()
    return collected, scenario


@pytest.fixture(scope="module")
def collected(
    request: pytest.FixtureRequest,
    secured_kafka_cluster: DevKafkaCluster,
    engine: Engine,
    spark: SparkSession,
    db_url: str,
) -> dict[str, Collected]:
    """Listener -> what was collected over it, for each listener whose test runs; then one
    evaluation of all their clusters, as the daemon evaluates every cluster it watches at once (it
    reads PostgreSQL only, whatever listener the rows came over)."""
    selected = {
        item.callspec.params["secured"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and "collected" in item.fixturenames
    }
    found: dict[str, Collected] = {}
    scenarios: list[Scenario] = []
    for listener in [listener for listener in LISTENERS if listener in selected]:
        found[listener], scenario = _collect_over(listener, secured_kafka_cluster, engine, spark, db_url)
        if scenario is not None:
            scenarios.append(scenario)
    try:
        if scenarios:
            evaluate_together(scenarios, plans=scenarios[0].plans)
    finally:
        for scenario in scenarios:
            scenario.close()
    return found


def test_collect_evaluate_and_raise_retention_over_each_secured_listener(
    secured: SecuredKafkaHelper, collected: dict[str, Collected], engine: Engine, tmp_path: Path
) -> None:
    mine = collected[secured.listener]
    if mine.error is not None:
        raise mine.error
    name, topic, group = mine.name, mine.topic, mine.group
    # 1. Collected, twice, over the secured listener only.
    latest = runs(engine, name)
    assert {job: r["status"] for job, r in latest.items()} == {
        "metadata": "ok", "configs": "ok", "log_dirs": "ok", "offsets": "ok",
    }, latest  # fmt: skip
    (partition,) = rows(
        engine, "SELECT end_offset FROM latest_partition_offsets WHERE cluster = :c AND topic = :t",
        c=name, t=topic,
    )  # fmt: skip
    assert partition["end_offset"] == 30
    # The committed offset comes from OffsetFetch through kafka-python.
    (committed,) = rows(
        engine, "SELECT committed_offset, lag FROM latest_group_offsets WHERE cluster = :c AND group_id = :g",
        c=name, g=group,
    )  # fmt: skip
    assert (committed["committed_offset"], committed["lag"]) == (5, 25)
    # DescribeLogDirs through kafka-python: the broker's disk and the topic's size.
    assert rows(engine, "SELECT 1 FROM broker_disks WHERE cluster = :c AND total_bytes > 0", c=name)
    assert rows(engine, "SELECT 1 FROM log_dir_sizes WHERE cluster = :c AND topic = :t", c=name, t=topic)

    # 2. Evaluated (with the other listeners' clusters): the cluster's partitions and its lag.
    assert rows(engine, "SELECT 1 FROM derived_partition WHERE cluster = :c", c=name)
    (lag,) = rows(
        engine, "SELECT offset_lag FROM derived_group_partition WHERE cluster = :c AND group_id = :g",
        c=name, g=group,
    )  # fmt: skip
    assert lag["offset_lag"] == 25

    # 3. An instant retention raise, applied over the same secured listener.
    service = _retention_service(secured.cluster_config(name, request_timeout_seconds=10), engine, tmp_path)
    service.start()
    try:
        request = service.raise_retention(ALICE, name, topic, {"retention.ms": 2 * DAY_MS}, DAY_MS, "behind")
        assert request.state == "pending_review", request
    finally:
        service.stop()
    assert _retention_ms(secured, topic) == str(2 * DAY_MS)


def _untrusted_client_certificate(directory: Path, passphrase: str) -> tuple[Path, Path]:
    """A client certificate for CN=monitor from a CA the brokers do not trust; its key encrypted."""
    issued = trustme.CA().issue_cert("monitor")
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    key_file, cert_file = directory / "untrusted-key.pem", directory / "untrusted-cert.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(passphrase.encode()),
        )
    )
    issued.cert_chain_pems[0].write_to_path(str(cert_file))
    return cert_file, key_file


def _rejected_config(
    secured: SecuredKafkaHelper, name: str, topic: str, tmp_path: Path
) -> tuple[ClusterConfig, list[str]]:
    """A configuration the brokers refuse on this listener, and every secret it and the cluster hold."""
    security = secured.cluster.security
    secrets = _all_secrets(secured.cluster)
    if secured.listener == "oauthbearer":
        # The provider's other issuer: a token signed with a key the brokers' JWKS does not hold.
        other = security.oauthbearer().sasl_oauthbearer_token_endpoint_url or ""
        rejected = security.oauthbearer(other.replace("/kafka/token", "/other/token"))
    elif secured.listener != "mtls":
        wrong = f"wrong-{uuid.uuid4().hex}"
        mechanism = security.client_securities()[secured.listener.replace("_", "-")].sasl_mechanism
        assert mechanism is not None
        rejected, secrets = security.sasl_ssl(SecretStr(wrong), mechanism), [*secrets, wrong]
    else:
        passphrase = f"phrase-{uuid.uuid4().hex}"
        cert, key = _untrusted_client_certificate(tmp_path, passphrase)
        rejected, secrets = security.mutual_tls(cert, key, SecretStr(passphrase)), [*secrets, passphrase]
    topics = NameFilter(allow=[topic])
    config = secured.cluster_config(
        name, security=rejected, topics=topics, request_timeout_seconds=REQUEST_TIMEOUT
    )
    return config, secrets


def _all_secrets(cluster: DevKafkaCluster) -> list[str]:
    """Every secret of the secured cluster's clients: passwords, passphrase, client secret."""
    found = [
        s for security in cluster.security.client_securities().values() for s in security.secret_values()
    ]
    return sorted(set(found))


def test_a_wrong_password_or_untrusted_certificate_is_a_clear_error_without_secrets(
    secured: SecuredKafkaHelper,
    engine: Engine,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    # An earlier test's kafka-python I/O thread may still log its own cluster's last lines.
    earlier_threads = {t.ident for t in threading.enumerate()} - {threading.get_ident()}
    name = f"rejected-{secured.listener.replace('_', '-')}"
    topic = secured.create_topic()
    config, secrets = _rejected_config(secured, name, topic, tmp_path)
    clock = SystemClock()
    writer = BufferedWriter(engine, 1000, clock)
    recorder = RunRecorder(engine, clock, writer=writer)
    collector = ClusterCollector(config, engine, clock, recorder, writer, CollectConfig())
    collector.start()
    try:
        for job in ("metadata", "offsets", "log_dirs"):
            started = time.monotonic()
            collector.run(job)
            # Bounded by the request timeout: the first request fails, nothing waits on.
            assert time.monotonic() - started < REQUEST_TIMEOUT + 6, job
    finally:
        collector.stop()
    # The jobs stop at the first refusal (confluent-kafka's): kafka-python, which reads the log
    # dirs and committed offsets, is asked on its own.
    log_dirs = LogDirClient(config)
    with RootRecords() as root:
        log_dirs.start()
        try:
            with pytest.raises((KafkaUnavailableError, KafkaRequestError), match=f"on cluster '{name}'"):
                log_dirs.describe([1])
        finally:
            log_dirs.close()
    latest = runs(engine, name)
    assert {job: r["status"] for job, r in latest.items()} == {
        "metadata": "failed", "offsets": "failed", "log_dirs": "failed",
    }, latest  # fmt: skip
    for job, run in latest.items():
        assert f"cluster '{name}'" in run["error"], (job, run["error"])
        assert f"clusters.{name}.security" in run["error"], (job, run["error"])
    # confluent-kafka sees why the brokers closed the connection, and says so.
    metadata_error = latest["metadata"]["error"]
    assert "rejected the client's credentials or certificate" in metadata_error
    expected = "bad certificate" if secured.listener == "mtls" else "SASL authentication error"
    assert expected in metadata_error

    # No secret anywhere: the captured log records, the process output, the broker's own logs.
    ours = [r for r in caplog.records if r.name.startswith("monitor")]
    assert ours, "the failed runs were logged"
    assert not [r for r in ours if r.exc_info], "a failed run is logged without a traceback"
    # kafka-python's own lines reach the log handlers naming the cluster, without a traceback.
    python_client = [
        r for r in root.records if r.name == "monitor.kafka.python" and r.thread not in earlier_threads
    ]
    unnamed = [
        r.getMessage() for r in python_client if f"kafka-python on cluster '{name}'" not in r.getMessage()
    ]
    assert python_client and not unnamed, unnamed
    assert not [r for r in root.records if r.name.startswith("kafka") or r.exc_info]
    failed_runs = [
        r for r in ours if r.levelno >= logging.WARNING and f"{name}/log_dirs failed" in r.getMessage()
    ]
    assert len(failed_runs) == 1, [r.getMessage() for r in ours if r.levelno >= logging.WARNING]
    out, err = capfd.readouterr()
    node = secured.cluster.node_dir(1)
    logs = {
        "captured log": _logged(caplog),
        "process output": out + err,
        "runs": " ".join(str(r["error"]) for r in latest.values()),
        "server.log": (node / "server.log").read_text(encoding="utf-8", errors="replace"),
        "console.log": (node / "console.log").read_text(encoding="utf-8", errors="replace"),
        "OpenID provider's log": _provider_log(),
    }
    _assert_no_secret(logs, secrets)


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    """What reached the log handlers. pytest's caplog also sees kafka-python's own records,
    which never reach a handler in the daemon (`monitor.kafka.pylog` stops them and re-logs them
    under `monitor.kafka.python`, secrets masked); its DEBUG lines carry the SASL PLAIN request
    with the password in it, as the client sends it."""
    return "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("kafka"))


def _provider_log() -> str:
    path = var_dir() / "test" / "oidc" / "provider.log"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _assert_no_secret(logs: dict[str, str], secrets: list[str]) -> None:
    assert secrets
    for where, content in logs.items():
        for secret in secrets:
            assert secret not in content, f"a secret is in the {where}"


def _collector(config: ClusterConfig, engine: Engine) -> ClusterCollector:
    clock = SystemClock()
    writer = BufferedWriter(engine, 1000, clock)
    return ClusterCollector(
        config, engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig()
    )


def test_oauthbearer_tokens_are_refreshed_and_collection_goes_on_past_their_expiry(
    oidc_provider: DevOidcProvider,
    secured_kafka_cluster: DevKafkaCluster,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    helper = SecuredKafkaHelper(secured_kafka_cluster, "oauthbearer")
    name = "oidc-refresh"
    topic = helper.create_topic()
    helper.produce(topic, [b"x"] * 5)
    assert helper.consume_and_commit(f"readers-{topic}", topic, 5) == 5
    config = helper.cluster_config(name, topics=NameFilter(allow=[topic]), request_timeout_seconds=10)
    requests_before = len(oidc_provider.token_requests())
    collector = _collector(config, engine)
    collector.start()
    try:
        # One collector, its clients and their connections kept, for more than two token
        # lifetimes: the brokers end each session when its token expires, so every run past the
        # first expiry works only with a fresh token, on re-authenticated connections.
        deadline = time.monotonic() + 2.5 * OIDC_TOKEN_SECONDS
        cycles = 0
        while time.monotonic() < deadline or cycles < 3:
            for job in ("metadata", "offsets", "log_dirs"):
                collector.run(job)
            latest = runs(engine, name)
            assert {job: r["status"] for job, r in latest.items()} == {
                "metadata": "ok", "offsets": "ok", "log_dirs": "ok",
            }, latest  # fmt: skip
            cycles += 1
            time.sleep(3)
    finally:
        helper.close()
        collector.stop()
    # Both libraries asked the provider again once most of a token's lifetime had gone: librdkafka
    # by itself (it sends no User-Agent), kafka-python through the monitor's provider (httpx).
    requests = oidc_provider.token_requests()[requests_before:]
    for library, agent in (("librdkafka", ""), ("kafka-python", "python-httpx")):
        times = [r.at for r in requests if (agent in r.user_agent if agent else not r.user_agent)]
        assert times, (library, requests)
        spread = (max(times) - min(times)).total_seconds()
        assert spread >= REFRESH_AFTER * OIDC_TOKEN_SECONDS - 1, (library, times)
    secrets = config.security.secret_values()
    logs = {
        "captured log": _logged(caplog),
        "OpenID provider's log": _provider_log(),
        "server.log": secured_kafka_cluster.server_log(1).read_text(encoding="utf-8", errors="replace"),
    }
    _assert_no_secret(logs, secrets)


def test_msk_iam_tokens_are_signed_and_sent_by_both_clients(
    oidc_provider: DevOidcProvider,
    secured_kafka_cluster: DevKafkaCluster,
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As far as MSK IAM goes without AWS: a token signed with credentials from the environment,
    offered by both clients on a real OAUTHBEARER listener, which refuses it (only MSK can check
    its signature), and the refusal is the clear error naming the cluster."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEYID0001", "AWS_SECRET_ACCESS_KEY": "example-secret-not-real",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    name = "msk-iam"
    security = Security(
        protocol=SecurityProtocol.SASL_SSL, sasl_mechanism=SaslMechanism.AWS_MSK_IAM, aws_region="eu-west-1",
        ssl_ca_location=secured_kafka_cluster.security.ca_file,
    )  # fmt: skip
    servers = secured_kafka_cluster.sasl_ssl_bootstrap_servers.split(",")
    config = ClusterConfig(
        name=name, bootstrap_servers=servers, security=security, request_timeout_seconds=REQUEST_TIMEOUT
    )
    collector = _collector(config, engine)
    collector.start()
    try:
        collector.run("metadata")
    finally:
        collector.stop()
    error = runs(engine, name)["metadata"]["error"]
    assert f"cluster '{name}'" in error and "SASL authentication error" in error, error
    log_dirs = LogDirClient(config)
    log_dirs.start()
    try:
        with pytest.raises((KafkaUnavailableError, KafkaRequestError), match=f"on cluster '{name}'"):
            log_dirs.describe([1])
    finally:
        log_dirs.close()
    # The broker saw an OAUTHBEARER token it could not parse as a JWT: the signed MSK token.
    server_log = secured_kafka_cluster.server_log(1).read_text(encoding="utf-8", errors="replace")
    assert "example-secret-not-real" not in server_log
