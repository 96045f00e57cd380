"""Email over SMTP through a smarthost: STARTTLS, AUTH when a username is set, text and HTML.

Each send opens a connection, upgrades it with STARTTLS (certificates checked against the
system's CAs, or only `tls_ca_file` when set), logs in when a username is set, sends one
multipart/alternative message (the `email.txt` and `email.html` templates, subject from
`email.subject.txt`) and quits. A connection per notification keeps nothing half-open between
evaluation cycles, which are minutes apart.

Outcomes follow SMTP's reply classes: 4xx retry (a server error), 5xx give up (a client error;
530 and 535, authentication, a misconfiguration); connection errors and timeouts retry; a server
certificate that does not verify, or a server without STARTTLS, gives up (a misconfiguration).

When some recipients are refused and others accepted, the message
was delivered to those: that counts as delivered, with the refusals as the reason, since sending
again would duplicate it for the others.

The Message-ID is derived from the notification, so a retried send is recognisably the same mail,
and `References` carries the group, so mail clients thread one group's notices together.
"""

from __future__ import annotations

import hashlib
import logging
import re
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Annotated, ClassVar, Final, Literal

import jinja2
from pydantic import AfterValidator, ConfigDict, Field, SecretStr, field_validator, model_validator

from monitor.alert.model import DeliveryResult, FailureReason, Notification
from monitor.alert.receivers.base import redact, short_reason, template_failure, transport_outcome
from monitor.alert.receivers.config import (
    EnvName,
    ReceiverConfigBase,
    Seconds,
    StrictSettings,
    exactly_one_source,
    settings_secret,
)
from monitor.alert.render import Templates, one_line
from monitor.core.errors import ConfigError

log = logging.getLogger(__name__)

SUBJECT_TEMPLATE: Final = "email.subject.txt"
TEXT_TEMPLATE: Final = "email.txt"
HTML_TEMPLATE: Final = "email.html"


def _email_address(value: str) -> str:
    # No whitespace, commas or angle brackets: an address goes into a header as is.
    if not re.match(r"^[^@\s<>,]+@[^@\s<>,]+$", value):
        raise ValueError(f"{value!r} is not an email address like name@example.com")
    return value


EmailAddress = Annotated[str, AfterValidator(_email_address)]


