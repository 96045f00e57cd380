"""What the offsets job remembers across cycles, and the one store read of a cycle.

The job keeps in memory what it learnt (record timestamps, the previous committed offsets, the
last end offsets listed). What memory lacks (after a start, or for records not seen before) is
asked of the store in one read per cycle (`read_store`), on one connection, before any
computation: the persisted timestamps of the records the cycle needs, the stored end offsets of
the partitions whose leader holds theirs back, the end-offset history around the offsets of
lagging groups (for interpolation, should their records not be read) and, once after a start,
the last committed offsets. The store's answers only save Kafka reads or refine estimates: with
PostgreSQL unavailable the cycle goes on without them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cachetools import LRUCache
from sqlalchemy import Connection

from monitor.collect.lag import GroupKey, KnownEnd, Target
from monitor.core.clock import to_millis
from monitor.core.records import RecordTimestamp, TopicPartition
from monitor.store.history import end_offset_brackets
from monitor.store.samples import cached_timestamps, latest_committed, latest_end_offsets

HISTORY_WINDOW = timedelta(days=7)
"""How far back the end-offset history is read for interpolation."""


class TimestampCache:
    """Record timestamps by (topic, partition, offset), least recently used evicted first.

    Records never change, so an entry is valid for as long as the record exists.
    """

    def __init__(self, max_entries: int) -> None:
        self._entries: LRUCache[Target, RecordTimestamp] = LRUCache(maxsize=max_entries)

    def get_many(self, keys: Iterable[Target]) -> dict[Target, RecordTimestamp]:
        found = {}
        for key in keys:
            value = self._entries.get(key)
            if value is not None:
                found[key] = value
        return found

    def put_many(self, values: Iterable[RecordTimestamp]) -> None:
        for value in values:
            self._entries[(value.topic, value.partition, value.offset)] = value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class StoreRequest:
    """What one cycle needs from the store because memory lacks it."""

    timestamps: list[Target] = field(default_factory=list)
    ends: list[TopicPartition] = field(default_factory=list)
    history: set[Target] = field(default_factory=set)
    previous_commits: bool = False

    def __bool__(self) -> bool:
        return bool(self.timestamps or self.ends or self.history or self.previous_commits)


@dataclass
class StoreAnswer:
    timestamps: dict[Target, RecordTimestamp] = field(default_factory=dict)
    ends: dict[TopicPartition, KnownEnd] = field(default_factory=dict)
    history: dict[TopicPartition, list[tuple[int, int]]] = field(default_factory=dict)
    """(end offset, observed ms) samples around the requested offsets, ascending in time."""
    previous_commits: dict[GroupKey, int] | None = None
    """None when not asked for."""


def read_store(conn: Connection, cluster: str, request: StoreRequest, now: datetime) -> StoreAnswer:
    """Everything `request` asks for, on one connection."""
    answer = StoreAnswer()
    if request.timestamps:
        answer.timestamps = cached_timestamps(conn, cluster, request.timestamps)
    if request.ends:
        stored = latest_end_offsets(conn, cluster, request.ends)
        answer.ends = {key: KnownEnd(start, end, to_millis(at)) for key, (start, end, at) in stored.items()}
    # The history only stands in for records not read: those the persisted cache holds need none.
    history = {t for t in request.history if t not in answer.timestamps}
    if history:
        brackets = end_offset_brackets(conn, cluster, history, now - HISTORY_WINDOW)
        answer.history = {tp: [(end, to_millis(at)) for end, at in points] for tp, points in brackets.items()}
    if request.previous_commits:
        latest = latest_committed(conn, cluster)
        answer.previous_commits = {key: offset for key, (offset, _) in latest.items()}
    return answer
