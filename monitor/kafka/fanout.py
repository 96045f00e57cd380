"""Fan-out of one-group-per-call requests (OffsetFetch) with a bounded number in flight."""

from __future__ import annotations

import concurrent.futures
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

from monitor.kafka.translate import FUTURE_GRACE_SECONDS, is_unavailable


class GroupOffsetsFanOut:
    """Runs one OffsetFetch call per group with at most `concurrency` futures pending."""

    def __init__(self, client: AdminClient, timeout: float, concurrency: int) -> None:
        self._client = client
        self._timeout = timeout
        self._concurrency = concurrency
        self.not_asked: list[str] = []

    def run(self, group_ids: Sequence[str]) -> Iterator[tuple[str, Any]]:
        """Yields (group id, `ConsumerGroupTopicPartitions` or the exception) as calls finish."""
        waiting = deque(group_ids)
        pending: dict[concurrent.futures.Future[Any], tuple[str, float]] = {}
        unavailable_in_a_row = 0
        while waiting or pending:
            tripped = unavailable_in_a_row >= self._concurrency
            while waiting and not tripped and len(pending) < self._concurrency:
                group_id = waiting.popleft()
                request = [ConsumerGroupTopicPartitions(group_id)]
                try:
                    futures = self._client.list_consumer_group_offsets(request, request_timeout=self._timeout)
                except (KafkaException, ValueError, TypeError) as exc:
                    yield group_id, exc
                    continue
                deadline = time.monotonic() + self._timeout + FUTURE_GRACE_SECONDS
                pending[futures[group_id]] = (group_id, deadline)
            if tripped:
                self.not_asked.extend(waiting)
                waiting.clear()
            if not pending:
                break
            nearest = min(deadline for _, deadline in pending.values())
            done, _ = concurrent.futures.wait(
                pending,
                timeout=max(0.0, nearest - time.monotonic()),
                return_when=concurrent.futures.FIRST_COMPLETED,
            )
            now = time.monotonic()
            for future in list(pending):
                group_id, deadline = pending[future]
                if future in done:
                    result: Any = future.exception() or future.result()
                elif deadline <= now:
                    result = TimeoutError()
                else:
                    continue
                del pending[future]
                unavailable_in_a_row = (
                    unavailable_in_a_row + 1
                    if isinstance(result, BaseException) and is_unavailable(result)
                    else 0
                )
                yield group_id, result
