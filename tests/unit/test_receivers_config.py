"""Receiver configuration: every kind parses, every mistake is named with its fix, and secrets
come from the environment or a file, are read when the receiver is built, and never show."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from monitor.alert.receivers import KINDS, ReceiverConfig, build_receiver, parse_receiver
from monitor.alert.receivers.console import ConsoleReceiverConfig
from monitor.alert.receivers.email import EmailReceiverConfig
from monitor.alert.receivers.pagerduty import PagerDutyReceiverConfig
from monitor.alert.receivers.slack import SlackReceiverConfig
from monitor.alert.receivers.webhook import WebhookReceiverConfig
from monitor.alert.render import Templates
from monitor.core.errors import ConfigError
from tests.fixtures.receivers import EXTERNAL_URL, ROUTING_KEY, SLACK_TOKEN, SMTP_PASSWORD

SECRETS = (SLACK_TOKEN, SMTP_PASSWORD, ROUTING_KEY, "Bearer hook-SECRET")

EXAMPLES: dict[str, dict[str, Any]] = {
    "slack": {"name": "team-slack", "slack": {"channel": "#kafka-alerts", "token_env": "SLACK_BOT_TOKEN"}},
    "email": {
        "name": "oncall-email",
        "email": {
            "to": ["kafka-oncall@example.com"],
            "from": "kafka-health@example.com",
            "smarthost": "smtp.example.com:587",
            "username": "kafka-health",
            "password_env": "SMTP_PASSWORD",
        },
    },
    "pagerduty": {"name": "pager", "pagerduty": {"routing_key_env": "PAGERDUTY_ROUTING_KEY"}},
    "webhook": {
        "name": "chatops",
        "webhook": {
            "url": "https://hooks.example.com/kafka",
            "headers": {"X-Team": "kafka"},
            "headers_env": {"Authorization": "CHATOPS_AUTHORIZATION"},
        },
    },
    "console": {"name": "inbox", "console": {"path": "var/notifications.jsonl"}},
    "alertmanager": {
        "name": "team-alertmanager",
        "alertmanager": {
            "url": "http://alertmanager:9093",
            "ends_after": "4h30m",
            "extra_labels": {"source": "kh"},
        },
    },
}


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", SLACK_TOKEN)
    monkeypatch.setenv("SMTP_PASSWORD", SMTP_PASSWORD)
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", ROUTING_KEY)
    monkeypatch.setenv("CHATOPS_AUTHORIZATION", "Bearer hook-SECRET")


def errors_of(data: dict[str, Any]) -> list[str]:
    """Each problem as `loc: message`, the way the routing loader reports them."""
    with pytest.raises((ValidationError, ValueError)) as raised:
        parse_receiver(data)
    if isinstance(raised.value, ValidationError):
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in raised.value.errors()]
    return [str(raised.value)]


def test_every_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(KINDS)


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("slack", SlackReceiverConfig),
        ("email", EmailReceiverConfig),
        ("pagerduty", PagerDutyReceiverConfig),
        ("webhook", WebhookReceiverConfig),
        ("console", ConsoleReceiverConfig),
    ],
)
def test_each_kind_parses_to_its_model(kind: str, model: type[BaseModel]) -> None:
    config = parse_receiver(EXAMPLES[kind])
    assert isinstance(config, model)
    assert config.kind == kind
    assert config.name == EXAMPLES[kind]["name"]


def test_defaults() -> None:
    slack = parse_receiver(EXAMPLES["slack"])
    assert isinstance(slack, SlackReceiverConfig)
    assert slack.slack.base_url == "https://slack.com/api/"
    assert slack.slack.timeout == 10
    pager = parse_receiver(EXAMPLES["pagerduty"])
    assert isinstance(pager, PagerDutyReceiverConfig)
    assert pager.pagerduty.url == "https://events.pagerduty.com/v2/enqueue"
    assert pager.pagerduty.source == "kafka-health"
    email = parse_receiver(EXAMPLES["email"])
    assert isinstance(email, EmailReceiverConfig)
    assert (email.email.starttls, email.email.host, email.email.port) == (True, "smtp.example.com", 587)
    assert email.email.sender == "kafka-health@example.com"
    console = parse_receiver({"name": "inbox", "console": None})
    assert isinstance(console, ConsoleReceiverConfig)
    assert console.console.path is None


def test_base_url_gets_its_trailing_slash() -> None:
    config = parse_receiver(
        {"name": "s", "slack": {"channel": "#c", "token_env": "T", "base_url": "http://127.0.0.1:9/api"}}
    )
    assert isinstance(config, SlackReceiverConfig)
    assert config.slack.base_url == "http://127.0.0.1:9/api/"


def test_the_union_works_as_a_field_type() -> None:
    class Routing(BaseModel):
        receivers: list[ReceiverConfig]

    parsed = Routing.model_validate({"receivers": list(EXAMPLES.values())})
    assert [r.kind for r in parsed.receivers] == list(KINDS)
    with pytest.raises(ValidationError, match="receiver needs one kind key besides name"):
        Routing.model_validate({"receivers": [{"name": "x"}]})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "x"}, "receiver needs one kind key besides name: one of slack, email"),
        ({"name": "x", "slak": {}}, "did you mean 'slack' instead of 'slak'?"),
        (
            {"name": "x", "slack": {"channel": "#c", "token_env": "T"}, "console": {}},
            "receiver has slack and console: give each kind its own receiver",
        ),
        ({"name": "bad name!", "console": {}}, "name: Value error, receiver name 'bad name!' must start"),
        ({"name": "x", "slack": {"channel": "#c"}}, "the bot token is missing: set token_env"),
        (
            {"name": "x", "slack": {"channel": "#c", "token_env": "T", "token_file": "/t"}},
            "give token_env or token_file, not both",
        ),
        ({"name": "x", "slack": {"channel": "#c", "token_env": "T", "colour": "red"}}, "slack.colour: Extra"),
        (
            {"name": "x", "slack": {"channel": "#c", "token_env": "T", "timeout": 0}},
            "slack.timeout: Input should be",
        ),
        ({"name": "x", "webhook": {"url": "ftp://example.com"}}, "must be an http:// or https:// URL"),
        (
            {
                "name": "x",
                "webhook": {"url": "https://h.example.com", "headers": {"Authorization": "Bearer x"}},
            },
            "header Authorization looks like a credential; give it through headers_env",
        ),
        (
            {
                "name": "x",
                "webhook": {"url": "https://h", "headers": {"X-A": "1"}, "headers_env": {"x-a": "A"}},
            },
            "header x-a is in both headers and headers_env",
        ),
        (
            {"name": "x", "email": {"to": ["a@example.com"], "from": "b@example.com", "smarthost": "smtp"}},
            "smarthost 'smtp' must be host:port",
        ),
        (
            {"name": "x", "email": {"to": [], "from": "b@example.com", "smarthost": "smtp:25"}},
            "email.to: List should have at least 1 item",
        ),
        (
            {
                "name": "x",
                "email": {"to": ["not an address"], "from": "b@example.com", "smarthost": "smtp:25"},
            },
            "'not an address' is not an email address",
        ),
        (
            {
                "name": "x",
                "email": {
                    "to": ["a@example.com"],
                    "from": "b@example.com",
                    "smarthost": "smtp:25",
                    "starttls": False,
                    "username": "u",
                    "password_env": "P",
                },
            },
            "the password would cross the network in clear",
        ),
        (
            {
                "name": "x",
                "email": {
                    "to": ["a@example.com"],
                    "from": "b@example.com",
                    "smarthost": "smtp:25",
                    "password_env": "P",
                },
            },
            "a password is set without a username",
        ),
        ({"name": "x", "pagerduty": {}}, "the integration's routing key is missing"),
    ],
)
def test_mistakes_are_named_with_their_fix(data: dict[str, Any], expected: str) -> None:
    problems = errors_of(data)
    assert any(expected in p for p in problems), problems


def test_a_secret_pasted_into_an_env_key_is_not_echoed() -> None:
    data = {"name": "x", "slack": {"channel": "#c", "token_env": SLACK_TOKEN}}
    with pytest.raises(ValidationError) as raised:
        parse_receiver(data)
    assert "must be the name of an environment variable" in str(raised.value)
    assert SLACK_TOKEN not in str(raised.value)
    assert SLACK_TOKEN not in repr(raised.value)


def test_not_a_mapping() -> None:
    with pytest.raises(ValueError, match="a receiver must be a mapping"):
        parse_receiver(["slack"])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Secrets


def test_a_missing_token_env_var_names_the_receiver_the_key_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    with pytest.raises(ConfigError) as raised:
        build_receiver(parse_receiver(EXAMPLES["slack"]), Templates(EXTERNAL_URL))
    message = str(raised.value)
    assert "receiver 'team-slack'" in message
    assert "slack.token_env: environment variable SLACK_BOT_TOKEN is not set or empty" in message
    assert "export it with the Slack bot token" in message
    assert "or use slack.token_file" in message


def test_an_empty_env_var_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", "  ")
    with pytest.raises(ConfigError, match="PAGERDUTY_ROUTING_KEY is not set or empty"):
        build_receiver(parse_receiver(EXAMPLES["pagerduty"]), Templates(EXTERNAL_URL))


def test_a_missing_header_env_var_names_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATOPS_AUTHORIZATION", raising=False)
    with pytest.raises(ConfigError, match=r"webhook.headers_env.Authorization: environment variable"):
        build_receiver(parse_receiver(EXAMPLES["webhook"]), Templates(EXTERNAL_URL))


def test_secret_files_are_read_and_stripped(tmp_path: Path) -> None:
    token_file = tmp_path / "slack-token"
    token_file.write_text(SLACK_TOKEN + "\n")
    data = {"name": "s", "slack": {"channel": "#c", "token_file": str(token_file)}}
    receiver = build_receiver(parse_receiver(data), Templates(EXTERNAL_URL))
    assert receiver._token.get_secret_value() == SLACK_TOKEN  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "cannot read .*: No such file or directory; check the path"), ("\n", "is empty; write the")],
)
def test_unusable_secret_files(tmp_path: Path, content: str | None, expected: str) -> None:
    key_file = tmp_path / "routing-key"
    if content is not None:
        key_file.write_text(content)
    data = {"name": "pager", "pagerduty": {"routing_key_file": str(key_file)}}
    with pytest.raises(ConfigError, match=expected) as raised:
        build_receiver(parse_receiver(data), Templates(EXTERNAL_URL))
    assert "pagerduty.routing_key_file" in str(raised.value)
    assert "receiver 'pager'" in str(raised.value)


def test_an_unloadable_ca_file_stops_the_build(tmp_path: Path, secrets_in_env: None) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    data = {**EXAMPLES["email"], "email": {**EXAMPLES["email"]["email"], "tls_ca_file": str(bad)}}
    with pytest.raises(ConfigError, match=r"email\.tls_ca_file: cannot load"):
        build_receiver(parse_receiver(data), Templates(EXTERNAL_URL))


def test_secrets_never_show_in_repr_str_or_logs(
    secrets_in_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    templates = Templates(EXTERNAL_URL)
    for data in EXAMPLES.values():
        receiver = build_receiver(parse_receiver(data), templates)
        logging.getLogger("test").info("built %s from %s", receiver, parse_receiver(data))
        shown = " ".join(
            [
                repr(receiver),
                str(receiver),
                repr(parse_receiver(data)),
                str(vars(receiver).get("settings", "")),
            ]
        )
        for secret in SECRETS:
            assert secret not in shown
        receiver.close()
    for secret in SECRETS:
        assert secret not in caplog.text


def test_build_receiver_returns_the_kind_asked_for(secrets_in_env: None) -> None:
    templates = Templates(EXTERNAL_URL)
    for kind, data in EXAMPLES.items():
        receiver = build_receiver(parse_receiver(data), templates)
        assert (receiver.kind, receiver.name) == (kind, data["name"])
        receiver.close()
