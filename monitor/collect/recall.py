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

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection

from monitor.collect.lag import GroupKey, KnownEnd, Target
from monitor.core.clock import to_millis
from monitor.core.records import RecordTimestamp, TopicPartition
from monitor.store.history import end_offset_brackets
from monitor.store.samples import cached_offset_marks, cached_timestamps, latest_committed, latest_end_offsets

HISTORY_WINDOW = timedelta(days=7)
"""How far back the end-offset history is read for interpolation."""


KEEP_CYCLES = 10
"""Offsets cycles a record timestamp stays in memory without being asked for."""


class TimestampCache:
    """Record timestamps by (topic, partition, offset): those asked for or learnt within the last
    `keep_cycles` offsets cycles (`next_cycle`), at most `max_entries` of them, the least recently
    used evicted first.

    Records never change, so an entry is valid for as long as the record exists; but a cycle asks
    only for the committed offsets of the groups that moved, so the record of a group's previous
    committed offset is asked again only if the group goes back to it. Kept by count alone, the
    entries of offsets passed long ago filled the cache: at 10,000 group-partitions it grew by
    about 19,000 entries (5 MB) a minute towards its 500,000, about 140 MB (docs/bench/footprint.md,
    `timestamp-cycles`). An entry dropped and asked for again is read from the store (its
    persisted copy, `record_timestamps`), not from Kafka.

    The entries and, in an OrderedDict from the least recently used, the cycle each was last used
    in: a hit is two operations in C. (cachetools' TTLCache did the same in Python: 0.25 s for
    100,000 hits where this takes 0.05 s, about 4 % of the daemon's Python at 100,000
    group-partitions.)

    What memory lacks is asked of the store only where the store may hold it (`may_be_stored`):
    nearly every record a cycle misses is one never read before (a group's new committed
    offset), and looking each up in the store found nothing at a cost: at 10,000
    group-partitions, 6,000 index lookups a cycle, 9 % of PostgreSQL's time, none found
    (docs/bench/targets.md, "Where the steady CPU goes"). The store holds a partition's records up to the
    highest offset it held at the start (`learn_marks`) and those this process read since, which
    memory holds until they are dropped: beyond both marks, a record is not in the store.
    """

    def __init__(self, max_entries: int, keep_cycles: int = KEEP_CYCLES) -> None:
        self._max_entries, self._keep_cycles, self._cycle = max_entries, keep_cycles, 0
        self._entries: dict[Target, RecordTimestamp] = {}
        self._used: OrderedDict[Target, int] = OrderedDict()
        self._stored: dict[TopicPartition, int] | None = None
        """Per partition, the highest offset the store held at the start; None until known."""
        self._dropped: dict[TopicPartition, int] = {}
        """Per partition, the highest offset of an entry dropped from memory."""

    @property
    def marks_known(self) -> bool:
        """Whether the store's marks have been learnt (`learn_marks`)."""
        return self._stored is not None

    def learn_marks(self, stored: dict[TopicPartition, int] | None) -> None:
        """The highest offset per partition the store holds (None: not read, still unknown)."""
        if stored is not None and self._stored is None:
            self._stored = stored

    def may_be_stored(self, key: Target) -> bool:
        """Whether the store may hold `key`'s record where memory does not: always while its
        marks are unknown; else at or below the partition's highest offset stored at the start or
        dropped from memory since (a record read since and not dropped is in memory)."""
        if key in self._entries:
            return False
        if self._stored is None:
            return True
        topic, partition, offset = key
        mark = max(self._stored.get((topic, partition), -1), self._dropped.get((topic, partition), -1))
        return offset <= mark

    def _drop(self, key: Target) -> None:
        del self._entries[key]
        topic, partition, offset = key
        if offset > self._dropped.get((topic, partition), -1):
            self._dropped[(topic, partition)] = offset

    def next_cycle(self) -> None:
        """A new offsets cycle: the entries not asked for nor learnt in the last `keep_cycles`
        cycles go."""
        self._cycle += 1
        oldest = self._cycle - self._keep_cycles
        used = self._used
        while used:
            key, cycle = next(iter(used.items()))
            if cycle > oldest:
                break
            del used[key]
            self._drop(key)

    def get_many(self, keys: Iterable[Target]) -> dict[Target, RecordTimestamp]:
        """The entries of `keys` held; each one found is kept for `keep_cycles` more cycles."""
        entries, used, cycle = self._entries, self._used, self._cycle
        found = {}
        for key in keys:
            value = entries.get(key)
            if value is not None:
                used.move_to_end(key)
                used[key] = cycle
                found[key] = value
        return found

    def put_many(self, values: Iterable[RecordTimestamp]) -> None:
        entries, used, cycle = self._entries, self._used, self._cycle
        for value in values:
            key = (value.topic, value.partition, value.offset)
            if key in used:
                used.move_to_end(key)
            used[key] = cycle
            entries[key] = value
            if len(used) > self._max_entries:
                evicted, _ = used.popitem(last=False)
                self._drop(evicted)

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
    marks: bool = False
    """The highest offset per partition of the stored record timestamps (TimestampCache.learn_marks)."""

    def __bool__(self) -> bool:
        return bool(self.timestamps or self.ends or self.history or self.previous_commits or self.marks)


@dataclass
class StoreAnswer:
    timestamps: dict[Target, RecordTimestamp] = field(default_factory=dict)
    ends: dict[TopicPartition, KnownEnd] = field(default_factory=dict)
    history: dict[TopicPartition, list[tuple[int, int]]] = field(default_factory=dict)
    """(end offset, observed ms) samples around the requested offsets, ascending in time."""
    previous_commits: dict[GroupKey, int] | None = None
    """None when not asked for."""
    marks: dict[TopicPartition, int] | None = None
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
    if request.marks:
        answer.marks = cached_offset_marks(conn, cluster)
    if request.previous_commits:
        latest = latest_committed(conn, cluster)
        answer.previous_commits = {key: offset for key, (offset, _) in latest.items()}
    return answer
