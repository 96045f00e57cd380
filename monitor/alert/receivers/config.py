"""Receiver configuration, as written under `receivers:` in `alert_rules/routing.yaml`: what every
kind shares (the name, strictness, secrets read from the environment or a file). Each kind's own
settings live in its module (`receivers/slack.py`, ...), registered in `receivers/registry.py`.

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

import os
import re
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator

from monitor.core.errors import ConfigError
from monitor.core.vocabulary import check_seconds

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")

Seconds = Annotated[float, Field(gt=0, le=300), AfterValidator(check_seconds)]


class StrictSettings(BaseModel):
    """The base of every receiver's settings: unknown keys are errors, values are frozen."""

    # hide_input_in_errors: a secret pasted into the wrong key must not come back in an error.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True, allow_inf_nan=False)


def env_name(value: str | None) -> str | None:
    """Check that `value` names an environment variable (it must not be the secret itself)."""
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


EnvName = Annotated[str, AfterValidator(env_name)]
HttpUrlText = Annotated[str, AfterValidator(_url)]


def exactly_one_source(settings: BaseModel, key: str, what: str) -> None:
    """Check that a secret comes from exactly one of `<key>_env` and `<key>_file`."""
    env, file = getattr(settings, f"{key}_env"), getattr(settings, f"{key}_file")
    if env is not None and file is not None:
        raise ValueError(f"give {key}_env or {key}_file, not both")
    if env is None and file is None:
        raise ValueError(
            f"{what} is missing: set {key}_env to the name of an environment variable holding it, "
            f"or {key}_file to a file holding it"
        )


class ReceiverConfigBase(StrictSettings):
    """One receiver: a `name` (what routes refer to) and one key, `kind`, holding its settings.

    Each kind subclasses it with `kind: ClassVar[Literal["<kind>"]] = "<kind>"` and a field of
    that name holding its settings model.
    """

    kind: ClassVar[str]
    name: str

    def route_problem(self, repeat_interval: int) -> str | None:
        """What is wrong with a route that notifies this receiver every `repeat_interval` seconds
        while its alerts fire (None: nothing). The routing check asks every route's receiver; a
        kind whose destination has a timing of its own overrides this."""
        return None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"receiver name {value!r} must start with a letter or digit, then letters, digits, "
                "'_', '.' or '-' (at most 64)"
            )
        return value


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
