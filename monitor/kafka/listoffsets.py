"""ListOffsets over many partitions: one request per leader and kind, sent straight to the leaders
through kafka-python's protocol messages.

Why not librdkafka's admin `list_offsets`: it answers every partition with a Python future of its
own, and at 10,000 partitions the futures, their `TopicPartition`s and result objects cost about
0.6 CPU-seconds a cycle, two thirds of the step's wall time (measured on the local benchmark:
0.65 s and 0.68 CPU-s against 0.1 s and 0.06-0.1 CPU-s for the same offsets asked here). A
ListOffsets request names many partitions of one leader and gets one answer with an error code
per partition, which is all the collector needs; its answer is decoded by `monitor.kafka.wire`
straight into (error code, offset, timestamp) per partition.

The requests of one call, all sent at once:

1. earliest and latest (one request each, per leader, at most `PARTITIONS_PER_REQUEST`
   partitions a request: a partition may appear once per request, so each kind is a request of
   its own), and the max timestamp beside them for the partitions with nothing `known`;
2. the max timestamp of the known partitions whose start or end offset moved (or that lacked one):
   the record with the highest timestamp cannot change while neither offset moves (no record was
   written, none deleted), so an unmoved partition keeps the pair of the previous listing. In
   steady state most partitions do not move: a third of the broker's work per cycle saved;
3. the partitions whose leader is not known (no hint in `leaders`) or had moved (NOT_LEADER ...,
   FENCED/UNKNOWN_LEADER_EPOCH) are looked up in a Metadata request and asked once more of their
   leader, when the first round left time for it.

The leaders are a hint from the last metadata sample. The requests to one broker are paced to what
its connection takes (`monitor.kafka.paced`: kafka-python refuses more). Every request is bounded by the
request timeout from the moment it is sent and the whole call by about two request timeouts: a
leader that does not answer fails its own partitions only, and costs one timeout however many
requests it was sent.

Failure policy: an answer per partition, one of `Answer`: its offsets; an `EndOffsetHeldBack`
when the leader answered its earliest offset (or nothing) but the latest with OFFSET_NOT_AVAILABLE
(high watermark held back under min ISR), which is not a failure; `NoAnswer` when its leader did
not answer; the failure otherwise. A partition's error code becomes librdkafka's `KafkaError` of
the same code (the protocol's codes are librdkafka's), so that `monitor.kafka.translate` words and
classifies it as it does every other answer of the admin client. A max timestamp that failed
alone leaves the partition without one.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import kafka.errors
from confluent_kafka import KafkaError, KafkaException
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from monitor.core.records import EndOffsetHeldBack, PartitionOffsets, TopicPartition
from monitor.kafka.paced import IN_FLIGHT, in_flight_limit, send_all
from monitor.kafka.pyclient import KafkaPythonClient, KafkaPythonLoop, unavailable
from monitor.kafka.records import partition_key
from monitor.kafka.translate import FUTURE_GRACE_SECONDS, Outcome, is_end_offset_held_back, reason
from monitor.kafka.wire import LIST_OFFSETS_MAX_VERSION, ListOffsets, ListOffsetsAnswer

PARTITIONS_PER_REQUEST: Final = 5000
"""Partitions per ListOffsets request: one request stays about 100 KB and one answer about 200 KB."""

EARLIEST: Final = -2
LATEST: Final = -1
MAX_TIMESTAMP: Final = -3
_MIN_VERSION: Final = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7}  # max timestamp: KIP-734, Kafka 3.0

_LEADER_MOVED: Final = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)

A = TypeVar("A")
V = TypeVar("V")
"""The offsets a ListOffsets answers per partition (all of them, or the end offset alone)."""

_Topic = ListOffsetsRequest.ListOffsetsTopic
_Partition = _Topic.ListOffsetsPartition


class NoAnswer(TimeoutError):
    """The partition's leader did not answer (or could not be reached) in time."""


Answer = PartitionOffsets | EndOffsetHeldBack | BaseException
"""Offsets, a held-back end offset, or why there are none (`NoAnswer`: unanswered)."""

_Reply = tuple[int, int, int] | BaseException
"""One partition's answer to one kind: (error code, offset, timestamp), or the request's failure."""


