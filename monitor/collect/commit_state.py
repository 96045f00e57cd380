"""The committed offsets the commits job streams (`monitor.collect.jobs.commits`), shared with the
offsets job, which computes lag from them while the stream is live."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from monitor.core.records import CommitObservation, CommittedOffset, OffsetCommitRecord, TopicPartition

GroupKey = tuple[str, str, int]


class CommitState:
    """The committed offset of every group-partition as the stream has seen it, shared by the
    stream's thread (writes) and the offsets job (reads). Thread-safe.

    Held per group, as the records the offsets job reads, and each group's sorted list kept until
    the group changes: a cycle at 100,000 group-partitions then builds and sorts the offsets of
    the groups that committed since the previous one, not all of them, and a reconciliation
    looks at each group's own offsets, not at every key once per group."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._sorted: dict[str, list[CommittedOffset]] = {}
        """Each group's offsets as `committed` answers them, for the groups unchanged since."""
        self._touched: dict[GroupKey, float] = {}
        self._group_touched: dict[str, float] = {}
        """The newest of each group's `_touched` times: most groups of a reconciliation were not
        touched since it asked, which this answers without looking at each of their keys."""
        self._observed_at: dict[GroupKey, int] = {}
        """The commit time of the last observation of each key the stream made."""
        self._positioned = False
        self._seeded = False
        self._behind_ms = 0

    @property
    def behind_ms(self) -> int:
        """How far the stream's reading is behind the commits, in milliseconds: read time minus
        the commit time of the newest commit of its last poll, 0 when that poll read every
        partition to its end. A stream behind the commits holds older offsets than OffsetFetch
        answers (`monitor.collect.listing`)."""
        with self._lock:
            return self._behind_ms

    def read_to(self, behind_ms: int) -> None:
        """The stream's last poll left it `behind_ms` behind the commits (`behind_ms`)."""
        with self._lock:
            self._behind_ms = max(0, behind_ms)

    @property
    def live(self) -> bool:
        """The stream is positioned and a snapshot covers what was committed before it: the
        offsets job may take committed offsets from here."""
        with self._lock:
            return self._positioned and self._seeded

    @property
    def positioned(self) -> bool:
        with self._lock:
            return self._positioned

    def positioned_at_end(self) -> None:
        """The stream was (re)positioned at the end of the topic: what came before is unknown
        until the next snapshot."""
        with self._lock:
            self._positioned, self._seeded = True, False

    def unobserved(self, sampled: Iterable[CommitObservation]) -> list[CommitObservation]:
        """The sampled observations of keys the stream has not seen a commit of since it was
        positioned (the stream's own observations of those are exact and already recorded)."""
        with self._lock:
            if not self._positioned:
                return list(sampled)
            return [o for o in sampled if (o.group_id, o.topic, o.partition) not in self._touched]

    def stopped(self) -> None:
        with self._lock:
            self._positioned, self._seeded, self._behind_ms = False, False, 0
            self._groups.clear()
            self._sorted.clear()
            self._touched.clear()
            self._group_touched.clear()
            self._observed_at.clear()

    def _offset(self, group_id: str, topic: str, partition: int) -> int | None:
        held = self._groups.get(group_id, {}).get((topic, partition))
        return held.offset if held is not None else None

    def _set(self, group_id: str, topic: str, partition: int, record: CommittedOffset | None) -> None:
        """Hold `record` (None: no committed offset) for the key; the group's sorted list is
        made again. A snapshot holds OffsetFetch's records: the ones the cycle that asked for it
        sampled, so the next cycle finds them unmoved."""
        self._sorted.pop(group_id, None)
        if record is not None:
            self._groups.setdefault(group_id, {})[(topic, partition)] = record
            return
        offsets = self._groups.get(group_id)
        if offsets is not None:
            offsets.pop((topic, partition), None)
            if not offsets:
                del self._groups[group_id]

    def apply(
        self, commits: Iterable[OffsetCommitRecord], now_ms: int, repeat_after_ms: int = 0
    ) -> list[CommitObservation]:
        """Apply commits and tombstones in log order. An observation, at the commit time (the
        time the record was read when the record has none), for each commit that moved the
        offset, and for a commit of an unchanged offset only when the key's last observation is
        at least `repeat_after_ms` older: a consumer that commits the same offset every second
        (auto-commit while idle) costs a row per interval, not per commit, and still shows it
        commits."""
        observations = []
        touched_at = time.monotonic()
        with self._lock:
            for c in commits:
                key = (c.group_id, c.topic, c.partition)
                self._touched[key] = touched_at
                self._group_touched[c.group_id] = touched_at
                if c.offset is None:
                    self._set(c.group_id, c.topic, c.partition, None)
                    self._observed_at.pop(key, None)
                    continue
                previous = self._offset(c.group_id, c.topic, c.partition)
                if previous != c.offset:
                    record = CommittedOffset(c.group_id, c.topic, c.partition, c.offset)
                    self._set(c.group_id, c.topic, c.partition, record)
                at = c.commit_timestamp_ms if c.commit_timestamp_ms is not None else now_ms
                last = self._observed_at.get(key)
                if previous == c.offset and last is not None and at - last < repeat_after_ms:
                    continue
                self._observed_at[key] = at
                observations.append(
                    CommitObservation(c.group_id, c.topic, c.partition, c.offset, previous, at)
                )
        return observations

    def forget_groups(self, group_ids: Iterable[str]) -> int:
        """Drop every committed offset of deleted groups (their group tombstones); returns how
        many were still held. Kafka writes a group's offset tombstones before its group
        tombstone, so this only matters where those were not applied (filtered, undecodable)."""
        gone = set(group_ids)
        if not gone:
            return 0
        touched_at = time.monotonic()
        forgotten = 0
        with self._lock:
            for group_id in gone:
                offsets = self._groups.pop(group_id, None)
                self._sorted.pop(group_id, None)
                if offsets:
                    self._group_touched[group_id] = touched_at
                for topic, partition in offsets or ():
                    key = (group_id, topic, partition)
                    self._observed_at.pop(key, None)
                    self._touched[key] = touched_at
                    forgotten += 1
        return forgotten

    def reconcile(self, answered: Mapping[str, Sequence[CommittedOffset]], asked_at: float) -> int:
        """Take an OffsetFetch answer (asked at monotonic `asked_at`) for the keys of the groups
        it answered that the stream has not touched since: what it lacks is added, what differs
        is corrected, what it no longer has is removed. Marks the state seeded. Returns how many
        keys were corrected (added after the first snapshot, changed or removed)."""
        corrected = 0
        with self._lock:
            first = not self._seeded
            touched = self._touched
            for group_id, offsets in answered.items():
                fetched = {(c.topic, c.partition): c for c in offsets}
                known = set(self._groups.get(group_id, ()))
                if not known and self._group_touched.get(group_id, float("-inf")) < asked_at:
                    # A group held for the first time (every group of the first snapshot): the
                    # answer as it is, not one key at a time.
                    if fetched:
                        self._groups[group_id] = fetched
                        self._sorted.pop(group_id, None)
                    corrected += 0 if first else len(fetched)
                    continue
                for topic, partition in known | set(fetched):
                    if touched.get((group_id, topic, partition), float("-inf")) >= asked_at:
                        continue
                    record = fetched.get((topic, partition))
                    value = record.offset if record is not None else None
                    if value == self._offset(group_id, topic, partition):
                        continue
                    self._set(group_id, topic, partition, record)
                    corrected += 0 if first and (topic, partition) not in known else 1
            self._seeded = self._positioned
        return corrected

    def committed(self, group_ids: Iterable[str]) -> dict[str, list[CommittedOffset]]:
        """The committed offsets of `group_ids`, as OffsetFetch answers them (sorted by topic and
        partition; every group named, with an empty list when it has none). The records of an
        unchanged key are the same objects from one call to the next."""
        answer: dict[str, list[CommittedOffset]] = {}
        with self._lock:
            for group_id in group_ids:
                ordered = self._sorted.get(group_id)
                if ordered is None:
                    held = self._groups.get(group_id, {})
                    ordered = [held[tp] for tp in sorted(held)]
                    self._sorted[group_id] = ordered
                answer[group_id] = list(ordered)
        return answer
