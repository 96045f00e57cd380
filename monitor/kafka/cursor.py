"""How the read of one partition towards its target offsets progresses (pure, no client).

The timestamp reader feeds each partition's events (a record, the end of the partition, an
offset out of range) to its `PartitionCursor`, which says which targets they resolve and what the
consumer must do next: read on, seek, assign the partition afresh, or let it go.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

Target = tuple[str, int, int]
"""(topic, partition, offset)."""

SEQUENTIAL_GAP: Final = 32
"""Read on, rather than seek, when the next target is at most this many offsets ahead: the
records in between are usually in the batch already fetched."""


class Step(Enum):
    READ = "read"  # keep consuming from where the partition is
    SEEK = "seek"  # jump to the next target
    REASSIGN = "reassign"  # the fetcher stopped on an error: assign the partition afresh
    DONE = "done"  # no target left: unassign


@dataclass
class PartitionCursor:
    """Where the read of one partition stands.

    `pending` holds the open targets in ascending order; `position` is the offset the consumer
    delivers from next: every record in [the last target asked for, position) has been seen.
    Events older than `position` come from before a seek and are ignored.
    """

    topic: str
    partition: int
    pending: list[int]
    position: int = -1
    seen_record: bool = False
    _needs_reassign: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.pending = sorted(set(self.pending))
        if self.position < 0 and self.pending:
            self.position = self.pending[0]

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    def on_record(self, offset: int) -> list[int]:
        """A record at `offset` arrived: the targets it resolves."""
        if offset < self.position:
            return []
        cut = bisect.bisect_right(self.pending, offset)
        resolved, self.pending = self.pending[:cut], self.pending[cut:]
        self.position = offset + 1
        self.seen_record = True
        return resolved

    def on_end(self, end_offset: int) -> list[int]:
        """The read reached the end of the partition at `end_offset`: the targets with no record."""
        if end_offset < self.position:
            return []
        resolved, self.pending = self.pending, []
        self.position = end_offset
        return resolved

    def on_out_of_range(self, offset: int) -> list[int]:
        """Fetching from `offset` failed as out of range: the targets with no record."""
        if offset != self.position:
            return []
        self._needs_reassign = True
        if self.seen_record:
            # A record exists below `offset`, so it is past the end, and so is every later target.
            resolved, self.pending = self.pending, []
            return resolved
        if self.pending and self.pending[0] == offset:
            return [self.pending.pop(0)]
        return []

    def advance(self) -> tuple[Step, int]:
        """What the consumer must do next for this partition, and from which offset."""
        if not self.pending:
            return Step.DONE, self.position
        target = self.pending[0]
        if self._needs_reassign:
            self._needs_reassign = False
            self.position = target
            return Step.REASSIGN, target
        if target - self.position > SEQUENTIAL_GAP:
            self.position = target
            return Step.SEEK, target
        return Step.READ, self.position


def plan(targets: Iterable[Target]) -> tuple[dict[tuple[str, int], PartitionCursor], list[Target]]:
    """One cursor per partition with its targets, and the targets that need no read (negative)."""
    offsets: dict[tuple[str, int], list[int]] = {}
    trivial: list[Target] = []
    for topic, partition, offset in targets:
        if offset < 0:
            trivial.append((topic, partition, offset))
        else:
            offsets.setdefault((topic, partition), []).append(offset)
    cursors = {key: PartitionCursor(key[0], key[1], found) for key, found in offsets.items()}
    return cursors, trivial