def _partition_error(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def plan_requests(
    keys: Sequence[TopicPartition], leaders: Mapping[TopicPartition, int], size: int | None = None
) -> list[tuple[int, list[TopicPartition]]]:
    """`keys` (each with a leader in `leaders`) as (leader, its partitions) in requests of at most
    `size` partitions (`PARTITIONS_PER_REQUEST` by default), a leader's partitions split into
    equal requests (3,400 at 1,000 a request: 4 of 850, not 3 of 1,000 and one of 400)."""
    size = size or PARTITIONS_PER_REQUEST
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for key in keys:
        by_leader[leaders[key]].append(key)
    planned: list[tuple[int, list[TopicPartition]]] = []
    for leader, owned in sorted(by_leader.items()):
        count = -(-len(owned) // size)
        step = -(-len(owned) // count)
        planned.extend((leader, owned[i : i + step]) for i in range(0, len(owned), step))
    return planned


def _request(keys: Sequence[TopicPartition], spec: int) -> Any:
    topics: dict[str, list[Any]] = defaultdict(list)
    for topic, partition in keys:
        topics[topic].append(_Partition(partition_index=partition, timestamp=spec, current_leader_epoch=-1))
    return ListOffsets(
        replica_id=-1,
        isolation_level=0,
        topics=[_Topic(name=name, partitions=parts) for name, parts in topics.items()],
        min_version=_MIN_VERSION[spec],
        max_version=LIST_OFFSETS_MAX_VERSION,
    )


@dataclass
class _Round:
    """The requests of one call on kafka-python's IO loop (`monitor.kafka.pyclient.KafkaPythonLoop`)."""

    manager: KafkaPythonLoop
    timeout: float
    known: Mapping[TopicPartition, PartitionOffsets]
    limit: int = IN_FLIGHT
    replies: dict[int, dict[TopicPartition, _Reply]] = field(
        default_factory=lambda: {EARLIEST: {}, LATEST: {}, MAX_TIMESTAMP: {}}
    )
    until: float = 0.0
    """No request is awaited past this time: two request timeouts (and the grace) from the start."""
    ends_only: bool = False
    """Ask the latest offsets only (`LeaderOffsetsClient.list_end_offsets`): no earliest, no max
    timestamp."""

    async def run(self, keys: list[TopicPartition], hints: Mapping[TopicPartition, int]) -> None:
        started = time.monotonic()
        self.until = started + 2 * self.timeout + FUTURE_GRACE_SECONDS
        leaders = {key: hints[key] for key in keys if hints.get(key, -1) >= 0}
        unled = [key for key in keys if key not in leaders]
        if unled:
            leaders.update(await self._leaders(unled))
        await self._ask(keys, leaders)
        moved = [key for key in keys if key not in leaders or self._leader_moved(key)]
        if moved and time.monotonic() - started < self.timeout:
            for replies in self.replies.values():
                for key in moved:
                    replies.pop(key, None)
            await self._ask(moved, await self._leaders(moved), again=True)

    def _leader_moved(self, key: TopicPartition) -> bool:
        """Whether the leader asked is not (or no longer) the partition's: it said so, or could
        not be reached at all (a broker that stopped; its partitions may have a new leader)."""
        replies = (self.replies[EARLIEST].get(key), self.replies[LATEST].get(key))
        return any(_code(r) in _LEADER_MOVED or isinstance(r, NoAnswer) for r in replies)

    async def _ask(
        self, keys: list[TopicPartition], leaders: Mapping[TopicPartition, int], again: bool = False
    ) -> None:
        """Earliest, latest and the max timestamps of `keys`; those without a leader (unknown,
        or no leader now) are answered from `leaders`' absence."""
        led = [key for key in keys if key in leaders]
        if self.ends_only:
            await self._send([(LATEST, led)], leaders)
            return
        unknown = [key for key in led if again or key not in self.known]
        await self._send([(spec, led) for spec in (EARLIEST, LATEST)] + [(MAX_TIMESTAMP, unknown)], leaders)
        moved = [key for key in led if not again and key in self.known and self._moved(key)]
        await self._send([(MAX_TIMESTAMP, moved)], leaders)

    def _moved(self, key: TopicPartition) -> bool:
        """Whether the max timestamp of a partition listed before must be asked again: its start
        or end offset moved, or the previous listing lacked a max timestamp of a non-empty log. A
        partition whose offsets did not come back is not asked: it fails anyway."""
        earliest, latest = self.replies[EARLIEST].get(key), self.replies[LATEST].get(key)
        if not isinstance(earliest, tuple) or not isinstance(latest, tuple) or earliest[0] or latest[0]:
            return False
        known = self.known[key]
        start, end = earliest[1], latest[1]
        return (start, end) != (known.start, known.end) or (
            known.max_timestamp_offset is None and end > start
        )

    async def _send(
        self, asked: list[tuple[int, list[TopicPartition]]], leaders: Mapping[TopicPartition, int]
    ) -> None:
        """Every request of `asked` (spec, partitions), paced per leader (`monitor.kafka.paced`);
        returns when all are answered or failed, or the call's time is up."""
        planned = [
            (spec, leader, chunk) for spec, keys in asked for leader, chunk in plan_requests(keys, leaders)
        ]
        if not planned:
            return
        deadline = min(time.monotonic() + self.timeout + FUTURE_GRACE_SECONDS, self.until)
        requests = [(leader, _request(chunk, spec)) for spec, leader, chunk in planned]
        answers = await send_all(self.manager, requests, self.timeout, deadline, self.limit)
        for (spec, leader, keys), response in zip(planned, answers, strict=True):
            replies = self.replies[spec]
            if isinstance(response, BaseException):
                failure = _no_answer(response, leader, self.timeout)
                for key in keys:
                    replies[key] = failure
                continue
            answer: ListOffsetsAnswer = response
            replies.update(answer.replies)
            for key in keys:
                replies.setdefault(key, NoAnswer(f"broker {leader} left it out of its answer"))

    async def _leaders(self, keys: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The current leaders of `keys` from a Metadata request (partitions without one, of
        unknown topics or not answered left out: they are answered as such by `answer`)."""
        topics = sorted({topic for topic, _ in keys})
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        try:
            response = await self.manager.wait_for(self.manager.send(request), self.timeout * 1000)
        except Exception as exc:
            failure = _no_answer(exc, None, self.timeout)
            for key in keys:
                self.replies[LATEST][key] = failure
            return {}
        wanted = set(keys)
        found: dict[TopicPartition, int] = {}
        for topic in response.topics:
            name = str(topic.name)
            for p in topic.partitions:
                key = (name, int(p.partition_index))
                if key not in wanted:
                    continue
                if topic.error_code or p.error_code or int(p.leader_id) < 0:
                    code = topic.error_code or p.error_code or KafkaError.LEADER_NOT_AVAILABLE
                    self.replies[LATEST][key] = (int(code), -1, -1)
                else:
                    found[key] = int(p.leader_id)
        for key in wanted - found.keys():
            self.replies[LATEST].setdefault(key, (KafkaError.UNKNOWN_TOPIC_OR_PART, -1, -1))
        return found

    def end(self, key: TopicPartition) -> int | EndOffsetHeldBack | BaseException:
        """One partition's latest offset (an ends-only round), its held-back end or the failure."""
        reply = self.replies[LATEST].get(key)
        refused = _refused(key, reply, None)
        if refused is not None:
            return refused
        assert isinstance(reply, tuple)  # (`_refused` answers every other reply)
        return reply[1] if reply[1] >= 0 else NoAnswer("its leader answered no offset")

    def answer(self, key: TopicPartition) -> Answer:
        """One partition's answer from its replies (see the module's failure policy). As
        librdkafka's did: the first of earliest and latest that failed decides, and a held-back
        one makes an `EndOffsetHeldBack`, with the start offset when that was answered."""
        earliest = self.replies[EARLIEST].get(key)
        latest = self.replies[LATEST].get(key)
        start = earliest[1] if isinstance(earliest, tuple) and not earliest[0] and earliest[1] >= 0 else None
        for reply in (earliest, latest) if earliest is not None else (latest,):
            refused = _refused(key, reply, start)
            if refused is not None:
                return refused
        if not isinstance(earliest, tuple) or not isinstance(latest, tuple):
            return NoAnswer("its leader did not answer the earliest offset")
        if earliest[1] < 0 or latest[1] < 0:
            return NoAnswer("its leader answered no offset")
        asked = self.replies[MAX_TIMESTAMP].get(key)
        known = self.known.get(key)
        if asked is None and known is not None:  # not moved: what was listed before holds
            return known
        max_offset = max_ms = None
        if isinstance(asked, tuple) and not asked[0] and asked[1] >= 0:
            max_offset, max_ms = asked[1], (asked[2] if asked[2] >= 0 else None)
        return PartitionOffsets(key[0], key[1], earliest[1], latest[1], max_offset, max_ms)


def _refused(
    key: TopicPartition, reply: _Reply | None, start: int | None
) -> BaseException | EndOffsetHeldBack | None:
    """Why one reply of a partition gives no offset: not asked, the request's failure, the
    partition's error, or its end held back (with `start` when known); None when it gives one."""
    if reply is None:
        return NoAnswer("its leader was not asked: the other partitions took the whole call")
    if isinstance(reply, BaseException):
        return reply
    if reply[0]:
        failure = _partition_error(reply[0])
        if not is_end_offset_held_back(failure):
            return failure
        return EndOffsetHeldBack(key[0], key[1], start, reason(failure, ()))
    return None


def _code(reply: _Reply | None) -> int | None:
    return reply[0] if isinstance(reply, tuple) else None


def _no_answer(exc: BaseException, leader: int | None, timeout: float) -> BaseException:
    """A request's failure as every partition's answer: `NoAnswer` when the broker did not answer."""
    if isinstance(exc, kafka.errors.KafkaTimeoutError | TimeoutError) or unavailable(exc):
        who = f"broker {leader}" if leader is not None else "the cluster"
        return NoAnswer(f"{who} did not answer within {timeout:g}s ({exc or type(exc).__name__})")
    return exc


def sorted_answers(
    answers: Mapping[TopicPartition, V | EndOffsetHeldBack | BaseException], outcome: Outcome
) -> tuple[dict[TopicPartition, V], dict[TopicPartition, EndOffsetHeldBack]]:
    """A call's answers as the offsets of the partitions that answered and the held-back ends,
    each failure and unanswered partition counted in `outcome` (as "topic:partition")."""
    value: dict[TopicPartition, V] = {}
    held_back: dict[TopicPartition, EndOffsetHeldBack] = {}
    for key, answer in answers.items():
        if isinstance(answer, EndOffsetHeldBack):
            held_back[key] = answer
            outcome.success()
        elif isinstance(answer, NoAnswer):
            outcome.unanswered(partition_key(*key), str(answer))
        elif isinstance(answer, BaseException):
            outcome.failure(partition_key(*key), answer)
        else:
            value[key] = answer
            outcome.success()
    return value, held_back


class LeaderOffsetsClient(KafkaPythonClient):
    """ListOffsets of one cluster's partitions, asked of their leaders (see the module)."""

    def list_offsets(
        self,
        keys: Sequence[TopicPartition],
        leaders: Mapping[TopicPartition, int] | None = None,
        known: Mapping[TopicPartition, PartitionOffsets] | None = None,
    ) -> dict[TopicPartition, Answer]:
        """An answer for every one of `keys` (see the module's failure policy). Blocks for at
        most about two request timeouts. Raises only when the client cannot be made:
        `KafkaUnavailableError` when no broker answers its bootstrap, `ConfigError` for options
        kafka-python rejects; a cluster that stops answering later makes every partition a
        `NoAnswer`."""
        return self._ask(keys, leaders, _Round.answer, known=known or {})

    def list_end_offsets(
        self, keys: Sequence[TopicPartition], leaders: Mapping[TopicPartition, int] | None = None
    ) -> dict[TopicPartition, int | EndOffsetHeldBack | BaseException]:
        """The latest offset of every one of `keys` only: one request per leader, a third of
        `list_offsets`' (the refresh of the end offsets between two cycles). Failures as
        `list_offsets`' (`NoAnswer`, the partition's error, `EndOffsetHeldBack`)."""
        return self._ask(keys, leaders, _Round.end, ends_only=True)

    def _ask(
        self,
        keys: Sequence[TopicPartition],
        leaders: Mapping[TopicPartition, int] | None,
        answer: Callable[[_Round, TopicPartition], A],
        known: Mapping[TopicPartition, PartitionOffsets] | None = None,
        ends_only: bool = False,
    ) -> dict[TopicPartition, A | BaseException]:
        """Run one round over `keys` and answer each key from it (`answer`); a call that failed as
        a whole makes every unanswered key its failure."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        call_failure: BaseException | None = None
        with self._lock:
            self._require_started()
            connection = self._connect()
            limit = in_flight_limit(connection.max_in_flight)
            call = _Round(connection.loop, self.timeout, known or {}, limit, ends_only=ends_only)
            try:
                connection.loop.run(call.run, wanted, leaders or {})
            except Exception as exc:
                call_failure = _no_answer(exc, None, self.timeout)
            answers: dict[TopicPartition, A | BaseException] = {key: answer(call, key) for key in wanted}
            if call_failure is not None:
                answers = {key: call_failure if isinstance(a, NoAnswer) else a for key, a in answers.items()}
            if all(isinstance(a, NoAnswer) for a in answers.values()):
                self._discard()  # connect afresh next time: the brokers may have moved
        return answers
