"""When to try a failed delivery again: decided from the failure's type (`FailureReason`), with
an exponential backoff and jitter, until `give_up_after` has passed since the notice was decided.
Pure: `decide` is what the outbox records.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from monitor.alert.model import DeliveryResult
from monitor.core.backoff import backoff_seconds

Outcome = Literal["sent", "retry", "failed"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base_seconds: float = 2.0
    max_seconds: float = 300.0
    give_up_after_seconds: float = 86_400.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Exponential backoff with full jitter over its upper half: never a thundering herd, never 0."""
        return backoff_seconds(attempt, self.base_seconds, self.max_seconds, rng)


@dataclass(frozen=True, slots=True)
class Decision:
    """What becomes of a notification after one attempt."""

    outcome: Outcome
    next_attempt_at: datetime
    reason: str
    """The text shown in the log's `reason` and, for a failure, stored as `last_error`; for a
    delivery, whatever the receiver noted (e.g. the recipients a mail server refused)."""


def decide(
    result: DeliveryResult,
    attempt: int,
    created_at: datetime,
    now: datetime,
    policy: RetryPolicy,
    rng: random.Random,
) -> Decision:
    """Sent when delivered; retry after a backoff when the failure's type is retryable and the
    notice is younger than `give_up_after`; otherwise failed, with the reason (saying how many
    attempts were made when a retryable failure ran out of time)."""
    if result.ok:
        return Decision("sent", now, result.reason)
    expired = (now - created_at).total_seconds() >= policy.give_up_after_seconds
    if result.retryable and not expired:
        return Decision("retry", now + timedelta(seconds=policy.delay(attempt, rng)), result.reason)
    if result.retryable:
        return Decision("failed", now, f"gave up after {attempt} attempts: {result.reason}")
    return Decision("failed", now, result.reason)


def failure_label(result: DeliveryResult) -> str:
    """The `reason` label of a failed attempt: the HTTP status where there is one (`http_503`;
    an SMTP reply is `code_<n>` below 100, else `http_<n>` too: the code shows either way), else
    the failure's type (`timeout`, `connection`, `template`, ...)."""
    if result.status is not None:
        return f"http_{result.status}" if result.status >= 100 else f"code_{result.status}"
    return result.failure.value if result.failure is not None else "other"
