"""The committed offsets the commits job streams (`monitor.collect.jobs.commits`), shared with the
offsets job, which computes lag from them while the stream is live."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from monitor.core.records import CommitObservation, CommittedOffset, OffsetCommitRecord

GroupKey = tuple[str, str, int]


class CommitState:
    """The committed offset of every group-partition as the stream has seen it, shared by the
    stream's thread (writes) and the offsets job (reads). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offsets: dict[GroupKey, int] = {}
        self._touched: dict[GroupKey, float] = {}
        self._observed_at: dict[GroupKey, int] = {}
        """The commit time of the last observation of each key the stream made."""
        self._positioned = False
        self._seeded = False

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
            self._positioned, self._seeded = False, False
            self._offsets.clear()
            self._touched.clear()
            self._observed_at.clear()

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
                if c.offset is None:
                    self._offsets.pop(key, None)
                    self._observed_at.pop(key, None)
                    continue
                previous = self._offsets.get(key)
                self._offsets[key] = c.offset
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
        with self._lock:
            keys = [key for key in self._offsets if key[0] in gone]
            for key in keys:
                del self._offsets[key]
                self._observed_at.pop(key, None)
                self._touched[key] = touched_at
        return len(keys)

    def reconcile(self, answered: Mapping[str, Sequence[CommittedOffset]], asked_at: float) -> int:
        """Take an OffsetFetch answer (asked at monotonic `asked_at`) for the keys of the groups
        it answered that the stream has not touched since: what it lacks is added, what differs
        is corrected, what it no longer has is removed. Marks the state seeded. Returns how many
        keys were corrected (added after the first snapshot, changed or removed)."""
        corrected = 0
        with self._lock:
            first = not self._seeded
            for group_id, offsets in answered.items():
                fetched = {(c.group_id, c.topic, c.partition): c.offset for c in offsets}
                known = {key for key in self._offsets if key[0] == group_id}
                for key in known | set(fetched):
                    if self._touched.get(key, float("-inf")) >= asked_at:
                        continue
                    value = fetched.get(key)
                    if value == self._offsets.get(key):
                        continue
                    if value is None:
                        del self._offsets[key]
                    else:
                        self._offsets[key] = value
                    corrected += 0 if first and key not in known else 1
            self._seeded = self._positioned
        return corrected

    def committed(self, group_ids: Iterable[str]) -> dict[str, list[CommittedOffset]]:
        """The committed offsets of `group_ids`, as OffsetFetch answers them (sorted by topic and
        partition; every group named, with an empty list when it has none)."""
        wanted = set(group_ids)
        answer: dict[str, list[CommittedOffset]] = {g: [] for g in wanted}
        with self._lock:
            for (group_id, topic, partition), offset in self._offsets.items():
                if group_id in wanted:
                    answer[group_id].append(CommittedOffset(group_id, topic, partition, offset))
        for offsets in answer.values():
            offsets.sort(key=lambda c: (c.topic, c.partition))
        return answer
