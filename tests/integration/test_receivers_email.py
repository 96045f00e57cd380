"""The email receiver through smtplib against a local aiosmtpd server with STARTTLS (a trustme
certificate) and AUTH: the message has both parts and the right headers, TLS and AUTH were used,
SMTP 4xx retries, 5xx gives up, certificate and connection problems are told apart, and the
password never shows."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from monitor.alert.model import DeliveryResult
from monitor.alert.receivers import Receiver, build_receiver, parse_receiver
from monitor.alert.render import Templates
from tests.fixtures.receivers import (
    EXTERNAL_URL,
    SMTP_PASSWORD,
    SMTP_USER,
    SmtpServer,
    free_port,
    sample_notification,
)


def email(
    monkeypatch: pytest.MonkeyPatch, smarthost: str, password: str = SMTP_PASSWORD, **settings: Any
) -> Receiver:
    monkeypatch.setenv("SMTP_PASSWORD", password)
    values: dict[str, Any] = {
        "to": ["kafka-oncall@example.com", "sre@example.com"],
        "from": "kafka-health@example.com",
        "smarthost": smarthost,
        "timeout": 2,
    }
    return build_receiver(
        parse_receiver({"name": "oncall-email", "email": values | settings}), Templates(EXTERNAL_URL)
    )


def authenticated(
    monkeypatch: pytest.MonkeyPatch, server: SmtpServer, password: str = SMTP_PASSWORD, **settings: Any
) -> Receiver:
    return email(
        monkeypatch,
        server.smarthost,
        password,
        username=SMTP_USER,
        password_env="SMTP_PASSWORD",
        tls_ca_file=str(server.ca_file),
        **settings,
    )


def test_delivers_both_parts_over_starttls_with_auth(
    monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer
) -> None:
    receiver = authenticated(monkeypatch, smtp_server)
    notification = sample_notification("single_critical")
    assert receiver.send(notification) == DeliveryResult.delivered()
    (mail,) = smtp_server.messages
    assert mail.tls, "STARTTLS was used"
    assert (mail.auth_user, mail.auth_mechanism) == (SMTP_USER, "PLAIN")
    assert mail.mail_from == "kafka-health@example.com"
    assert mail.rcpt_tos == ["kafka-oncall@example.com", "sre@example.com"]
    message = mail.message
    assert message["Subject"] == "[CRITICAL] 1 firing: UnderMinIsr (cluster=prod)"
    assert message["To"] == "kafka-oncall@example.com, sre@example.com"
    assert message["X-Kafka-Health-Kind"] == "firing"
    assert message.get_content_type() == "multipart/alternative"
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None and html is not None
    assert "orders-3 has 1 in-sync replica" in text.get_content()
    assert f'<a href="{EXTERNAL_URL}/ack/3f2a9c">' in html.get_content()


def test_a_retried_mail_keeps_its_message_id_and_a_group_threads(
    monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer
) -> None:
    receiver = authenticated(monkeypatch, smtp_server)
    first = sample_notification("single_critical")
    receiver.send(first)
    receiver.send(first)
    receiver.send(sample_notification("acknowledged"))
    ids = [m.message["Message-ID"] for m in smtp_server.messages]
    assert ids[0] == ids[1] != ids[2]
    assert ids[0].endswith("@example.com>")
    assert len({m.message["References"] for m in smtp_server.messages}) == 1


def test_auth_login_works_too(
    monkeypatch: pytest.MonkeyPatch, make_smtp_server: Callable[..., SmtpServer]
) -> None:
    server = make_smtp_server(auth_exclude=("PLAIN",))
    assert authenticated(monkeypatch, server).send(sample_notification("resolved")).ok
    assert server.messages[0].auth_mechanism == "LOGIN"


def test_without_username_no_auth(monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer) -> None:
    receiver = email(monkeypatch, smtp_server.smarthost, tls_ca_file=str(smtp_server.ca_file))
    # The fixture server offers AUTH but requires only STARTTLS before MAIL.
    assert receiver.send(sample_notification("single_critical")).ok
    assert smtp_server.messages[0].auth_user is None and smtp_server.messages[0].tls


@pytest.mark.parametrize(
    ("reply", "retryable", "status"),
    [
        ("451 4.3.0 Mailbox temporarily unavailable", True, 451),
        ("452 4.5.3 Too many recipients", True, 452),
        ("550 5.1.1 User unknown", False, 550),
    ],
)
def test_smtp_reply_classes(
    monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer, reply: str, retryable: bool, status: int
) -> None:
    receiver = authenticated(monkeypatch, smtp_server)
    smtp_server.fail_next(2, reply)  # both recipients refused
    result = receiver.send(sample_notification("single_critical"))
    assert (result.ok, result.retryable, result.status) == (False, retryable, status)
    assert reply.split(" ", 2)[2] in result.reason
    assert not smtp_server.messages


def test_one_refused_recipient_of_two_still_delivers(
    monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer
) -> None:
    receiver = authenticated(monkeypatch, smtp_server)
    smtp_server.fail_next(1, "550 5.1.1 User unknown")
    result = receiver.send(sample_notification("single_critical"))
    assert result.ok
    assert "kafka-oncall@example.com (550 5.1.1 User unknown)" in result.reason
    assert smtp_server.messages[0].rcpt_tos == ["sre@example.com"]


def test_a_wrong_password_gives_up_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = authenticated(monkeypatch, smtp_server)
    wrong = authenticated(monkeypatch, smtp_server, password="wrong-" + SMTP_PASSWORD)
    result = wrong.send(sample_notification("single_critical"))
    assert (result.ok, result.retryable, result.status) == (False, False, 535)
    assert SMTP_PASSWORD not in result.reason
    assert receiver.send(sample_notification("single_critical")).ok
    for shown in (repr(receiver), str(receiver), repr(wrong)):
        assert SMTP_PASSWORD not in shown
    assert caplog.records and SMTP_PASSWORD not in caplog.text


def test_an_untrusted_certificate_gives_up(monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer) -> None:
    receiver = email(monkeypatch, smtp_server.smarthost, username=SMTP_USER, password_env="SMTP_PASSWORD")
    result = receiver.send(sample_notification("single_critical"))
    assert (result.ok, result.retryable) == (False, False)
    assert "TLS certificate of 127.0.0.1 not trusted" in result.reason
    assert "set tls_ca_file" in result.reason
    assert not smtp_server.messages


def test_a_server_without_starttls_gives_up(
    monkeypatch: pytest.MonkeyPatch, make_smtp_server: Callable[..., SmtpServer]
) -> None:
    server = make_smtp_server(starttls=False, auth=False)
    receiver = email(monkeypatch, server.smarthost)
    result = receiver.send(sample_notification("single_critical"))
    assert (result.ok, result.retryable) == (False, False)
    assert "STARTTLS" in result.reason


def test_plain_smtp_when_starttls_is_off(
    monkeypatch: pytest.MonkeyPatch, make_smtp_server: Callable[..., SmtpServer]
) -> None:
    server = make_smtp_server(starttls=False, auth=False)
    assert email(monkeypatch, server.smarthost, starttls=False).send(sample_notification("resolved")).ok
    assert not server.messages[0].tls


def test_connection_refused_and_a_stopped_server_retry(
    monkeypatch: pytest.MonkeyPatch, smtp_server: SmtpServer
) -> None:
    result = email(monkeypatch, f"127.0.0.1:{free_port()}").send(sample_notification("single_critical"))
    assert result.retryable and result.reason.startswith("connection failed (ConnectionRefusedError)")
    receiver = authenticated(monkeypatch, smtp_server)
    smtp_server.stop()
    assert receiver.send(sample_notification("single_critical")).retryable
