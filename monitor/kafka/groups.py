"""Committed offsets (OffsetFetch) through kafka-python.

librdkafka's admin ListConsumerGroupOffsets is not safe while a group coordinator dies: its
handling of a request that fails on a dropped connection, or of a NOT_COORDINATOR answer, can
abort or crash the whole process (librdkafka issues 4605, 3663 and 5040; the fix, PR 5397, is not
released). Both were seen here when a broker was killed during a collection cycle, which is exactly
when the monitor must keep running. kafka-python fails such a request with an exception instead,
and it fetches the offsets of many groups in one OffsetFetch per coordinator (v8, Kafka 3.0+).

The OffsetFetch v8 requests are sent here (`fetch_committed`) rather than by kafka-python's
`list_group_offsets`: one request per coordinator, sent together (paced to what a connection
takes, `monitor.kafka.paced`) rather than one after the other, and their answers decoded by
`monitor.kafka.wire` straight into `CommittedOffset` records
(kafka-python's objects, its `OffsetAndMetadata` dicts and the records made from them cost about
0.09 CPU-s per 100 groups of 200 partitions). Brokers before Kafka 3.0 are asked through
`list_group_offsets` (one group per request).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final

import kafka.errors
from kafka.protocol.consumer.group import OffsetFetchRequest

from monitor.core.records import CommittedOffset, Partial
from monitor.core.settings import ClusterConfig
from monitor.kafka.coordinators import chunks, find_coordinators
from monitor.kafka.paced import in_flight_limit, send_all
from monitor.kafka.pyclient import Connection, KafkaPythonClient, KafkaPythonLoop, newest_version, unavailable
from monitor.kafka.translate import FUTURE_GRACE_SECONDS, Outcome
from monitor.kafka.wire import OFFSET_FETCH_VERSION, OffsetFetchAnswer, offset_fetch_request

GROUPS_PER_REQUEST: Final = 100
_COORDINATOR_ATTEMPTS: Final = 2
_COORDINATOR_MOVED: Final = frozenset(
    error.errno
    for error in (
        kafka.errors.NotCoordinatorError,
        kafka.errors.CoordinatorNotAvailableError,
        kafka.errors.CoordinatorLoadInProgressError,
    )
)
"""A group's error codes that say to find its coordinator again (14, 15, 16)."""
_UNAVAILABLE_IN_A_ROW: Final = 20
"""After this many groups in a row found their coordinator unreachable the rest are not asked:
a dead cluster costs a few failures, not one per group."""


def committed_of(group_id: str, offsets: Mapping[Any, Any]) -> list[CommittedOffset]:
    """One group's answer (TopicPartition -> OffsetAndMetadata) as records, sorted; partitions
    without a committed offset (-1) are left out. One plain loop: a cold start turns 100,000 of
    these into records while nothing else can answer."""
    committed: list[CommittedOffset] = []
    append = committed.append
    for tp, meta in offsets.items():
        if meta is None or meta.offset is None:
            continue
        offset = int(meta.offset)
        if offset < 0:
            continue
        append(CommittedOffset(group_id, str(tp.topic), int(tp.partition), offset, _epoch(meta)))
    committed.sort(key=_topic_partition)
    return committed


def _topic_partition(c: CommittedOffset) -> tuple[str, int]:
    return (c.topic, c.partition)


def _epoch(meta: Any) -> int | None:
    epoch = getattr(meta, "leader_epoch", None)
    return int(epoch) if epoch is not None and int(epoch) >= 0 else None


def fetch_committed(
    client: Connection, group_ids: list[str], coordinators: dict[str, int], timeout: float
) -> dict[str, list[CommittedOffset]]:
    """The committed offsets of `group_ids` through kafka-python `client`, as its
    `list_group_offsets` answers them: every group answered, or an exception (a coordinator that
    did not answer, a group or one of its partitions that failed: kafka-python's error for its
    code) for the whole call. `coordinators` (group -> broker) is the caller's cache of where
    groups were found; the groups missing from it are looked up and added."""
    if newest_version(client, OffsetFetchRequest) < OFFSET_FETCH_VERSION:
        answers: Mapping[str, Mapping[Any, Any]] = client.admin.list_group_offsets(group_ids)
        return {str(g): committed_of(str(g), offsets) for g, offsets in answers.items()}
    limit = in_flight_limit(client.max_in_flight)
    found: dict[str, list[CommittedOffset]] = client.loop.run(
        _fetch_v8, client.loop, group_ids, coordinators, timeout, limit
    )
    return found


