"""kafka-python's log of a TLS handshake a broker refuses (an untrusted client certificate): lines
that name the cluster, without a traceback or a secret, and the one failure the monitor reports
itself. The "broker" is a TLS server in this process that requires a client certificate from its
own CA and closes the connection otherwise, as a Kafka TLS listener with ssl.client.auth=required
does."""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from pydantic import SecretStr

from monitor.core.errors import KafkaUnavailableError
from monitor.core.settings import ClusterConfig, Security, SecurityProtocol
from monitor.kafka.logdirs import LogDirClient
from monitor.kafka.pylog import asking, route_kafka_python_log
from tests.fixtures.logs import RootRecords

PASSPHRASE = "phrase-not-to-be-logged"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """(the port of a TLS server that trusts only its own CA's client certificates, its CA file)."""
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    context.verify_mode = ssl.CERT_REQUIRED
    ca.configure_trust(context)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    with context.wrap_socket(conn, server_side=True) as tls:
                        tls.recv(16)
                except (ssl.SSLError, OSError):
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    try:
        yield server.getsockname()[1], ca_file
    finally:
        stop.set()
        thread.join(5)
        server.close()


def _untrusted_certificate(directory: Path) -> tuple[Path, Path]:
    issued = trustme.CA().issue_cert("monitor")
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    key_file, cert_file = directory / "key.pem", directory / "cert.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(PASSPHRASE.encode()),
        )
    )
    issued.cert_chain_pems[0].write_to_path(str(cert_file))
    return cert_file, key_file


def test_a_refused_handshake_is_logged_naming_the_cluster_without_traceback_or_secret(
    broker: tuple[int, Path], tmp_path: Path
) -> None:
    port, ca_file = broker
    cert, key = _untrusted_certificate(tmp_path)
    security = Security(
        protocol=SecurityProtocol.SSL,
        ssl_ca_location=ca_file,
        ssl_certificate_location=cert,
        ssl_key_location=key,
        ssl_key_password=SecretStr(PASSPHRASE),
        ssl_endpoint_identification=False,
    )
    cluster = ClusterConfig(
        name="tls-eu", bootstrap_servers=[f"127.0.0.1:{port}"], security=security, request_timeout_seconds=2
    )
    client = LogDirClient(cluster)
    with RootRecords() as logged:
        client.start()
        try:
            with pytest.raises(KafkaUnavailableError) as failed:
                client.describe([1])
        finally:
            client.close()

    # The monitor's error names the cluster and what to check.
    assert "cluster 'tls-eu'" in str(failed.value) and "clusters.tls-eu.security" in str(failed.value)
    # kafka-python's own lines: re-logged naming the cluster, at DEBUG for the refused
    # connections, none with a traceback, none with the passphrase.
    relogged = [r for r in logged.records if r.name == "monitor.kafka.python"]
    assert relogged, "kafka-python logged the refused connections"
    assert all("kafka-python on cluster 'tls-eu'" in r.getMessage() for r in relogged), [
        r.getMessage() for r in relogged if "tls-eu" not in r.getMessage()
    ]
    refused = [r for r in relogged if "UNKNOWN_CA" in r.getMessage() or "EOF" in r.getMessage()]
    assert refused and all(r.levelno == logging.DEBUG for r in refused), "the run reports the failure"
    assert not [r for r in logged.records if r.name.startswith("kafka")], "nothing logged unrouted"
    assert not [r for r in logged.records if r.exc_info], "no traceback"
    assert all(PASSPHRASE not in r.getMessage() for r in logged.records)


def _relogged(emit: Callable[[], object]) -> dict[str, int]:
    """The level the monitor re-logs each of kafka-python's records at, by message, for the
    records `emit` makes while asking on cluster 'eu'."""
    route_kafka_python_log("eu", [])
    asking("eu")
    with RootRecords() as logged:
        emit()
    return {r.getMessage(): r.levelno for r in logged.records if r.name == "monitor.kafka.python"}


def test_a_broker_that_cannot_be_reached_is_not_an_error_in_the_log() -> None:
    """kafka-python's metadata refresh logs at ERROR when a broker stops (refused, or its request
    cancelled as the connection closed under it); the monitor reports a stopped broker as a
    finding, so the line goes to DEBUG. Other errors keep their level."""
    from kafka.errors import Cancelled, KafkaConnectionError, UnknownError

    source = logging.getLogger("kafka.cluster")

    def emit() -> None:
        source.error("Metadata refresh: failed %s", KafkaConnectionError("111 ECONNREFUSED"))
        source.error("Metadata refresh: failed %s", Cancelled())
        source.error("Metadata refresh loop error: %s", UnknownError("broken"))

    assert _relogged(emit) == {
        "kafka-python on cluster 'eu': Metadata refresh: failed KafkaConnectionError: 111 ECONNREFUSED": (
            logging.DEBUG
        ),
        "kafka-python on cluster 'eu': Metadata refresh: failed Cancelled": logging.DEBUG,
        "kafka-python on cluster 'eu': Metadata refresh loop error: [Error -1] UnknownError: broken": (
            logging.ERROR
        ),
    }


def test_the_library_s_own_info_lines_are_debug() -> None:
    """kafka-python 3 logs the start and stop of each client's metadata refresh and every metadata
    update at INFO: a dozen lines at each start, none an operator acts on."""
    source = logging.getLogger("kafka.cluster")

    def emit() -> None:
        source.info("Updated metadata: %s", "ClusterMetadata(brokers: 1, topics: 0, coordinators: 0)")
        logging.getLogger("kafka.client").info("Starting metadata refresh loop")
        source.warning("Topic %s is not available during auto-create initialization", "t")

    assert _relogged(emit) == {
        "kafka-python on cluster 'eu': Updated metadata: ClusterMetadata(brokers: 1, topics: 0, coordinators: 0)": (
            logging.DEBUG
        ),
        "kafka-python on cluster 'eu': Starting metadata refresh loop": logging.DEBUG,
        "kafka-python on cluster 'eu': Topic t is not available during auto-create initialization": (
            logging.WARNING
        ),
    }
