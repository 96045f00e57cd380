"""The secured listeners of the local cluster: a local CA, PEM key and trust stores, SCRAM users.

`kafka-health dev-cluster up --security sasl_ssl` gives every node, besides its PLAINTEXT
listener (which the brokers talk to each other on), two more on 127.0.0.1:

- SASL_SSL at `base_port + 200 + n - 1`: TLS, then SASL as the user `monitor` with PLAIN (its
  password in a JAAS file the broker reads), SCRAM-SHA-256 or SCRAM-SHA-512 (credentials written
  into the metadata when the storage is formatted, `--add-scram`), the same password for all three;
  and OAUTHBEARER when an OpenID provider is set (`use_oidc`, before `up`): the brokers validate
  the provider's JWTs against its JWKS (issuer, audience, expiry), and end every session when its
  token expires unless the client re-authenticates with a fresh one (KIP-368);
- SSL at `base_port + 300 + n - 1`: TLS that requires a client certificate signed by the local CA.

Everything lives under `home/security/`, made once and reused at every `up`:

    ca.pem            the local CA's certificate (the clients' and the brokers' trust store)
    broker.pem        the brokers' private key (PKCS#8, unencrypted) and certificate chain, for
                      127.0.0.1 and localhost: Kafka reads it as a PEM key store
    client-cert.pem   the monitor's client certificate (CN=monitor), signed by the CA
    client-key.pem    its private key, encrypted with the key passphrase (PKCS#8)
    secrets.json      the SASL password and the key passphrase (mode 0600)
    jaas.conf         the PLAIN user and password, for the brokers (mode 0600)
    oidc.json         the OpenID provider's issuer and the monitor's client secret (mode 0600;
                      only with `use_oidc`)
    clusters.yaml     every mechanism and listener as monitor.yaml `clusters:` entries (mode 0600)

Only the CA's certificate is kept: its key is dropped once the certificates are signed.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pydantic import SecretStr

from monitor.core.errors import DevEnvironmentError
from monitor.core.settings import ClusterConfig, SaslMechanism, Security, SecurityProtocol

SASL_SSL_PORT_OFFSET: Final = 200
SSL_PORT_OFFSET: Final = 300
SCRAM_USER: Final = "monitor"
SCRAM_MECHANISM: Final = SaslMechanism.SCRAM_SHA_512
SCRAM_MECHANISMS: Final = (SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512)
PASSWORD_MECHANISMS: Final = (SaslMechanism.PLAIN, *SCRAM_MECHANISMS)
OIDC_CLIENT_ID: Final = "kafka-health"
_VALIDATOR: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_OAUTH_JAAS: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
_REAUTH_MS: Final = 3_600_000  # positive: a session ends with its token unless re-authenticated
_VALIDITY: Final = datetime.timedelta(days=825)
_SCRAM_JAAS: Final = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
_FILES: Final = ("ca.pem", "broker.pem", "client-cert.pem", "client-key.pem", "secrets.json")


@dataclass(frozen=True, slots=True)
class OidcIssuer:
    """An OpenID provider the brokers trust: its issuer URL and the audience tokens must name."""

    issuer: str
    audience: str

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"


@dataclass(frozen=True, slots=True)
class DevSecrets:
    """The SCRAM password of `SCRAM_USER` and the passphrase of the client's private key."""

    scram_password: SecretStr
    key_passphrase: SecretStr


