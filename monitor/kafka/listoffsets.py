"""ListOffsets over many partitions: chunks per leader, a few in flight, each with its own timeout.

Why chunks: librdkafka sends one ListOffsets request per leader and call, and a broker answers a
request of thousands of partitions slowly. On the local benchmark one call of 10,000 partitions
took three to four times as long as ten calls of 1,000 in flight together, and at 30,000
partitions on three brokers one call per kind overran the 10 s request timeout.

Why a bound on the chunks in flight: a broker works through its request queue a few requests at
a time (`num.io.threads`); a hundred requests sent at once only make the last ones wait out their
timeout in the queue. Each chunk gets the full request timeout from the moment it is sent.

Why per leader: a chunk then goes to one broker, so a broker that does not answer fails its own
chunks only. Once a chunk of a leader got no answer at all, that leader's chunks not sent yet are
not asked (they fail as unanswered), so a dead broker costs one timeout, not one per chunk; the
same holds for chunks without a known leader, so a dead cluster costs one timeout. Chunks not sent
within one request timeout of the start are not asked either: the whole request is bounded by
about two request timeouts. The leaders are a hint from the last metadata sample: librdkafka finds
each partition's current leader itself, a stale hint only makes a chunk span two brokers.

Why the max timestamp is asked only of some partitions: the record with the highest timestamp
cannot change while neither the end nor the start offset moves (no record was written, none was
deleted), so a partition whose offsets of the previous listing (`known`) are still its earliest
and latest keeps that max-timestamp pair. A chunk asks earliest and latest first, the max
timestamp beside them for the partitions with nothing known, and after them for those whose
offsets moved. In steady state most partitions do not move: a third of the requests, and of the
broker's work per cycle, saved.

Failure policy: every partition of a failed or unasked chunk is reported failed under its key,
the others are returned; the caller (`KafkaAdmin.list_offsets`) turns that into a `Partial`. A
partition whose leader answered the earliest offset but not the latest one with
OFFSET_NOT_AVAILABLE (high watermark held back under min ISR) is answered with an
`EndOffsetHeldBack`, not a failure.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # public, but not in `__all__`

from monitor.core.records import EndOffsetHeldBack, PartitionOffsets
from monitor.core.records import TopicPartition as TopicPartitionKey
from monitor.kafka import records
from monitor.kafka.translate import (
    FUTURE_GRACE_SECONDS,
    is_end_offset_held_back,
    is_unavailable,
    reason,
)

PARTITIONS_PER_CHUNK: Final = 1000
"""Partitions per ListOffsets call (one call per kind)."""
CHUNKS_IN_FLIGHT: Final = 6
"""Chunks sent and not yet answered at any time: two per broker of a three-broker cluster."""

SEND_WINDOW: Final = 1.0
"""Chunks are sent for this many request timeouts from the start; the ones left then are not
asked, so the whole request takes at most about SEND_WINDOW + 1 request timeouts."""

OFFSET_SPECS: Final = {
    "earliest": OffsetSpec.earliest(),  # type: ignore[no-untyped-call]
    "latest": OffsetSpec.latest(),  # type: ignore[no-untyped-call]
    "max_timestamp": OffsetSpec.max_timestamp(),  # type: ignore[no-untyped-call]
}

Answer = PartitionOffsets | EndOffsetHeldBack | BaseException | None
"""Offsets, a held-back end offset, the failure, or None for "the leader did not answer in time"."""


_Futures = Mapping[str, Mapping[TopicPartitionKey, concurrent.futures.Future[Any]]]
"""kind -> partition -> its answer to come."""


class NotAsked(TimeoutError):
    """A chunk that was not sent: its leader, or the cluster, had already failed to answer."""


@dataclass(frozen=True)
class Chunk:
    leader: int | None
    keys: list[TopicPartitionKey]


def plan_chunks(
    keys: Sequence[TopicPartitionKey],
    leaders: Mapping[TopicPartitionKey, int] | None,
    size: int | None = None,
) -> list[Chunk]:
    """`keys` in chunks of at most `size`, each of one leader (None: unknown or no leader), the
    leaders' chunks interleaved so that the chunks in flight spread over the brokers. A leader's
    partitions are split into equal chunks (3,400 -> 4 of 850, not 3 of 1,000 and one of 400).
    `size` defaults to `PARTITIONS_PER_CHUNK`."""
    size = size or PARTITIONS_PER_CHUNK
    by_leader: dict[int | None, list[TopicPartitionKey]] = defaultdict(list)
    for key in keys:
        leader = leaders.get(key) if leaders is not None else None
        by_leader[leader if leader is not None and leader >= 0 else None].append(key)
    queues: list[list[Chunk]] = []
    for leader, owned in by_leader.items():
        count = -(-len(owned) // size)
        step = -(-len(owned) // count)
        queues.append([Chunk(leader, owned[i : i + step]) for i in range(0, len(owned), step)])
    chunks: list[Chunk] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        chunks.extend(q[turn] for q in queues if turn < len(q))
    return chunks


class ChunkedListOffsets:
    """One `list_offsets` round over many partitions; `run()` returns an answer per partition.

    `client` returns the current AdminClient (it may be replaced between chunks). Blocks for at
    most about two request timeouts plus a few seconds of grace.
    """

    def __init__(
        self,
        client: Callable[[], Any],
        timeout: float,
        in_flight: int | None = None,
        known: Mapping[TopicPartitionKey, PartitionOffsets] | None = None,
        pool: concurrent.futures.Executor | None = None,
    ) -> None:
        self._client = client
        self._pool = pool
        """The caller's threads for the chunks (its size bounds the chunks in flight), kept from
        one round to the next: starting threads every cycle costs wall time on a busy machine.
        None: threads of this round's own, `in_flight` of them."""
        self._timeout = timeout
        self._in_flight = max(1, in_flight or CHUNKS_IN_FLIGHT)
        self._known: Mapping[TopicPartitionKey, PartitionOffsets] = known or {}
        self._lock = threading.Lock()
        self._silent: set[int | None] = set()  # leaders (None: unknown) that answered nothing
        self._send_until = 0.0

    def run(self, chunks: Sequence[Chunk]) -> dict[TopicPartitionKey, Answer]:
        answers: dict[TopicPartitionKey, Answer] = {}
        if not chunks:
            return answers
        self._send_until = time.monotonic() + SEND_WINDOW * self._timeout
        if len(chunks) == 1:
            return self._chunk(chunks[0])
        if self._pool is not None:
            for result in self._pool.map(self._chunk, chunks):
                answers.update(result)
            return answers
        workers = min(self._in_flight, len(chunks))
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="list-offsets") as pool:
            for result in pool.map(self._chunk, chunks):
                answers.update(result)
        return answers

    def _chunk(self, chunk: Chunk) -> dict[TopicPartitionKey, Answer]:
        """Send one chunk (one call per kind) and wait for it, unless it is not to be asked."""
        with self._lock:
            skip = chunk.leader in self._silent
        if skip or time.monotonic() > self._send_until:
            why = (
                "not asked: its leader did not answer another request"
                if skip
                else f"not asked: the other partitions took the whole {SEND_WINDOW * self._timeout:g}s"
            )
            return dict.fromkeys(chunk.keys, NotAsked(why))
        client = self._client()
        known = self._known
        unknown = [key for key in chunk.keys if key not in known]
        futures = {kind: self._ask(client, kind, chunk.keys) for kind in ("earliest", "latest")}
        futures["max_timestamp"] = self._ask(client, "max_timestamp", unknown)
        self._wait(futures)
        moved = [key for key in chunk.keys if key in known and _moved(known[key], key, futures)]
        if moved:
            futures["max_timestamp"].update(self._ask(client, "max_timestamp", moved))
            self._wait(futures)
        answers = {key: _answer(key, futures, known.get(key)) for key in chunk.keys}
        if all(a is None or (isinstance(a, BaseException) and is_unavailable(a)) for a in answers.values()):
            with self._lock:
                self._silent.add(chunk.leader)
        return answers

    def _ask(
        self, client: Any, kind: str, keys: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, concurrent.futures.Future[Any]]:
        """Send one request of `kind` for `keys` (nothing when there are none)."""
        if not keys:
            return {}
        spec = OFFSET_SPECS[kind]
        request = {TopicPartition(t, p): spec for t, p in keys}
        answer = client.list_offsets(request, request_timeout=self._timeout)
        return {(str(tp.topic), int(tp.partition)): f for tp, f in answer.items()}

    def _wait(self, futures: _Futures) -> None:
        concurrent.futures.wait(
            [f for by_partition in futures.values() for f in by_partition.values()],
            timeout=self._timeout + FUTURE_GRACE_SECONDS,
        )