async def _fetch_v8(
    loop: KafkaPythonLoop, group_ids: list[str], coordinators: dict[str, int], timeout: float, limit: int
) -> dict[str, list[CommittedOffset]]:
    """One OffsetFetch v8 per coordinator, paced (`monitor.kafka.paced`): the coordinators work
    on theirs while an answer is decoded. A group whose coordinator moved since it was found
    (NOT_COORDINATOR, and the other coordinator errors) is looked up afresh and asked once more:
    a rolling restart moves every coordinator in turn, and costs no cycle its committed offsets."""
    found: dict[str, list[CommittedOffset]] = {}
    pending = group_ids
    for attempt in range(1, _COORDINATOR_ATTEMPTS + 1):
        moved = await _fetch_v8_once(loop, pending, coordinators, timeout, limit, found)
        if not moved:
            break
        for group_id, _ in moved:
            coordinators.pop(group_id, None)
        if attempt == _COORDINATOR_ATTEMPTS:
            group_id, code = moved[0]
            raise kafka.errors.for_code(code)(f"OffsetFetch failed for group {group_id!r}")
        pending = [group_id for group_id, _ in moved]
    return found


async def _fetch_v8_once(
    loop: KafkaPythonLoop,
    group_ids: list[str],
    coordinators: dict[str, int],
    timeout: float,
    limit: int,
    found: dict[str, list[CommittedOffset]],
) -> list[tuple[str, int]]:
    """Asks for `group_ids` and adds their offsets to `found`; returns the groups (and codes)
    whose coordinator answered that it is not theirs."""
    unknown = [g for g in group_ids if g not in coordinators]
    if unknown:
        failures: list[BaseException] = []
        coordinators.update(
            await find_coordinators(loop, unknown, timeout, lambda _, exc: failures.append(exc), limit)
        )
        if failures:
            raise failures[0]
    by_coordinator: dict[int, list[str]] = defaultdict(list)
    for group_id in group_ids:
        by_coordinator[coordinators[group_id]].append(group_id)
    asked = list(by_coordinator.items())
    until = time.monotonic() + timeout + FUTURE_GRACE_SECONDS
    answers = await send_all(
        loop, [(node, offset_fetch_request(groups)) for node, groups in asked], timeout, until, limit
    )
    moved: list[tuple[str, int]] = []
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
        fetched: OffsetFetchAnswer = answer
        for group in fetched.groups:
            if group.error_code in _COORDINATOR_MOVED:
                moved.append((group.group_id, group.error_code))
                continue
            code = group.error_code or group.partition_error_code
            if code:
                where = "" if group.error_code else " on one of its partitions"
                raise kafka.errors.for_code(code)(f"OffsetFetch failed for group {group.group_id!r}{where}")
            found[group.group_id] = group.committed
    return moved


class GroupOffsetsClient(KafkaPythonClient):
    """Committed offsets of consumer groups for one cluster."""

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster)
        self._coordinators: dict[str, int] = {}
        """Where each group was found, kept with the client (`_discard` forgets both)."""

    def _discard(self) -> None:
        self._coordinators.clear()
        super()._discard()

    def committed_offsets(
        self, group_ids: Sequence[str], groups_per_request: int = GROUPS_PER_REQUEST
    ) -> Partial[dict[str, list[CommittedOffset]]]:
        """Each group's committed offsets (partitions without one are left out).

        Groups go `groups_per_request` to a call (one OffsetFetch per coordinator). A coordinator
        that does not answer fails its whole call, so then each group of that call is asked
        alone and only the groups of that coordinator fail (in `errors` under their id); the
        client is then replaced, so the next call finds their coordinators afresh. Each request
        is bounded by `request_timeout_seconds`. Raises KafkaUnavailableError when no
        group answered because the cluster did not, KafkaRequestError when it refused the client.
        """
        if groups_per_request < 1:
            raise ValueError("groups_per_request must be at least 1")
        wanted = list(dict.fromkeys(group_ids))
        value: dict[str, list[CommittedOffset]] = {}
        outcome = Outcome(self._options.secret_values(), self.timeout, unavailable)
        if not wanted:
            return Partial(value, outcome.errors)
        with self._lock:
            self._require_started()
            client = self._connect()
            in_a_row = 0
            stale = False
            for chunk in chunks(wanted, groups_per_request):
                if in_a_row >= _UNAVAILABLE_IN_A_ROW:
                    for group_id in chunk:
                        outcome.unanswered(group_id, "not asked: the cluster had stopped answering")
                    continue
                try:
                    answers = fetch_committed(client, chunk, self._coordinators, self.timeout)
                except Exception:
                    answers = {}
                    for group_id in chunk:
                        if in_a_row >= _UNAVAILABLE_IN_A_ROW:
                            outcome.unanswered(group_id, "not asked: the cluster had stopped answering")
                            continue
                        try:
                            answers.update(
                                fetch_committed(client, [group_id], self._coordinators, self.timeout)
                            )
                        except Exception as exc:
                            outcome.failure(group_id, exc)
                            in_a_row = in_a_row + 1 if unavailable(exc) else 0
                            stale = stale or unavailable(exc)
                for group_id, committed in answers.items():
                    value[group_id] = committed
                    outcome.success()
                    in_a_row = 0
            failure = outcome.unreachable()
            if failure is not None:
                raise self._failed("fetch committed offsets", failure) from failure
            if stale:
                # A group's coordinator is kept for the client's lifetime: without a new client
                # the groups of a dead coordinator would never reach the new one.
                self._discard()
        return Partial(value, outcome.errors)
