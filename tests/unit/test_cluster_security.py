"""The cluster `security` model for every mechanism, and how it reaches both client libraries:
wrong combinations refused with the fix, librdkafka and kafka-python configured from the one model,
tokens cached and refreshed before they expire, MSK IAM tokens signed with AWS credentials."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import ValidationError

from monitor.core.cluster_security import SaslMechanism, Security
from monitor.core.settings import ClusterConfig, load_settings
from monitor.kafka import client_config, kafka_python_options
from monitor.kafka.oauth import CachedTokens, KafkaPythonTokens, MskIamTokens, Token

ENDPOINT = "https://idp.example.com/oauth2/token"
OIDC: dict[str, Any] = {
    "protocol": "SASL_SSL",
    "sasl_mechanism": "OAUTHBEARER",
    "sasl_oauthbearer_token_endpoint_url": ENDPOINT,
    "sasl_oauthbearer_client_id": "kafka-health",
    "sasl_oauthbearer_client_secret": "oidc-client-secret-value",
}
MSK: dict[str, Any] = {"protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM", "aws_region": "eu-west-1"}
PLAIN: dict[str, Any] = {
    "protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "KEY", "sasl_password": "api-secret-1",
}  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {**OIDC, "sasl_oauthbearer_token_endpoint_url": None},
            "OAUTHBEARER needs sasl_oauthbearer_token_endpoint_url",
        ),
        ({**OIDC, "sasl_oauthbearer_client_secret": None}, "SASL_OAUTHBEARER_CLIENT_SECRET"),
        ({**OIDC, "sasl_password": "x"}, "sasl_password do not apply to sasl_mechanism OAUTHBEARER"),
        ({**OIDC, "sasl_oauthbearer_token_endpoint_url": "http://idp.example.com/token"}, "in the clear"),
        ({**OIDC, "sasl_oauthbearer_token_endpoint_url": "ftp://idp/token"}, "must be an https:// URL"),
        ({**PLAIN, "sasl_password": None}, "PLAIN needs sasl_password"),
        ({**PLAIN, "aws_region": "eu-west-1"}, "aws_region do not apply to sasl_mechanism PLAIN"),
        ({**PLAIN, "sasl_mechanism": None}, "needs sasl_mechanism"),
        ({**MSK, "aws_region": None}, "AWS_MSK_IAM needs aws_region"),
        ({**MSK, "protocol": "SASL_PLAINTEXT"}, "AWS_MSK_IAM needs protocol SASL_SSL"),
        ({**MSK, "aws_profile": "p", "aws_role_arn": "arn:aws:iam::123456789012:role/r"}, "not both"),
        ({**MSK, "aws_region": "Europe"}, "aws_region"),
        ({**MSK, "aws_role_arn": "role/monitor"}, "aws_role_arn"),
        ({**MSK, "sasl_username": "u"}, "sasl_username do not apply to sasl_mechanism AWS_MSK_IAM"),
        ({"protocol": "SSL", "sasl_oauthbearer_client_id": "x"}, "set but protocol is SSL"),
        ({"protocol": "PLAINTEXT", "aws_region": "eu-west-1"}, "set but protocol is PLAINTEXT"),
        ({**OIDC, "sasl_mechanism": "GSSAPI"}, "sasl_mechanism"),
    ],
)
def test_wrong_combinations_are_refused_with_the_fix(fields: dict[str, Any], problem: str) -> None:
    given = {key: value for key, value in fields.items() if value is not None}
    with pytest.raises(ValidationError, match=re.escape(problem)):
        Security(**given)


@pytest.mark.parametrize(
    "fields",
    [
        OIDC,
        {
            **OIDC,
            "protocol": "SASL_PLAINTEXT",
            "sasl_oauthbearer_token_endpoint_url": "http://127.0.0.1:8080/t",
        },
        {
            **OIDC,
            "sasl_oauthbearer_token_endpoint_url": "http://localhost/t",
            "sasl_oauthbearer_scope": "a b",
        },
        MSK,
        {**MSK, "aws_profile": "monitoring"},
        {**MSK, "aws_role_arn": "arn:aws:iam::123456789012:role/kafka-health"},
        PLAIN,
        {**PLAIN, "sasl_mechanism": "SCRAM-SHA-256"},
    ],
)
def test_each_mechanism_is_accepted_when_complete(fields: dict[str, Any]) -> None:
    security = Security(**fields)
    assert security.sasl_mechanism is not None
    for secret in ("oidc-client-secret-value", "api-secret-1"):
        assert secret not in repr(security)


def _cluster(**security: Any) -> ClusterConfig:
    return ClusterConfig(name="c1", bootstrap_servers=["b1:9093"], security=Security(**security))


def test_oidc_reaches_librdkafka_as_its_own_oidc_method_and_kafka_python_as_a_token_provider() -> None:
    cluster = _cluster(**OIDC, sasl_oauthbearer_scope="kafka")
    config = client_config(cluster)
    assert {k: v for k, v in config.items() if k.startswith("sasl.")} == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": ENDPOINT,
        "sasl.oauthbearer.client.id": "kafka-health",
        "sasl.oauthbearer.client.secret": "oidc-client-secret-value",
        "sasl.oauthbearer.scope": "kafka",
    }
    assert "oidc-client-secret-value" not in repr(config)
    assert config.secret_values() == ["oidc-client-secret-value"]
    options = kafka_python_options(cluster)
    assert options["sasl_mechanism"] == "OAUTHBEARER"
    provider = options["sasl_oauth_token_provider"]
    assert isinstance(provider, KafkaPythonTokens)
    assert "oidc-client-secret-value" not in repr(options)
    assert options.secret_values() == ["oidc-client-secret-value"]


def test_msk_iam_gives_both_clients_signed_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    _aws_credentials(monkeypatch)
    cluster = _cluster(**MSK)
    config = client_config(cluster)
    assert config["sasl.mechanism"] == "OAUTHBEARER"
    oauth_cb = config["oauth_cb"]
    assert callable(oauth_cb)
    token, expires_at = oauth_cb(None)
    provider = kafka_python_options(cluster)["sasl_oauth_token_provider"]
    assert isinstance(provider, KafkaPythonTokens)
    for value in (token, provider.token()):
        _inspect_msk_token(value, "eu-west-1")
    assert expires_at > 0


def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials botocore finds in the environment (and no file or instance metadata)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret-access-key-not-real")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)


def _inspect_msk_token(token: str, region: str) -> None:
    """An MSK IAM token: a SigV4 presigned `kafka-cluster:Connect` URL for the region, base64url."""
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    assert parts.hostname == f"kafka.{region}.amazonaws.com"
    assert query["Action"] == ["kafka-cluster:Connect"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Credential"][0].startswith("AKIAEXAMPLEKEYID0001/")
    assert f"/{region}/kafka-cluster/aws4_request" in query["X-Amz-Credential"][0]
    assert int(query["X-Amz-Expires"][0]) == 900
    assert "example-secret-access-key-not-real" not in url


def test_msk_iam_without_credentials_is_a_clear_error_naming_the_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _aws_credentials(monkeypatch)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    tokens = MskIamTokens("c1", Security(**MSK))
    with pytest.raises(
        Exception, match=r"cannot sign an AWS MSK IAM token for cluster 'c1'.*clusters\.c1\.security"
    ):
        tokens()


def test_a_token_is_kept_until_most_of_its_lifetime_is_gone_then_fetched_anew() -> None:
    now = [1000.0]
    issued: list[Token] = []

    def fetch() -> Token:
        issued.append(Token(f"t{len(issued)}", now[0] + 60, now[0]))
        return issued[-1]

    tokens = CachedTokens(fetch, clock=lambda: now[0])
    seen = []
    for step in (0, 10, 47.9, 48.0, 60, 95.9, 96.0):
        now[0] = 1000.0 + step
        seen.append(tokens.current().value)
    assert seen == ["t0", "t0", "t0", "t1", "t1", "t1", "t2"]
    assert tokens.fetches == 3
    assert "t2" not in repr(issued[-1]) and "t2" not in repr(tokens)


def test_the_readme_examples_are_valid_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("Ready `clusters:` entries", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "monitor.yaml").write_text(block, encoding="utf-8")
    for index, key in ((0, "SASL_PASSWORD"), (2, "SASL_PASSWORD"), (4, "SASL_OAUTHBEARER_CLIENT_SECRET")):
        monkeypatch.setenv(f"KAFKA_HEALTH_CLUSTERS__{index}__SECURITY__{key}", f"secret-{index}")
    monkeypatch.setenv(
        "KAFKA_HEALTH_CLUSTERS__3__SECURITY__SASL_PASSWORD", "Endpoint=sb://ns/;SharedAccessKey=k"
    )
    clusters = {c.name: c.security for c in load_settings(tmp_path / "monitor.yaml").clusters}
    assert {name: s.sasl_mechanism for name, s in clusters.items()} == {
        "confluent-prod": SaslMechanism.PLAIN, "msk-iam": SaslMechanism.AWS_MSK_IAM,
        "msk-scram": SaslMechanism.SCRAM_SHA_512, "eventhubs": SaslMechanism.PLAIN,
        "oidc-prod": SaslMechanism.OAUTHBEARER,
    }  # fmt: skip
    assert clusters["eventhubs"].sasl_username == "$ConnectionString"
