"""Receiver configuration, as written under `receivers:` in `alert_rules/routing.yaml`.

Each receiver has a `name` (what routes refer to) and exactly one kind key::

    receivers:
      - name: team-kafka-slack
        slack:
          channel: "#kafka-alerts"
          token_env: SLACK_BOT_TOKEN           # or token_file: /run/secrets/slack-token
          # base_url: https://slack.com/api/   timeout: 10
      - name: oncall-email
        email:
          to: [kafka-oncall@example.com]
          from: kafka-health@example.com
          smarthost: smtp.example.com:587
          username: kafka-health               # AUTH only when set; needs starttls
          password_env: SMTP_PASSWORD          # or password_file
          # starttls: true   tls_ca_file: /etc/ssl/private-ca.pem   timeout: 10
      - name: pager
        pagerduty:
          routing_key_env: PAGERDUTY_ROUTING_KEY   # or routing_key_file
          # url: https://events.pagerduty.com/v2/enqueue   source: kafka-health   timeout: 10
      - name: chatops
        webhook:
          url: https://hooks.example.com/kafka
          headers: {X-Team: kafka}
          headers_env: {Authorization: CHATOPS_AUTHORIZATION}
          # timeout: 10
      - name: inbox
        console:
          path: var/notifications.jsonl        # without path: one log line per notification

Timeouts are in seconds (per request; for email per SMTP command; Slack's client rounds up to
whole seconds).

Secrets never live in the file: it names an environment variable (`*_env`) or a file (`*_file`,
e.g. a mounted Docker or Kubernetes secret), read when the receiver is built, so a missing secret
stops the start with an error naming the receiver, the key and the fix. In memory a secret is a
`SecretStr`: repr, str, errors and logs show `**********`. Header names that look like
credentials (Authorization, Cookie, *token*, *key*, *secret*) must come through `headers_env`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    field_validator,
    model_validator,
)

from monitor.core.errors import ConfigError

ReceiverKind = Literal["slack", "email", "pagerduty", "webhook", "console"]
KINDS: Final[tuple[ReceiverKind, ...]] = ("slack", "email", "pagerduty", "webhook", "console")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")
_CREDENTIAL_HEADER = re.compile(r"authorization|cookie|token|secret|key|password", re.IGNORECASE)

Seconds = Annotated[float, Field(gt=0, le=300)]


class _Strict(BaseModel):
    # hide_input_in_errors: a secret pasted into the wrong key must not come back in an error.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def _env_name(value: str | None) -> str | None:
    if value is not None and not _ENV_NAME.match(value):
        # Never echo the value: it may be the secret itself, pasted into the wrong key.
        raise ValueError(
            "must be the name of an environment variable (letters, digits and '_'), "
            "not the secret itself; put the secret in that variable"
        )
    return value


def _url(value: str) -> str:
    if not _URL.match(value):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _email_address(value: str) -> str:
    # No whitespace, commas or angle brackets: an address goes into a header as is.
    if not re.match(r"^[^@\s<>,]+@[^@\s<>,]+$", value):
        raise ValueError(f"{value!r} is not an email address like name@example.com")
    return value


def _header_name(header: str) -> str:
    if not _HEADER_NAME.match(header):
        raise ValueError(f"{header!r} is not a valid HTTP header name")
    return header


EnvName = Annotated[str, AfterValidator(_env_name)]
HttpUrlText = Annotated[str, AfterValidator(_url)]
EmailAddress = Annotated[str, AfterValidator(_email_address)]


def _exactly_one_source(settings: BaseModel, key: str, what: str) -> None:
    env, file = getattr(settings, f"{key}_env"), getattr(settings, f"{key}_file")
    if env is not None and file is not None:
        raise ValueError(f"give {key}_env or {key}_file, not both")
    if env is None and file is None:
        raise ValueError(
            f"{what} is missing: set {key}_env to the name of an environment variable holding it, "
            f"or {key}_file to a file holding it"
        )


class SlackSettings(_Strict):
    """A Slack channel, posted to with a bot token (chat:write scope)."""

    channel: str = Field(min_length=1)
    token_env: EnvName | None = None
    token_file: Path | None = None
    base_url: HttpUrlText = "https://slack.com/api/"
    timeout: Seconds = 10.0

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        # The client joins the method name to the base URL: without the slash it would replace
        # the last path segment.
        return value.rstrip("/") + "/"

    @model_validator(mode="after")
    def _token_source(self) -> SlackSettings:
        _exactly_one_source(self, "token", "the bot token")
        return self


class EmailSettings(_Strict):
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
            _exactly_one_source(self, "password", "the SMTP password")
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


class PagerDutySettings(_Strict):
    """A PagerDuty service's Events API v2 integration."""

    routing_key_env: EnvName | None = None
    routing_key_file: Path | None = None
    url: HttpUrlText = "https://events.pagerduty.com/v2/enqueue"
    source: str = Field(default="kafka-health", min_length=1, max_length=255)
    timeout: Seconds = 10.0

    @model_validator(mode="after")
    def _key_source(self) -> PagerDutySettings:
        _exactly_one_source(self, "routing_key", "the integration's routing key")
        return self


