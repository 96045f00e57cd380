"""What every receiver is, and the one outcome policy they share.

Delivery policy (Alertmanager's `notify/util.go`): a receiver makes one attempt and says why it
failed as a `FailureReason`, whose type decides whether another attempt could succeed; the outbox
does the retrying, with its own backoff, so no client library retries on its own. For HTTP: 2xx
delivered; 429 (`RATE_LIMITED`) and 5xx (`SERVER_ERROR`) retry (Retry-After is not honoured: the
outbox's backoff decides); timeouts (`TIMEOUT`) and connection errors (`CONNECTION`) retry; any
other status gives up (`CLIENT_ERROR`) with the status and a short reason from the body. A
template that fails to render gives up (`TEMPLATE`): sending it again would fail the same way.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

import httpx
import jinja2
from pydantic import SecretStr

from monitor.alert.model import DeliveryResult, FailureReason, Notification

log = logging.getLogger(__name__)

_REASON_CHARS: Final = 200
_WHITESPACE = re.compile(r"\s+")
_REDACTED: Final = "**********"


class Receiver(Protocol):
    """Delivers notifications to one destination.

    `send` makes one attempt and blocks for at most about the configured timeout (per request;
    per SMTP command for email). It never raises for a failed delivery: the `DeliveryResult`
    says whether to retry and why not. It may be called from several sender threads at once.
    `close` releases pooled connections; nothing is sent after it.
    """

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def send(self, notification: Notification) -> DeliveryResult: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# The outcome policy


def status_failure(status: int) -> FailureReason:
    """The failure an HTTP status that is not 2xx stands for: 429 rate limited and 5xx server
    error (the same request may succeed later); anything else a client error."""
    if status == 429:
        return FailureReason.RATE_LIMITED
    if 500 <= status <= 599:
        return FailureReason.SERVER_ERROR
    return FailureReason.CLIENT_ERROR


def http_outcome(
    status: int, body: str | bytes = b"", *, secrets: Iterable[SecretStr] = ()
) -> DeliveryResult:
    """The one HTTP policy: 2xx delivered; 429/5xx retry; anything else gives up.

    A redirect gives up too: a receiver URL that redirects is a configuration to fix, and
    following it could send a credential to another host.
    """
    if 200 <= status <= 299:
        return DeliveryResult.delivered(status)
    reason = redact(f"HTTP {status}: {short_reason(body)}".rstrip(": "), secrets)
    return DeliveryResult.failed(status_failure(status), reason, status)


def short_reason(body: str | bytes) -> str:
    """A short reason from an error body: the message of a JSON error, or the first text."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        parts = [str(data[key]) for key in ("error", "message") if isinstance(data.get(key), str)]
        errors = data.get("errors")
        if isinstance(errors, list):
            parts += [str(e) for e in errors[:3]]
        if parts:
            text = "; ".join(dict.fromkeys(parts))
    text = re.sub(r"<[^>]*>", " ", text)  # an HTML error page: keep its words
    text = _WHITESPACE.sub(" ", text).strip()
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def transport_outcome(exc: Exception, timeout: float, *, secrets: Iterable[SecretStr] = ()) -> DeliveryResult:
    """Timeouts and connection errors: retry; the reason names the failure, not the URL."""
    cause = getattr(exc, "reason", None)  # urllib's URLError wraps the socket error
    if isinstance(exc, httpx.TimeoutException | TimeoutError) or isinstance(cause, TimeoutError):
        return DeliveryResult.failed(
            FailureReason.TIMEOUT, f"timed out after {timeout:g} s ({type(exc).__name__})"
        )
    detail = _WHITESPACE.sub(" ", str(cause if isinstance(cause, OSError) else exc)).strip()
    if len(detail) > _REASON_CHARS:
        detail = detail[: _REASON_CHARS - 1] + "…"
    return DeliveryResult.failed(
        FailureReason.CONNECTION,
        f"connection failed ({type(exc).__name__}): {redact(detail, secrets) or 'no detail'}",
    )


def template_failure(template: str, exc: jinja2.TemplateError) -> DeliveryResult:
    """A template that fails now fails on every retry: give up, naming the template."""
    return DeliveryResult.failed(
        FailureReason.TEMPLATE, f"template {template} failed: {exc.message or type(exc).__name__}"
    )


def redact(text: str, secrets: Iterable[SecretStr]) -> str:
    """`text` with every secret value replaced, for reasons built from a server's answer."""
    for secret in secrets:
        value = secret.get_secret_value()
        if value:
            text = text.replace(value, _REDACTED)
    return text


def post_json(
    client: httpx.Client,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float,
    secrets: Iterable[SecretStr] = (),
) -> DeliveryResult:
    """One POST of a JSON body, judged by the policy above."""
    secrets = tuple(secrets)
    try:
        response = client.post(url, json=body, headers=headers)
    except httpx.TransportError as exc:
        return transport_outcome(exc, timeout, secrets=secrets)
    return http_outcome(response.status_code, response.content, secrets=secrets)
