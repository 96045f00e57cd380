"""Group coordinators found with FindCoordinator requests of our own (kafka-python's lookup is
private, and caches a coordinator for the client's lifetime, so that the groups of a coordinator
that died would keep going to it).

FindCoordinator v4+ (Kafka 3.0) names up to `_KEYS_PER_FIND` groups a request; before, one group
a request. The requests are paced (`monitor.kafka.paced`). A request that got no answer is asked
once more (the least loaded broker it went to may be the one that died).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import kafka.errors
from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest

from monitor.kafka.paced import IN_FLIGHT, send_all
from monitor.kafka.pyclient import KafkaPythonLoop, unavailable
from monitor.kafka.translate import FUTURE_GRACE_SECONDS

_KEYS_PER_FIND: Final = 500
_FIND_ATTEMPTS: Final = 2
_GROUP: Final = CoordinatorType.GROUP.value

Failed = Callable[[str, BaseException], None]
"""Called with a group whose coordinator could not be found and why."""


def chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def error_of(code: int, message: object) -> kafka.errors.KafkaError:
    """kafka-python's exception for an error code of an answer, with the broker's message."""
    error_type: type[kafka.errors.KafkaError] = kafka.errors.for_code(code)
    return error_type(str(message)) if message else error_type()


async def find_coordinators(
    loop: KafkaPythonLoop,
    group_ids: Sequence[str],
    timeout: float,
    failed: Failed,
    limit: int = IN_FLIGHT,
) -> dict[str, int]:
    """The coordinator (broker id) of each of `group_ids` that has one now; each other group is
    handed to `failed` once. Asked afresh on every call. Run on the loop."""
    found: dict[str, int] = {}
    pending = list(chunks(list(group_ids), _KEYS_PER_FIND))
    for attempt in range(1, _FIND_ATTEMPTS + 1):
        until = time.monotonic() + timeout + FUTURE_GRACE_SECONDS
        batched = [(None, _batched(keys)) for keys in pending]
        answers = await send_all(loop, batched, timeout, until, limit)
        retry: list[list[str]] = []
        for keys, answer in zip(pending, answers, strict=True):
            if isinstance(answer, kafka.errors.IncompatibleBrokerVersion):
                answer = await _one_by_one(loop, keys, timeout, until, limit)
            elif not isinstance(answer, BaseException):
                answer = [(str(c.key), c.error_code, c.error_message, c.node_id) for c in answer.coordinators]
            if isinstance(answer, BaseException):
                if attempt < _FIND_ATTEMPTS and unavailable(answer):
                    retry.append(keys)
                    continue
                for group_id in keys:
                    failed(group_id, answer)
                continue
            for group_id, code, message, node in answer:
                if code:
                    failed(group_id, error_of(code, message))
                else:
                    found[group_id] = int(node)
        pending = retry
        if not pending:
            break
    return found


def _batched(keys: list[str]) -> Any:
    return FindCoordinatorRequest(key_type=_GROUP, coordinator_keys=keys, min_version=4)


async def _one_by_one(
    loop: KafkaPythonLoop, keys: list[str], timeout: float, until: float, limit: int
) -> list[tuple[str, int, object, int]] | BaseException:
    """Before Kafka 3.0 a FindCoordinator names one group. The first request that failed fails
    them all (as the batched request would), so that they are asked again together."""
    requests = [(None, FindCoordinatorRequest(key=key, key_type=_GROUP, max_version=3)) for key in keys]
    answers = await send_all(loop, requests, timeout, until, limit)
    found: list[tuple[str, int, object, int]] = []
    for key, answer in zip(keys, answers, strict=True):
        if isinstance(answer, BaseException):
            return answer
        found.append((key, answer.error_code, answer.error_message, answer.node_id))
    return found
