"""Requests of our own on kafka-python's IO loop, paced to what one connection takes.

kafka-python pauses a connection once `max_in_flight_requests_per_connection` requests (5 by
default) wait for their answers, and fails every request sent to it meanwhile at once with
`NodeNotReadyError: Node paused: max_in_flight`. Sent all at once, the describes of 5,000 groups
on three coordinators (50 requests) failed that way for 3,500 of them. So:

- `send_all` sends each broker's requests from a queue, at most `limit` at a time (one less than
  the connection's limit, which leaves kafka-python room for its own metadata requests);
- a request the connection cannot take now (`NodeNotReadyError`: paused, or backing off after a
  failed connection) is sent again after a short sleep on the loop, which lets the loop read the
  answers that free the connection, until the request's deadline;
- a broker that did not answer (connection refused or lost, timed out) fails its queued requests
  at once with the same error: a dead coordinator costs one timeout, not one per request.

Pacing also bounds what a connection being made buffers: kafka-python sends its buffered requests
all at once when the connection is made, past its limit, and those it could not write wait out the
request timeout.

Every request is bounded by the request timeout (and a few seconds of grace) from its first send,
and by `until`, the caller's bound on the whole call.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any, Final

import kafka.errors

from monitor.kafka.pyclient import KafkaPythonLoop, unavailable
from monitor.kafka.translate import FUTURE_GRACE_SECONDS

IN_FLIGHT: Final = 4
"""Requests of ours waiting for their answers on one connection: kafka-python's default limit (5)
less one for its own requests."""
_RETRY_FIRST: Final = 0.005
_RETRY_MOST: Final = 0.2

Sent = tuple[int | None, Any]
"""A request and the broker it goes to (None: the least loaded one)."""


def in_flight_limit(max_in_flight: int) -> int:
    """Our share of a connection that takes `max_in_flight` requests at once (at least one)."""
    return max(1, max_in_flight - 1)


class _Queue:
    """One broker's requests, taken in order by its senders; `failed` ends the rest at once."""

    def __init__(self) -> None:
        self.items: deque[tuple[int, Any]] = deque()
        self.failed: BaseException | None = None


async def send_all(
    loop: KafkaPythonLoop,
    requests: Sequence[Sent],
    timeout: float,
    until: float,
    limit: int = IN_FLIGHT,
) -> list[Any]:
    """The answer to each of `requests`, in order, or the exception it failed with (a request
    not sent before `until` fails with KafkaTimeoutError). Never raises. Run on the loop."""
    answers: list[Any] = [None] * len(requests)
    queues: dict[int | None, _Queue] = defaultdict(_Queue)
    for index, (node, request) in enumerate(requests):
        queues[node].items.append((index, request))
    senders = [
        loop.call_soon(_sender(loop, node, queue, answers, timeout, until))
        for node, queue in queues.items()
        for _ in range(min(max(1, limit), len(queue.items)))
    ]
    for sender in senders:
        # The senders' own waits end by `until`; this one a moment later, so that a sender cut
        # short records its failures first. Its requests left without an answer fail below.
        with contextlib.suppress(Exception):
            await loop.wait_for(sender, (max(0.0, until - time.monotonic()) + 0.5) * 1000)
    for index, answer in enumerate(answers):
        if answer is None:
            answers[index] = kafka.errors.KafkaTimeoutError("not answered within the call's time")
    return answers


def _sender(
    loop: KafkaPythonLoop,
    node: int | None,
    queue: _Queue,
    answers: list[Any],
    timeout: float,
    until: float,
) -> Callable[[], Any]:
    """A coroutine function sending `node`'s requests from `queue` one after the other."""

    async def send() -> None:
        while queue.items:
            index, request = queue.items.popleft()
            if queue.failed is not None:
                answers[index] = queue.failed
                continue
            deadline = min(time.monotonic() + timeout + FUTURE_GRACE_SECONDS, until)
            try:
                answers[index] = await _answer(loop, node, request, deadline)
            except Exception as exc:
                answers[index] = exc
                if unavailable(exc) or isinstance(exc, kafka.errors.KafkaTimeoutError):
                    queue.failed = queue.failed or exc

    return send


async def _answer(loop: KafkaPythonLoop, node: int | None, request: Any, deadline: float) -> Any:
    """`request`'s answer; sent again while the connection cannot take it, until `deadline`."""
    pause = _RETRY_FIRST
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise kafka.errors.KafkaTimeoutError(f"broker {node} could not take the request in time")
        try:
            return await loop.wait_for(loop.send(request, node_id=node), remaining * 1000)
        except kafka.errors.NodeNotReadyError:
            if time.monotonic() + pause >= deadline:
                raise
        await loop.sleep(pause)
        pause = min(pause * 2, _RETRY_MOST)
