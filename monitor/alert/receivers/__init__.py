"""Notification receivers: Slack, email, PagerDuty, webhook and the console inbox.

The alert stage builds each configured receiver once (`build_receiver`, which reads its secrets),
calls `send` for each notification the outbox hands it, and records the `DeliveryResult`; the
receiver never retries by itself. Configuration (`receivers:` in `alert_rules/routing.yaml`) is
documented in `receivers/config.py`, the outcome policy in `receivers/base.py`.
"""

from monitor.alert.receivers.base import Receiver, build_receiver, http_outcome
from monitor.alert.receivers.config import KINDS, ReceiverConfig, parse_receiver

__all__ = ["KINDS", "Receiver", "ReceiverConfig", "build_receiver", "http_outcome", "parse_receiver"]
