"""The one table of receiver kinds: kind -> (its configuration model, how to build its receiver).

Adding a kind is a module beside this one (its settings model, a `ReceiverConfigBase` subclass
naming the kind, and a receiver class with `from_config`), one line in `REGISTRY` below, and its
templates in `templates/notifications/`. Parsing `receivers:` entries, checking the routing file
and building receivers all read this table; nothing else lists the kinds.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Final, TypeAlias

from pydantic import PlainValidator

from monitor.alert.receivers.alertmanager import AlertmanagerReceiver, AlertmanagerReceiverConfig
from monitor.alert.receivers.base import Receiver
from monitor.alert.receivers.config import ReceiverConfigBase
from monitor.alert.receivers.console import ConsoleReceiver, ConsoleReceiverConfig
from monitor.alert.receivers.email import EmailReceiver, EmailReceiverConfig
from monitor.alert.receivers.pagerduty import PagerDutyReceiver, PagerDutyReceiverConfig
from monitor.alert.receivers.slack import SlackReceiver, SlackReceiverConfig
from monitor.alert.receivers.webhook import WebhookReceiver, WebhookReceiverConfig
from monitor.alert.render import Templates


@dataclass(frozen=True, slots=True)
class ReceiverKind:
    """One kind of receiver: the model of its `receivers:` entry and the receiver's constructor
    (which reads the secrets and raises ConfigError when one is missing; it never connects)."""

    config: type[ReceiverConfigBase]
    build: Callable[[Any, Templates], Receiver]
    incidents: bool = False
    """The destination keeps an incident per dedup key (a pager): it is sent the resolved notice
    that closes the incident whatever the route's `send_resolved`, and no resolved alerts inside
    a notice of a still-firing group (its incident resolves with the group)."""

    @property
    def name(self) -> str:
        return self.config.kind


REGISTRY: Final[Mapping[str, ReceiverKind]] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            ReceiverKind(SlackReceiverConfig, SlackReceiver.from_config),
            ReceiverKind(EmailReceiverConfig, EmailReceiver.from_config),
            ReceiverKind(PagerDutyReceiverConfig, PagerDutyReceiver.from_config, incidents=True),
            ReceiverKind(WebhookReceiverConfig, WebhookReceiver.from_config),
            ReceiverKind(ConsoleReceiverConfig, ConsoleReceiver.from_config),
            ReceiverKind(AlertmanagerReceiverConfig, AlertmanagerReceiver.from_config),
        )
    }
)
KINDS: Final[tuple[str, ...]] = tuple(REGISTRY)


def kinds_in(data: Mapping[str, Any]) -> list[str]:
    """The registered kind keys present in one `receivers:` entry."""
    return [kind for kind in KINDS if kind in data]


def _check_one_kind(data: Mapping[str, Any]) -> dict[str, Any]:
    """The shape check before a model is picked, so the message can say what is wrong.
    A kind key with nothing under it (`console:`) stands for its defaults."""
    kinds = kinds_in(data)
    if len(kinds) > 1:
        raise ValueError(
            f"receiver has {' and '.join(kinds)}: give each kind its own receiver with its own name"
        )
    if not kinds:
        hint = ""
        for key in (str(key) for key in data if key != "name"):
            close = difflib.get_close_matches(key, KINDS, n=1)
            if close:
                hint = f" (did you mean {close[0]!r} instead of {key!r}?)"
                break
        raise ValueError(f"receiver needs one kind key besides name: one of {', '.join(KINDS)}{hint}")
    if data[kinds[0]] is None:
        return {**data, kinds[0]: {}}
    return dict(data)


def parse_receiver(data: Mapping[str, Any]) -> ReceiverConfigBase:
    """Validate one entry of `receivers:` into its kind's model.

    Raises ValueError when the entry is not a mapping with exactly one kind key, and
    pydantic's ValidationError (locations relative to the entry, e.g. `("slack", "token_env")`)
    for anything else. Neither carries secret values. Secrets are not read here:
    see `build_receiver`.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a receiver must be a mapping with name and one of {', '.join(KINDS)}")
    checked = _check_one_kind(data)
    return REGISTRY[kinds_in(checked)[0]].config.model_validate(checked)


def _as_config(data: Any) -> ReceiverConfigBase:
    return data if isinstance(data, ReceiverConfigBase) else parse_receiver(data)


ReceiverConfig: TypeAlias = Annotated[ReceiverConfigBase, PlainValidator(_as_config)]
"""One receiver of any registered kind, usable as a field type (`receivers: list[ReceiverConfig]`)."""


def build_receiver(config: ReceiverConfigBase, templates: Templates) -> Receiver:
    """The receiver for `config`, with its secrets read now.

    Raises ConfigError when a secret is missing or unreadable, or a CA file does not load.
    Nothing connects until the first `send`.
    """
    kind = REGISTRY.get(config.kind)
    if kind is None or not isinstance(config, kind.config):
        raise TypeError(f"not a registered receiver configuration: {type(config).__name__}")
    return kind.build(config, templates)