class WebhookSettings(_Strict):
    """An HTTP endpoint that takes the JSON body documented in `receivers/webhook.py`."""

    url: HttpUrlText
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(default_factory=dict)
    timeout: Seconds = 10.0

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header in value:
            _header_name(header)
            if _CREDENTIAL_HEADER.search(header):
                raise ValueError(
                    f"header {header} looks like a credential; give it through headers_env "
                    f"({header}: ENV_VAR_NAME) so it stays out of the file"
                )
        return value

    @field_validator("headers_env")
    @classmethod
    def _secret_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header, variable in value.items():
            _header_name(header)
            try:
                _env_name(variable)
            except ValueError as exc:
                raise ValueError(f"{header}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _no_overlap(self) -> WebhookSettings:
        both = sorted({h.lower() for h in self.headers} & {h.lower() for h in self.headers_env})
        if both:
            raise ValueError(f"header {', '.join(both)} is in both headers and headers_env; keep one")
        return self


class ConsoleSettings(_Strict):
    """The demo's inbox: one JSON line per notification appended to `path`, or a log line."""

    path: Path | None = None


# ---------------------------------------------------------------------------------------------
# One receiver: a name and exactly one kind


class _Named(_Strict):
    name: str

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"receiver name {value!r} must start with a letter or digit, then letters, digits, "
                "'_', '.' or '-' (at most 64)"
            )
        return value


class SlackReceiverConfig(_Named):
    kind: ClassVar[Literal["slack"]] = "slack"
    slack: SlackSettings


class EmailReceiverConfig(_Named):
    kind: ClassVar[Literal["email"]] = "email"
    email: EmailSettings


class PagerDutyReceiverConfig(_Named):
    kind: ClassVar[Literal["pagerduty"]] = "pagerduty"
    pagerduty: PagerDutySettings


class WebhookReceiverConfig(_Named):
    kind: ClassVar[Literal["webhook"]] = "webhook"
    webhook: WebhookSettings


class ConsoleReceiverConfig(_Named):
    kind: ClassVar[Literal["console"]] = "console"
    console: ConsoleSettings


_MODELS: Final[dict[str, type[_Named]]] = {
    "slack": SlackReceiverConfig,
    "email": EmailReceiverConfig,
    "pagerduty": PagerDutyReceiverConfig,
    "webhook": WebhookReceiverConfig,
    "console": ConsoleReceiverConfig,
}


def _kinds_in(data: Mapping[str, Any]) -> list[str]:
    return [kind for kind in KINDS if kind in data]