class EmailSettings(StrictSettings):
    """Mail through a smarthost: STARTTLS by default, AUTH when a username is set."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)

    to: list[EmailAddress] = Field(min_length=1)
    sender: EmailAddress = Field(alias="from")
    smarthost: str
    starttls: bool = True
    username: str | None = None
    password_env: EnvName | None = None
    password_file: Path | None = None
    tls_ca_file: Path | None = None
    timeout: Seconds = 10.0

    @field_validator("smarthost")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"smarthost {value!r} must be host:port, e.g. smtp.example.com:587")
        return value

    @model_validator(mode="after")
    def _auth_and_tls(self) -> EmailSettings:
        has_password = self.password_env is not None or self.password_file is not None
        if self.username is not None:
            exactly_one_source(self, "password", "the SMTP password")
            if not self.starttls:
                raise ValueError(
                    "username is set but starttls is false: the password would cross the network "
                    "in clear; set starttls: true"
                )
        elif has_password:
            raise ValueError("a password is set without a username; add username or remove the password")
        if self.tls_ca_file is not None and not self.starttls:
            raise ValueError("tls_ca_file is set but starttls is false; set starttls: true or remove it")
        return self

    @property
    def host(self) -> str:
        return self.smarthost.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.smarthost.rpartition(":")[2])


class EmailReceiverConfig(ReceiverConfigBase):
    kind: ClassVar[Literal["email"]] = "email"
    email: EmailSettings


class EmailReceiver:
    """Mails one list of recipients. See the module docstring for the outcomes."""

    kind: Final = "email"

    def __init__(
        self,
        name: str,
        settings: EmailSettings,
        password: SecretStr | None,
        templates: Templates,
    ) -> None:
        self.name = name
        self.settings = settings
        self._password = password
        self._templates = templates
        self._tls = _tls_context(name, settings) if settings.starttls else None

    @classmethod
    def from_config(cls, config: EmailReceiverConfig, templates: Templates) -> EmailReceiver:
        settings = config.email
        password = None
        if settings.username is not None:
            password = settings_secret(config.name, "email", settings, "password", "the SMTP password")
        return cls(config.name, settings, password, templates)

    def send(self, notification: Notification) -> DeliveryResult:
        try:
            message = self.message(notification)
        except jinja2.TemplateError as exc:
            return template_failure(getattr(exc, "name", None) or "an email template", exc)
        settings = self.settings
        secrets = (self._password,) if self._password else ()
        try:
            with smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout) as smtp:
                if self._tls is not None:
                    smtp.starttls(context=self._tls)
                if settings.username is not None and self._password is not None:
                    smtp.login(settings.username, self._password.get_secret_value())
                refused = smtp.send_message(message, settings.sender, settings.to)
        except smtplib.SMTPRecipientsRefused as exc:
            return _refused_outcome(exc.recipients, secrets)
        except smtplib.SMTPResponseException as exc:
            return smtp_outcome(exc.smtp_code, exc.smtp_error, secrets)
        except smtplib.SMTPNotSupportedError as exc:
            return DeliveryResult.failed(
                FailureReason.MISCONFIGURED, f"SMTP server does not support it: {exc}"
            )
        except ssl.SSLCertVerificationError as exc:
            return DeliveryResult.failed(
                FailureReason.MISCONFIGURED,
                f"TLS certificate of {settings.host} not trusted ({exc.verify_message}); "
                "set tls_ca_file to the CA that signed it",
            )
        except (OSError, smtplib.SMTPException) as exc:
            return transport_outcome(exc, settings.timeout, secrets=secrets)
        if refused:
            return DeliveryResult(ok=True, reason=f"refused by the server: {_describe_refused(refused)}")
        log.debug("mailed notification %s to %s", notification.dedup_key, ", ".join(settings.to))
        return DeliveryResult.delivered()

    def message(self, notification: Notification) -> EmailMessage:
        """The multipart/alternative message for `notification` (raises jinja2.TemplateError)."""
        subject = one_line(self._templates.render(SUBJECT_TEMPLATE, notification))
        text = self._templates.render(TEXT_TEMPLATE, notification)
        html = self._templates.render(HTML_TEMPLATE, notification)
        domain = self.settings.sender.rpartition("@")[2]
        message = EmailMessage()
        message["Subject"] = subject
        message["From"] = self.settings.sender
        message["To"] = ", ".join(self.settings.to)
        message["Date"] = format_datetime(notification.created_at)
        message["Message-ID"] = f"<{_digest(notification.to_json())}@{domain}>"
        message["References"] = f"<{_digest(notification.dedup_key)}.group@{domain}>"
        message["X-Kafka-Health-Kind"] = notification.kind
        message.set_content(text)
        message.add_alternative(html, subtype="html")
        return message

    def close(self) -> None:
        """A connection lives for one send: nothing to release."""

    def __repr__(self) -> str:
        settings = self.settings
        return f"EmailReceiver(name={self.name!r}, to={settings.to!r}, smarthost={settings.smarthost!r})"


def smtp_outcome(code: int, message: bytes | str, secrets: tuple[SecretStr, ...] = ()) -> DeliveryResult:
    """SMTP's reply classes: 4xx is transient (retry), 5xx permanent (give up)."""
    reason = redact(f"SMTP {code}: {short_reason(message)}", secrets)
    return DeliveryResult.failed(smtp_failure(code), reason, code)


def smtp_failure(code: int) -> FailureReason:
    """4xx: the server cannot now (retry); 535 and 530: the credentials (fix the secret); other
    5xx: the server will not (give up)."""
    if code in (530, 535):
        return FailureReason.MISCONFIGURED
    if 500 <= code <= 599:
        return FailureReason.CLIENT_ERROR
    return FailureReason.SERVER_ERROR


def _refused_outcome(
    recipients: dict[str, tuple[int, bytes]], secrets: tuple[SecretStr, ...]
) -> DeliveryResult:
    """Every recipient refused: retry only when every refusal was transient."""
    codes = [code for code, _ in recipients.values()]
    reason = redact(f"every recipient refused: {_describe_refused(recipients)}", secrets)
    if all(400 <= code <= 499 for code in codes):
        return DeliveryResult.failed(FailureReason.SERVER_ERROR, reason, codes[0])
    return DeliveryResult.failed(FailureReason.CLIENT_ERROR, reason, max(codes))


def _describe_refused(recipients: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{to} ({code} {short_reason(text)})" for to, (code, text) in recipients.items())


def _tls_context(name: str, settings: EmailSettings) -> ssl.SSLContext:
    """Verifying context: the system's CAs, or only the configured private CA."""
    if settings.tls_ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(settings.tls_ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            [
                f"email.tls_ca_file: cannot load {settings.tls_ca_file} as PEM certificates "
                f"({getattr(exc, 'strerror', None) or exc}); check the path and the file"
            ],
            f"receiver {name!r}",
        ) from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]