def _moved(known: PartitionOffsets, key: TopicPartitionKey, futures: _Futures) -> bool:
    """Whether the max timestamp of a partition listed before must be asked again: its start or
    end offset moved (or was not answered now: the answer is then a failure anyway, and asking
    costs nothing more), or the previous listing lacked a max timestamp of a non-empty log."""
    earliest = _result_or_none(futures["earliest"][key])
    latest = _result_or_none(futures["latest"][key])
    if earliest is None or latest is None:
        return False
    start, end = int(earliest.offset), int(latest.offset)
    if start < 0 or end < 0:
        return False
    return (start, end) != (known.start, known.end) or (known.max_timestamp_offset is None and end > start)


def _answer(key: TopicPartitionKey, futures: _Futures, known: PartitionOffsets | None) -> Answer:
    try:
        earliest = futures["earliest"][key].result(timeout=0)
        latest = futures["latest"][key].result(timeout=0)
    except Exception as exc:
        if not is_end_offset_held_back(exc):
            return exc
        # The leader is there and answered: only the latest offset (or both) is held back.
        start = _result_or_none(futures["earliest"][key])
        offset = int(start.offset) if start is not None else -1
        return EndOffsetHeldBack(key[0], key[1], offset if offset >= 0 else None, reason(exc, ()))
    if int(earliest.offset) < 0 or int(latest.offset) < 0:
        # librdkafka reports a leader that did not answer in time as a "successful" answer with
        # offset -1001 (OFFSET_INVALID) instead of an error.
        return None
    asked = futures["max_timestamp"].get(key)
    if asked is None and known is not None:  # not moved: what was listed before holds
        return known
    max_timestamp = _result_or_none(asked) if asked is not None else None
    return records.partition_offsets(key[0], key[1], earliest, latest, max_timestamp)


def _result_or_none(future: concurrent.futures.Future[Any]) -> Any | None:
    try:
        return future.result(timeout=0)
    except Exception:
        return None
