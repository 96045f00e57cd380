"""The secured dev cluster's files and broker settings, and the error a rejected password or
certificate becomes. Nothing here starts a JVM or connects to a broker."""

from __future__ import annotations

import ipaddress
import json
import stat
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import SecretStr

from monitor.core.errors import DevEnvironmentError, KafkaAuthenticationError, KafkaUnavailableError
from monitor.core.settings import ClusterConfig, DevKafkaConfig, SaslMechanism, Security, SecurityProtocol
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.kafka_security import SCRAM_USER, DevSecurity, OidcIssuer
from monitor.devtools.kafka_state import new_cluster_id
from monitor.devtools.oidc_provider import DevOidcProvider
from monitor.kafka import KafkaAdmin
from monitor.kafka.translate import is_security_failure

PASSWORD = "Sup3r-s3cret-pa55word"


def properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def secured_cluster(tmp_path: Path, security: str = "sasl_ssl") -> DevKafkaCluster:
    config = DevKafkaConfig(nodes=1, base_port=29092, security=security)  # type: ignore[arg-type]
    return DevKafkaCluster(config, tmp_path / "home", tmp_path / "cache")


def test_a_secured_node_has_sasl_ssl_and_mutual_tls_listeners_beside_plaintext(tmp_path: Path) -> None:
    cluster = secured_cluster(tmp_path)
    props = properties(cluster.server_properties(1))

    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,SASL_SSL://127.0.0.1:29292,SSL://127.0.0.1:29392,"
        "CONTROLLER://127.0.0.1:29192"
    )
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,SASL_SSL://127.0.0.1:29292,SSL://127.0.0.1:29392"
    )
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.security.protocol.map"].split(",")[-2:] == ["SASL_SSL:SASL_SSL", "SSL:SSL"]
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    for scram in ("scram-sha-256", "scram-sha-512"):
        assert "ScramLoginModule required" in props[f"listener.name.sasl_ssl.{scram}.sasl.jaas.config"]
    assert not [key for key in props if "oauthbearer" in key], "no OpenID provider was set"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert (props["ssl.keystore.type"], props["ssl.truststore.type"]) == ("PEM", "PEM")
    assert props["ssl.keystore.location"] == str(cluster.security.broker_key_store)
    assert props["ssl.truststore.location"] == str(cluster.security.ca_file)
    assert not [key for key in props if "password" in key], "no secret goes into server.properties"
    assert (cluster.sasl_ssl_bootstrap_servers, cluster.ssl_bootstrap_servers) == (
        "127.0.0.1:29292",
        "127.0.0.1:29392",
    )
    assert [(n.sasl_ssl_port, n.ssl_port) for n in cluster.status()] == [(29292, 29392)]


def test_a_plaintext_node_has_no_secured_listener(tmp_path: Path) -> None:
    cluster = secured_cluster(tmp_path, "plaintext")
    text = cluster.server_properties(1)

    assert "SASL_SSL" not in text and "ssl." not in text
    assert [(n.sasl_ssl_port, n.ssl_port) for n in cluster.status()] == [(None, None)]


def test_an_unknown_security_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="security"):
        DevKafkaConfig(security="kerberos")  # type: ignore[arg-type]


