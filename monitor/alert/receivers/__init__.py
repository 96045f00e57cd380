"""Notification receivers: Slack, email, PagerDuty, webhook and the console inbox.

The alert stage builds each configured receiver once (`build_receiver`, which reads its secrets),
calls `send` for each notification the outbox hands it, and records the `DeliveryResult`; the
receiver never retries by itself. The kinds are registered in `receivers/registry.py` (one line
each, beside each kind's module holding its settings and its receiver); what every kind shares is
in `receivers/config.py`, the outcome policy in `receivers/base.py`.
"""

from monitor.alert.receivers.base import Receiver, http_outcome
from monitor.alert.receivers.registry import KINDS, REGISTRY, ReceiverConfig, build_receiver, parse_receiver

__all__ = [
    "KINDS",
    "REGISTRY",
    "Receiver",
    "ReceiverConfig",
    "build_receiver",
    "http_outcome",
    "parse_receiver",
]
