"""Slack: `chat.postMessage` through slack-sdk's `WebClient`, with a bot token.

The message is the `slack.txt` template (mrkdwn) as the notification text, and the same text in
section blocks followed by buttons for the acknowledge link and the link annotations (runbooks,
dashboards), so the links work
on phones where mrkdwn links are small.

Outcomes: Slack answers most errors with HTTP 200 and `ok: false`; `ratelimited` (HTTP 429) and
Slack's own failures (5xx, `internal_error`, `fatal_error`, `service_unavailable`,
`request_timeout`) retry, every other error gives up with Slack's error code as the reason: a
misconfiguration for the token's and the channel's errors (`invalid_auth`, `channel_not_found`,
`not_in_channel`, ...), a client error for the rest. Connection errors and
timeouts retry. The WebClient's own retry handlers are off: the outbox retries.
"""

from __future__ import annotations

import http.client
import logging
import math
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

import jinja2
from pydantic import Field, SecretStr, field_validator, model_validator
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from monitor.alert.model import DeliveryResult, FailureReason, Notification
from monitor.alert.receivers.base import redact, status_failure, template_failure, transport_outcome
from monitor.alert.receivers.config import (
    EnvName,
    HttpUrlText,
    ReceiverConfigBase,
    Seconds,
    StrictSettings,
    exactly_one_source,
    settings_secret,
)
from monitor.alert.render import Templates

log = logging.getLogger(__name__)

TEMPLATE: Final = "slack.txt"
RATE_LIMITED_ERRORS: Final = frozenset({"ratelimited", "rate_limited"})
SERVER_ERRORS: Final = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
CONFIGURATION_ERRORS: Final = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "missing_scope",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
    }
)
"""Slack's answers that only a change of the token or the channel in routing.yaml fixes."""
_SECTION_CHARS: Final = 3000  # Slack's limit for a section's text
_MAX_SECTIONS: Final = 45  # 50 blocks at most, leaving room for the actions
_MAX_TEXT: Final = 40000  # longer message text is truncated by Slack anyway
_BUTTON_LABEL: Final = 75
_MAX_BUTTONS: Final = 5


class SlackSettings(StrictSettings):
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
        exactly_one_source(self, "token", "the bot token")
        return self


class SlackReceiverConfig(ReceiverConfigBase):
    kind: ClassVar[Literal["slack"]] = "slack"
    slack: SlackSettings


class SlackReceiver:
    """Posts to one channel. See the module docstring for the outcomes."""

    kind: Final = "slack"

    def __init__(self, name: str, settings: SlackSettings, token: SecretStr, templates: Templates) -> None:
        self.name = name
        self.channel = settings.channel
        # The client counts whole seconds.
        self.timeout = max(1, math.ceil(settings.timeout))
        self._token = token
        self._templates = templates
        self._client = WebClient(
            token=token.get_secret_value(),
            base_url=settings.base_url,
            timeout=self.timeout,
            retry_handlers=[],
        )

    @classmethod
    def from_config(cls, config: SlackReceiverConfig, templates: Templates) -> SlackReceiver:
        settings = config.slack
        token = settings_secret(config.name, "slack", settings, "token", "the Slack bot token (xoxb-...)")
        return cls(config.name, settings, token, templates)

    def send(self, notification: Notification) -> DeliveryResult:
        try:
            text = self._templates.render(TEMPLATE, notification).strip()
        except jinja2.TemplateError as exc:
            return template_failure(TEMPLATE, exc)
        blocks = slack_blocks(text, notification)
        try:
            response = self._client.chat_postMessage(
                channel=self.channel,
                text=text[:_MAX_TEXT],
                blocks=blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
            return slack_outcome(exc.response.status_code, error, self._token)
        except (OSError, http.client.HTTPException) as exc:
            # urllib's URLError, refused connections and socket timeouts are all OSErrors.
            return transport_outcome(exc, self.timeout, secrets=(self._token,))
        except SlackClientError as exc:
            return DeliveryResult.failed(
                FailureReason.CLIENT_ERROR, redact(f"Slack client error: {exc}", (self._token,))
            )
        log.debug("posted notification %s to Slack channel %s", notification.dedup_key, self.channel)
        return DeliveryResult.delivered(response.status_code)

    def close(self) -> None:
        """The WebClient opens a connection per request: nothing to release."""

    def __repr__(self) -> str:
        return f"SlackReceiver(name={self.name!r}, channel={self.channel!r})"


def slack_outcome(status: int, error: Any, token: SecretStr | None = None) -> DeliveryResult:
    """Slack's answer judged by the shared policy, with its error code as the reason."""
    code = error if isinstance(error, str) and error else "no error code"
    reason = redact(f"Slack {code} (HTTP {status})", (token,) if token else ())
    if 200 <= status <= 299 and not error:
        return DeliveryResult.delivered(status)
    return DeliveryResult.failed(_slack_failure(status, code), reason, status)


def _slack_failure(status: int, code: str) -> FailureReason:
    if code in RATE_LIMITED_ERRORS:
        return FailureReason.RATE_LIMITED
    if code in SERVER_ERRORS:
        return FailureReason.SERVER_ERROR
    if status == 429 or 500 <= status <= 599:
        return status_failure(status)
    if code in CONFIGURATION_ERRORS:
        return FailureReason.MISCONFIGURED
    return FailureReason.CLIENT_ERROR


def slack_blocks(text: str, notification: Notification) -> list[dict[str, Any]]:
    """Section blocks holding `text`, then buttons for the acknowledge link and the annotations
    that are links (runbooks, dashboards)."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": chunk}}
        for chunk in _chunks(text, _SECTION_CHARS)[:_MAX_SECTIONS]
    ]
    buttons: list[dict[str, Any]] = []
    if notification.ack_url and notification.kind not in ("resolved", "acknowledge"):
        buttons.append(_button("Acknowledge", notification.ack_url, style="primary"))
    links = dict.fromkeys(link for a in notification.alerts for link in a.link_buttons())
    for label, url in list(links)[: _MAX_BUTTONS - len(buttons)]:
        buttons.append(_button(label, url))
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    return blocks


def _button(label: str, url: str, style: str | None = None) -> dict[str, Any]:
    text = label if len(label) <= _BUTTON_LABEL else label[: _BUTTON_LABEL - 1] + "…"
    button: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": text}, "url": url}
    if style:
        button["style"] = style
    return button


def _chunks(text: str, size: int) -> list[str]:
    """`text` in pieces of at most `size` characters, cut at line ends where possible."""
    pieces: list[str] = []
    current = ""
    for line in text.splitlines(keepends=True):
        while len(line) > size:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(line[:size])
            line = line[size:]
        if len(current) + len(line) > size:
            pieces.append(current)
            current = ""
        current += line
    if current.strip():
        pieces.append(current)
    return [piece.rstrip("\n") for piece in pieces if piece.strip()] or [" "]
