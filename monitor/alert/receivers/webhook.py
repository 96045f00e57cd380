"""Webhook: POST one JSON document per notification, through httpx.

The body, version 1 (fields are only ever added; a breaking change gets a new version)::

    {
      "version": "1",
      "receiver": "chatops",                 # the receiver's name
      "kind": "firing",                      # firing | repeat | escalation | acknowledge | resolved
      "severity": "critical",
      "title": "[CRITICAL] 3 firing: UnderMinIsr (cluster=prod)",
      "group_key": "...",                    # the routing group
      "group_labels": {"cluster": "prod", ...},
      "common_labels": {...},                # labels every alert shares
      "dedup_key": "...",                    # stable per receiver and group: dedupe on it
      "notification_id": 1234 | null,        # this notification; a retried delivery repeats it
      "ack_url": "https://.../ack/..." | null,
      "created_at": "2026-11-21T14:03:09+00:00",
      "external_url": "https://kafka-health.example.com",
      "alerts": [                            # every alert of the notification
        {"fingerprint", "rule", "severity", "state": "firing" | "resolved", "cluster", "entity",
         "entity_key", "labels", "summary", "description", "value",
         "annotations": {name: text},       # the rule's annotations rendered (runbook, dashboard, ...)
         "runbook",                          # annotations.runbook, or null (kept for version 1 readers)
         "starts_at", "ends_at", "acknowledged_by",
         "owner",                            # the owning team, or null
         "partitions": [                     # a consumer or share group alert's worst partitions
           {"topic", "partition", "status", "since", "offset_lag", "lag_seconds",
            "time_until_data_loss_seconds"}],
         "partitions_total",                 # how many partitions were flagged in all
         "impact": {"counts": {rule: n}, "worst": [{"rule", "severity", "entity_key", "summary"}]}
                   | null}                   # what an inhibiting alert covers
      ]
    }

Headers: Content-Type application/json, the configured `headers`, and the `headers_env` ones
read from the environment when the receiver was built. Outcomes: the shared HTTP policy.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

import httpx
from pydantic import Field, SecretStr, field_validator, model_validator

from monitor.alert.model import DeliveryResult, Notification
from monitor.alert.receivers.base import post_json
from monitor.alert.receivers.config import (
    HttpUrlText,
    ReceiverConfigBase,
    Seconds,
    StrictSettings,
    env_name,
    resolve_secret,
)
from monitor.alert.render import Templates, title
from monitor.core.annotations import RUNBOOK

log = logging.getLogger(__name__)

BODY_VERSION: Final = "1"


_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_CREDENTIAL_HEADER = re.compile(r"authorization|cookie|token|secret|key|password", re.IGNORECASE)


def _header_name(header: str) -> str:
    if not _HEADER_NAME.match(header):
        raise ValueError(f"{header!r} is not a valid HTTP header name")
    return header


class WebhookSettings(StrictSettings):
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
                env_name(variable)
            except ValueError as exc:
                raise ValueError(f"{header}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _no_overlap(self) -> WebhookSettings:
        both = sorted({h.lower() for h in self.headers} & {h.lower() for h in self.headers_env})
        if both:
            raise ValueError(f"header {', '.join(both)} is in both headers and headers_env; keep one")
        return self


class WebhookReceiverConfig(ReceiverConfigBase):
    kind: ClassVar[Literal["webhook"]] = "webhook"
    webhook: WebhookSettings


class WebhookReceiver:
    """POSTs the versioned JSON body to one URL."""

    kind: Final = "webhook"

    def __init__(
        self,
        name: str,
        settings: WebhookSettings,
        secret_headers: Mapping[str, SecretStr],
        templates: Templates,
    ) -> None:
        self.name = name
        self.settings = settings
        self._secret_headers = dict(secret_headers)
        self._templates = templates
        self._client = httpx.Client(timeout=settings.timeout, follow_redirects=False)

    @classmethod
    def from_config(cls, config: WebhookReceiverConfig, templates: Templates) -> WebhookReceiver:
        settings = config.webhook
        secret_headers = {
            header: resolve_secret(
                config.name,
                f"the {header} header's value",
                env=variable,
                env_key=f"webhook.headers_env.{header}",
            )
            for header, variable in settings.headers_env.items()
        }
        return cls(config.name, settings, secret_headers, templates)

    def send(self, notification: Notification) -> DeliveryResult:
        body = webhook_body(notification, self.name, self._templates.external_url)
        headers = dict(self.settings.headers)
        headers.update({k: v.get_secret_value() for k, v in self._secret_headers.items()})
        result = post_json(
            self._client,
            self.settings.url,
            body,
            headers=headers,
            timeout=self.settings.timeout,
            secrets=self._secret_headers.values(),
        )
        if result.ok:
            log.debug("posted notification %s to webhook %s", notification.dedup_key, self.name)
        return result

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        # Not the URL: some webhook URLs carry a token in their path.
        host = httpx.URL(self.settings.url).host
        return f"WebhookReceiver(name={self.name!r}, host={host!r})"


def webhook_body(notification: Notification, receiver: str, external_url: str) -> dict[str, Any]:
    """The version 1 body documented above."""
    return {
        "version": BODY_VERSION,
        "receiver": receiver,
        "kind": notification.kind,
        "severity": notification.severity,
        "title": title(notification),
        "group_key": notification.group_key,
        "group_labels": dict(notification.group_labels),
        "common_labels": notification.common_labels,
        "dedup_key": notification.dedup_key,
        "notification_id": notification.id,
        "ack_url": notification.ack_url,
        "created_at": notification.created_at.isoformat(),
        "external_url": external_url.rstrip("/"),
        "alerts": [
            {**alert.to_dict(), RUNBOOK: alert.annotations.get(RUNBOOK)} for alert in notification.alerts
        ],
    }