def test_a_security_mismatch_asks_to_purge(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    state = {"cluster_id": new_cluster_id(), "version": "4.1.2", "nodes": 1, "base_port": 29092}
    (home / "cluster.json").write_text(json.dumps(state))  # made before `security` was recorded

    with pytest.raises(DevEnvironmentError, match="made with security plaintext, not sasl_ssl") as caught:
        secured_cluster(tmp_path).up(nodes=1)

    assert "--security plaintext" in str(caught.value) and "down --purge" in str(caught.value)


def test_the_ca_certificates_and_secrets(tmp_path: Path) -> None:
    security = DevSecurity(tmp_path / "security")
    assert not security.exists and not (tmp_path / "security").exists()  # the constructor makes nothing
    secrets = security.ensure()
    passphrase = secrets.key_passphrase.get_secret_value().encode()

    for private in (security.secrets_file, security.broker_key_store, security.client_key):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    ca = x509.load_pem_x509_certificate(security.ca_file.read_bytes())
    broker_pem = security.broker_key_store.read_bytes()
    assert broker_pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Kafka's PEM store reads
    broker = x509.load_pem_x509_certificates(broker_pem)[0]
    broker.verify_directly_issued_by(ca)
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    client = x509.load_pem_x509_certificate(security.client_certificate.read_bytes())
    client.verify_directly_issued_by(ca)
    assert client.subject.rfc4514_string() == f"CN={SCRAM_USER}"
    # The client key is encrypted with the passphrase and opens with it only.
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(security.client_key.read_bytes(), password=None)
    key = serialization.load_pem_private_key(security.client_key.read_bytes(), password=passphrase)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.public_key() == client.public_key()

    # Made once: a second `ensure` keeps the CA and the secrets.
    ca_bytes = security.ca_file.read_bytes()
    assert security.ensure() == secrets
    assert security.ca_file.read_bytes() == ca_bytes
    password = secrets.scram_password.get_secret_value()
    assert security.format_arguments() == [
        "--add-scram", f"SCRAM-SHA-256=[name={SCRAM_USER},password={password}]",
        "--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={password}]",
    ]  # fmt: skip
    # The PLAIN user, in the JAAS file the brokers read (never in server.properties).
    assert stat.S_IMODE(security.jaas_file.stat().st_mode) == 0o600
    assert f'user_{SCRAM_USER}="{password}";' in security.jaas_file.read_text()
    assert security.jvm_options() == [f"-Djava.security.auth.login.config={security.jaas_file}"]


def test_the_clusters_file_is_valid_monitor_configuration(tmp_path: Path) -> None:
    security = DevSecurity(tmp_path / "security")
    secrets = security.ensure()

    path = security.write_clusters_file("local", ["127.0.0.1:29292"], ["127.0.0.1:29392"])

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    entries = [ClusterConfig(**entry) for entry in yaml.safe_load(path.read_text())["clusters"]]
    by_name = {entry.name: entry for entry in entries}
    assert list(by_name) == ["local-sasl-ssl", "local-scram-sha-256", "local-plain", "local-mtls"]
    sasl, mtls = by_name["local-sasl-ssl"], by_name["local-mtls"]
    assert sasl.bootstrap_servers == ["127.0.0.1:29292"]
    assert sasl.security == security.sasl_ssl()
    assert sasl.security.sasl_password == secrets.scram_password
    assert by_name["local-plain"].security.sasl_mechanism == SaslMechanism.PLAIN
    assert by_name["local-scram-sha-256"].security.sasl_mechanism == SaslMechanism.SCRAM_SHA_256
    assert (mtls.name, mtls.security.protocol) == ("local-mtls", SecurityProtocol.SSL)
    assert mtls.security == security.mutual_tls()


def test_an_openid_provider_adds_oauthbearer_validated_against_its_jwks(tmp_path: Path) -> None:
    cluster = secured_cluster(tmp_path)
    issuer = OidcIssuer("http://127.0.0.1:46090/kafka", "kafka-broker")
    with pytest.raises(DevEnvironmentError, match="without an OpenID provider"):
        cluster.security.oauthbearer()
    cluster.security.use_oidc(issuer)
    props = properties(cluster.server_properties(1))

    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    assert props["listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class"].endswith(
        "OAuthBearerValidatorCallbackHandler"
    )
    assert props["sasl.oauthbearer.jwks.endpoint.url"] == "http://127.0.0.1:46090/kafka/jwks"
    assert props["sasl.oauthbearer.expected.issuer"] == "http://127.0.0.1:46090/kafka"
    assert props["sasl.oauthbearer.expected.audience"] == "kafka-broker"
    assert int(props["listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms"]) > 0
    assert "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=http://127.0.0.1:46090/kafka/jwks" in (
        cluster.java_command(1)
    )
    client = cluster.security.oauthbearer()
    assert client.sasl_oauthbearer_token_endpoint_url == "http://127.0.0.1:46090/kafka/token"
    assert client.sasl_oauthbearer_client_secret is not None
    assert stat.S_IMODE(cluster.security.oidc_file.stat().st_mode) == 0o600
    # The client secret is made once: the next `use_oidc` keeps it.
    cluster.security.use_oidc(issuer)
    assert cluster.security.oauthbearer() == client


def test_a_missing_secrets_file_says_how_to_start_afresh(tmp_path: Path) -> None:
    with pytest.raises(DevEnvironmentError, match="down --purge"):
        DevSecurity(tmp_path).secrets()


# -- a rejected password or certificate -------------------------------------------------------------


def _admin() -> KafkaAdmin:
    security = Security(
        protocol=SecurityProtocol.SASL_SSL, sasl_mechanism="SCRAM-SHA-512", sasl_username="monitor",
        sasl_password=SecretStr(PASSWORD),
    )  # fmt: skip
    return KafkaAdmin(ClusterConfig(name="prod", bootstrap_servers=["b1:9093"], security=security))


def test_a_rejected_password_during_a_request_is_an_authentication_error() -> None:
    admin = _admin()
    started = KafkaException(KafkaError(KafkaError._TRANSPORT))

    with pytest.raises(KafkaAuthenticationError) as caught, admin._call("list topics"):
        admin._client_error(KafkaError(KafkaError._AUTHENTICATION, f"SASL authentication error ({PASSWORD})"))
        raise started

    message = str(caught.value)
    assert message.startswith("cannot list topics on cluster 'prod': the brokers rejected the client's")
    assert "SASL authentication error" in message and "check clusters.prod.security" in message
    assert PASSWORD not in message
    assert isinstance(caught.value, KafkaUnavailableError)  # retried at the next cycle, like no answer


def test_a_rejection_before_the_request_started_does_not_explain_it() -> None:
    admin = _admin()
    admin._client_error(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error"))
    time.sleep(0.01)

    with pytest.raises(KafkaUnavailableError) as caught, admin._call("list topics"):
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    assert not isinstance(caught.value, KafkaAuthenticationError)


@pytest.mark.parametrize(
    ("code", "text", "rejected"),
    [
        (KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials", True),
        (KafkaError._SSL, "certificate verify failed", True),
        (
            KafkaError._TRANSPORT,
            "Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate",
            True,
        ),
        (KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:9093 failed: Connection refused", False),
        (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down", False),
    ],
)
def test_which_client_errors_are_rejections(code: int, text: str, rejected: bool) -> None:
    assert is_security_failure(KafkaError(code, text)) is rejected


# -- the local OpenID provider ------------------------------------------------------------------

PROVIDER_LOG = """\
2026-11-28 18:04:28 [nioEventLoopGroup-3-1] DEBUG no.nav...OAuth2HttpRequestHandler - handle token request OAuth2HttpRequest(headers=Host: 127.0.0.1:46090
Accept: application/json
Authorization: ██
, method=POST, originalUrl=http://127.0.0.1:46090/kafka/token, body=grant_type=client_credentials)
2026-11-28 18:04:30 [nioEventLoopGroup-3-4] DEBUG no.nav...CorsInterceptor - intercept response
2026-11-28 18:04:35 [nioEventLoopGroup-3-3] DEBUG no.nav...OAuth2HttpRequestHandler - handle token request OAuth2HttpRequest(headers=Host: 127.0.0.1:46090
User-Agent: python-httpx/0.28.1
Authorization: ██
, method=POST, originalUrl=http://127.0.0.1:46090/kafka/token, body=grant_type=client_credentials)
"""


def test_the_openid_provider_issues_short_tokens_for_the_brokers_and_logs_each_request(
    tmp_path: Path,
) -> None:
    provider = DevOidcProvider(tmp_path / "oidc", tmp_path / "cache", 46090, token_seconds=15)
    assert provider.issuer == OidcIssuer("http://127.0.0.1:46090/kafka", "kafka-broker")
    (callback,) = provider.config()["tokenCallbacks"]  # type: ignore[misc]
    assert callback["tokenExpiry"] == 15
    assert callback["requestMappings"][0]["claims"] == {"sub": "${clientId}", "aud": ["kafka-broker"]}
    assert provider.token_requests() == [] and provider.running_pid() is None  # nothing started
    provider.directory.mkdir()
    provider.log_path.write_text(PROVIDER_LOG, encoding="utf-8")
    requests = provider.token_requests()
    assert [(r.at.second, r.user_agent) for r in requests] == [(28, ""), (35, "python-httpx/0.28.1")]
    with pytest.raises(ValueError, match="token_seconds"):
        DevOidcProvider(tmp_path, tmp_path, 46090, token_seconds=1)
