"""Committed offsets (OffsetFetch) through kafka-python.

librdkafka's admin ListConsumerGroupOffsets is not safe while a group coordinator dies: its
handling of a request that fails on a dropped connection, or of a NOT_COORDINATOR answer, can
abort or crash the whole process (librdkafka issues 4605, 3663 and 5040; the fix, PR 5397, is not
released). Both were seen here when a broker was killed during a collection cycle, which is exactly
when the monitor must keep running. kafka-python fails such a request with an exception instead,
and it fetches the offsets of many groups in one OffsetFetch per coordinator (v8, Kafka 3.0+).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from monitor.core.records import CommittedOffset, Partial
from monitor.kafka.pyclient import KafkaPythonClient, unavailable
from monitor.kafka.translate import Outcome

GROUPS_PER_REQUEST: Final = 100
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


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class GroupOffsetsClient(KafkaPythonClient):
    """Committed offsets of consumer groups for one cluster."""

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
            for chunk in _chunks(wanted, groups_per_request):
                if in_a_row >= _UNAVAILABLE_IN_A_ROW:
                    for group_id in chunk:
                        outcome.unanswered(group_id, "not asked: the cluster had stopped answering")
                    continue
                try:
                    answers: Mapping[str, Mapping[Any, Any]] = client.list_group_offsets(chunk)
                except Exception:
                    answers = {}
                    for group_id in chunk:
                        if in_a_row >= _UNAVAILABLE_IN_A_ROW:
                            outcome.unanswered(group_id, "not asked: the cluster had stopped answering")
                            continue
                        try:
                            answers = {**answers, **client.list_group_offsets([group_id])}
                        except Exception as exc:
                            outcome.failure(group_id, exc)
                            in_a_row = in_a_row + 1 if unavailable(exc) else 0
                            stale = stale or unavailable(exc)
                for group_id, offsets in answers.items():
                    value[str(group_id)] = committed_of(str(group_id), offsets)
                    outcome.success()
                    in_a_row = 0
            failure = outcome.unreachable()
            if failure is not None:
                raise self._failed("fetch committed offsets", failure) from failure
            if stale:
                # kafka-python keeps a group's coordinator for the client's lifetime: without a
                # new client the groups of a dead coordinator would never reach the new one.
                self._discard()
        return Partial(value, outcome.errors)