class DevSecurity:
    """The CA, certificates and secrets of one dev cluster under `directory`.

    The constructor touches nothing; `ensure()` makes whatever is missing (all of it, or nothing:
    a partial set from an interrupted run is made anew, as the CA key that signed it is gone).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker_key_store(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def client_certificate(self) -> Path:
        return self.directory / "client-cert.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client-key.pem"

    @property
    def secrets_file(self) -> Path:
        return self.directory / "secrets.json"

    @property
    def jaas_file(self) -> Path:
        return self.directory / "jaas.conf"

    @property
    def oidc_file(self) -> Path:
        return self.directory / "oidc.json"

    @property
    def clusters_file(self) -> Path:
        return self.directory / "clusters.yaml"

    @property
    def exists(self) -> bool:
        return all((self.directory / name).is_file() for name in _FILES)

    def ensure(self) -> DevSecrets:
        """Make the CA, certificates and secrets unless they all exist; return the secrets."""
        if not self.exists:
            self._create()
        found = self.secrets()
        self._write_jaas(found.scram_password)
        return found

    def secrets(self) -> DevSecrets:
        try:
            values = json.loads(self.secrets_file.read_text(encoding="utf-8"))
            return DevSecrets(SecretStr(values["scram_password"]), SecretStr(values["key_passphrase"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DevEnvironmentError(
                f"{self.secrets_file} is missing or unreadable ({type(exc).__name__}); run "
                "`kafka-health dev-cluster down --purge` and `up --security sasl_ssl` to make it anew"
            ) from None

    # -- broker side ------------------------------------------------------------------------

    def broker_properties(self) -> dict[str, str]:
        """The settings a node adds for its SASL_SSL and mutual-TLS listeners (named as their
        protocols, so `listener.name.ssl` is the mutual-TLS one).

        No secret is among them: the broker's key is unencrypted on disk (it is a throwaway
        key for 127.0.0.1), the SCRAM credentials are in the cluster metadata and the PLAIN
        password in the JAAS file (`jvm_options`).
        """
        issuer = self.oidc()
        mechanisms = [m.value for m in PASSWORD_MECHANISMS]
        properties = {
            f"listener.name.sasl_ssl.{m.value.lower()}.sasl.jaas.config": _SCRAM_JAAS
            for m in SCRAM_MECHANISMS
        }
        if issuer is not None:
            mechanisms.append(SaslMechanism.OAUTHBEARER.value)
            properties |= {
                "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": _OAUTH_JAAS,
                "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": _VALIDATOR,
                "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms": str(_REAUTH_MS),
                "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
                "sasl.oauthbearer.expected.issuer": issuer.issuer,
                "sasl.oauthbearer.expected.audience": issuer.audience,
                "sasl.oauthbearer.clock.skew.seconds": "1",
            }
        return {
            "sasl.enabled.mechanisms": ",".join(mechanisms),
            **properties,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_key_store),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "listener.name.ssl.ssl.client.auth": "required",
        }

    def _write_jaas(self, password: SecretStr) -> None:
        """The JAAS file with the PLAIN user, for the brokers (mode 0600)."""
        quoted = json.dumps(password.get_secret_value())
        login = (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required user_{SCRAM_USER}={quoted};"
        )
        _write_private(self.jaas_file, f"sasl_ssl.KafkaServer {{\n  {login}\n}};\n".encode())

    def jvm_options(self) -> list[str]:
        """The brokers' JVM options: the JAAS file of the PLAIN user (made by `ensure`), and the
        JWKS URL among the URLs Kafka (4.x) may fetch for OAUTHBEARER."""
        options = [f"-Djava.security.auth.login.config={self.jaas_file}"]
        issuer = self.oidc()
        if issuer is not None:
            options.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={issuer.jwks_url}")
        return options

    def format_arguments(self) -> list[str]:
        """The `kafka-storage format` arguments that create the SCRAM user, for both hashes."""
        password = self.secrets().scram_password.get_secret_value()
        arguments: list[str] = []
        for mechanism in SCRAM_MECHANISMS:
            arguments += ["--add-scram", f"{mechanism.value}=[name={SCRAM_USER},password={password}]"]
        return arguments

    # -- the OpenID provider ----------------------------------------------------------------

    def use_oidc(self, issuer: OidcIssuer) -> None:
        """Trust `issuer` for OAUTHBEARER from the next `up`; a client secret is made once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = self._oidc_values()
        secret = existing.get("client_secret") or secrets.token_urlsafe(18)
        values = {"issuer": issuer.issuer, "audience": issuer.audience, "client_secret": secret}
        _write_private(self.oidc_file, json.dumps(values).encode("utf-8"))

    def oidc(self) -> OidcIssuer | None:
        values = self._oidc_values()
        return OidcIssuer(values["issuer"], values["audience"]) if values else None

    def _oidc_values(self) -> dict[str, str]:
        try:
            values = json.loads(self.oidc_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return values if isinstance(values, dict) else {}

    # -- client side ------------------------------------------------------------------------

    def sasl_ssl(
        self, password: SecretStr | None = None, mechanism: SaslMechanism = SCRAM_MECHANISM
    ) -> Security:
        """How a client reaches the SASL_SSL listener with a password mechanism (`password`
        replaces the real one)."""
        return Security(
            protocol=SecurityProtocol.SASL_SSL,
            sasl_mechanism=mechanism,
            sasl_username=SCRAM_USER,
            sasl_password=password or self.secrets().scram_password,
            ssl_ca_location=self.ca_file,
        )

    def oauthbearer(self, token_endpoint: str | None = None) -> Security:
        """How a client reaches the SASL_SSL listener with OAUTHBEARER tokens from the provider
        (`token_endpoint` replaces the provider's). Raises DevEnvironmentError without `use_oidc`."""
        issuer, values = self.oidc(), self._oidc_values()
        if issuer is None:
            raise DevEnvironmentError(
                f"{self.oidc_file} is missing: the cluster was made without an OpenID provider"
            )
        return Security(
            protocol=SecurityProtocol.SASL_SSL,
            sasl_mechanism=SaslMechanism.OAUTHBEARER,
            sasl_oauthbearer_token_endpoint_url=token_endpoint or issuer.token_endpoint,
            sasl_oauthbearer_client_id=OIDC_CLIENT_ID,
            sasl_oauthbearer_client_secret=SecretStr(values["client_secret"]),
            ssl_ca_location=self.ca_file,
        )

    def mutual_tls(self, certificate: Path | None = None, key: Path | None = None,
                   key_passphrase: SecretStr | None = None) -> Security:  # fmt: skip
        """How a client reaches the mutual-TLS listener (by default with the CA's client cert)."""
        return Security(
            protocol=SecurityProtocol.SSL,
            ssl_ca_location=self.ca_file,
            ssl_certificate_location=certificate or self.client_certificate,
            ssl_key_location=key or self.client_key,
            ssl_key_password=key_passphrase or self.secrets().key_passphrase,
        )

    def client_securities(self) -> dict[str, Security]:
        """Every way a client can reach the secured listeners, by a short name: `sasl-ssl`
        (SCRAM-SHA-512), `scram-sha-256`, `plain`, `oauthbearer` (with a provider) and `mtls`."""
        found = {
            "sasl-ssl": self.sasl_ssl(),
            "scram-sha-256": self.sasl_ssl(mechanism=SaslMechanism.SCRAM_SHA_256),
            "plain": self.sasl_ssl(mechanism=SaslMechanism.PLAIN),
        }
        if self.oidc() is not None:
            found["oauthbearer"] = self.oauthbearer()
        return {**found, "mtls": self.mutual_tls()}

    def write_clusters_file(self, name: str, sasl_ssl_servers: list[str], ssl_servers: list[str]) -> Path:
        """A monitor.yaml `clusters:` list for every mechanism, secrets included (mode 0600)."""
        clusters = []
        for kind, security in self.client_securities().items():
            servers = ssl_servers if kind == "mtls" else sasl_ssl_servers
            entry = ClusterConfig(name=f"{name}-{kind}", bootstrap_servers=servers, security=security)
            dumped = entry.security.model_dump(mode="json", exclude_none=True)
            for key in ("sasl_password", "sasl_oauthbearer_client_secret", "ssl_key_password"):
                secret = getattr(entry.security, key)
                if secret is not None:
                    dumped[key] = secret.get_secret_value()
            clusters.append({"name": entry.name, "bootstrap_servers": servers, "security": dumped})
        text = "# Made by `kafka-health dev-cluster up --security sasl_ssl`; it holds secrets.\n"
        text += yaml.safe_dump({"clusters": clusters}, sort_keys=False)
        _write_private(self.clusters_file, text.encode("utf-8"))
        return self.clusters_file

    # -- making the files -------------------------------------------------------------------

    def _create(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka-health dev CA")])
        ca_cert = (
            _builder(ca_name, ca_name, ca_key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        broker_key = ec.generate_private_key(ec.SECP256R1())
        broker_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka-health dev broker")])
        broker_cert = (
            _builder(broker_name, ca_name, broker_key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=False), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        client_key = ec.generate_private_key(ec.SECP256R1())
        client_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SCRAM_USER)])
        client_cert = (
            _builder(client_name, ca_name, client_key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        passphrase = secrets.token_urlsafe(18)
        pem = serialization.Encoding.PEM
        pkcs8 = serialization.PrivateFormat.PKCS8
        _write_private(
            self.secrets_file,
            json.dumps({"scram_password": secrets.token_urlsafe(18), "key_passphrase": passphrase}).encode(),
        )
        _write_private(
            self.broker_key_store,
            broker_key.private_bytes(pem, pkcs8, serialization.NoEncryption())
            + broker_cert.public_bytes(pem)
            + ca_cert.public_bytes(pem),
        )
        encrypted = serialization.BestAvailableEncryption(passphrase.encode("utf-8"))
        _write_private(self.client_key, client_key.private_bytes(pem, pkcs8, encrypted))
        self.client_certificate.write_bytes(client_cert.public_bytes(pem))
        self.ca_file.write_bytes(ca_cert.public_bytes(pem))


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey, now: datetime.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _VALIDITY)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign, crl_sign=cert_sign,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` readable by its owner only (the file is never world-readable, even briefly)."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