def _check_one_kind(data: Any) -> Any:
    """The shape check before the union picks a member, so the message can say what is wrong.
    A kind key with nothing under it (`console:`) stands for its defaults."""
    if not isinstance(data, Mapping):
        return data
    kinds = _kinds_in(data)
    if len(kinds) > 1:
        raise ValueError(
            f"receiver has {' and '.join(kinds)}: give each kind its own receiver with its own name"
        )
    if not kinds:
        others = [str(key) for key in data if key != "name"]
        hint = ""
        for key in others:
            close = difflib.get_close_matches(key, KINDS, n=1)
            if close:
                hint = f" (did you mean {close[0]!r} instead of {key!r}?)"
                break
        raise ValueError(f"receiver needs one kind key besides name: one of {', '.join(KINDS)}{hint}")
    if data[kinds[0]] is None:
        return {**data, kinds[0]: {}}
    return data


def _kind_of(data: Any) -> str | None:
    if isinstance(data, Mapping):
        kinds = _kinds_in(data)
        return kinds[0] if len(kinds) == 1 else None
    kind = getattr(data, "kind", None)
    return kind if isinstance(kind, str) else None


ReceiverConfig: TypeAlias = Annotated[
    Annotated[SlackReceiverConfig, Tag("slack")]
    | Annotated[EmailReceiverConfig, Tag("email")]
    | Annotated[PagerDutyReceiverConfig, Tag("pagerduty")]
    | Annotated[WebhookReceiverConfig, Tag("webhook")]
    | Annotated[ConsoleReceiverConfig, Tag("console")],
    Discriminator(
        _kind_of,
        custom_error_type="receiver_kind",
        custom_error_message=f"a receiver is a mapping with a name and one of {', '.join(KINDS)}",
    ),
    BeforeValidator(_check_one_kind),
]
"""One receiver. Usable as a field type (`receivers: list[ReceiverConfig]`); note that pydantic
then puts the kind into error locations (`receivers.0.slack.slack.channel`). `parse_receiver`
reports locations as paths in the receiver's own mapping (`slack.channel`)."""


def parse_receiver(data: Mapping[str, Any]) -> ReceiverConfig:
    """Validate one entry of `receivers:`.

    Raises ValueError when the entry is not a mapping with exactly one kind key, and
    pydantic's ValidationError (locations relative to the entry, e.g. `("slack", "token_env")`)
    for anything else. Neither carries secret values. Secrets are not read here:
    see `resolve_secret` and `build_receiver`.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a receiver must be a mapping with name and one of {', '.join(KINDS)}")
    checked = _check_one_kind(data)
    return cast("ReceiverConfig", _MODELS[_kinds_in(data)[0]].model_validate(dict(checked)))


# ---------------------------------------------------------------------------------------------
# Secrets


def resolve_secret(
    receiver: str,
    what: str,
    *,
    env: str | None = None,
    env_key: str = "",
    file: Path | None = None,
    file_key: str = "",
) -> SecretStr:
    """The secret in environment variable `env` or in `file`, read now (surrounding whitespace
    dropped). `what` names it for the operator; the keys are where the file sets env and file.

    Raises ConfigError naming the receiver, the key and the fix; never the value.
    """
    source = f"receiver {receiver!r}"
    other = f", or use {file_key}" if file_key else ""
    if env is not None:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ConfigError(
                [f"{env_key}: environment variable {env} is not set or empty; export it with {what}{other}"],
                source,
            )
        return SecretStr(value)
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(
                [f"{file_key}: cannot read {file}: {reason}; check the path and its permissions"], source
            ) from None
        if not text:
            raise ConfigError([f"{file_key}: {file} is empty; write {what} into it"], source)
        return SecretStr(text)
    raise ConfigError([f"{env_key or file_key}: no source for {what}; set it"], source)


def settings_secret(receiver: str, kind: str, settings: BaseModel, key: str, what: str) -> SecretStr:
    """`resolve_secret` for a `<key>_env` / `<key>_file` pair of `settings`."""
    return resolve_secret(
        receiver,
        what,
        env=getattr(settings, f"{key}_env"),
        env_key=f"{kind}.{key}_env",
        file=getattr(settings, f"{key}_file"),
        file_key=f"{kind}.{key}_file",
    )
