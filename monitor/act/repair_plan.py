"""What a repair action would change, and whether the cluster is healthy enough to change it. Pure:
everything here works on a `Snapshot` of the cluster read from Kafka just before.

Guardrails (checked when the repair is asked for, and again just before it is applied):

- `broker_down`: a broker that holds replicas is missing from the cluster's metadata. Moving
  leaders around while one is down piles them onto the survivors, and the election would have to
  be repeated when it comes back;
- `under_replicated`: a partition has fewer in-sync replicas than replicas. A follower catching up
  is busy; an election must not make it (or its peers) lead now.

Plans:

- `preferred_election`: the partitions the broker leads whose preferred leader (first replica) is
  another broker; each goes back to its first replica;
- `move_leadership`: the broker leads more than its fair share (partitions / live brokers, rounded
  up): partitions it leads go, one at a time, to the in-sync replica that leads the fewest, as long
  as that leaves the two further apart than one. Applied by putting that replica first (the same
  replicas, reordered) and electing the preferred leaders.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from monitor.core.records import PartitionInfo, TopicInfo


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster as Kafka described it: its live brokers and every partition (internal ones too).
    `partitions` are those of the topics the monitor watches (the cluster's topic filter), which
    its leadership findings count and the plans move; `unwatched` the rest, which only the
    guardrails look at (a broker down or a partition behind anywhere refuses a repair)."""

    live: frozenset[int]
    partitions: tuple[PartitionState, ...]
    unwatched: tuple[PartitionState, ...] = ()

    @classmethod
    def of(
        cls,
        live: Iterable[int],
        topics: Iterable[TopicInfo],
        watches: Callable[[TopicInfo], bool] = lambda _: True,
    ) -> Snapshot:
        watched: list[PartitionState] = []
        unwatched: list[PartitionState] = []
        for topic in topics:
            into = watched if watches(topic) else unwatched
            into.extend(_state(topic.name, p) for p in sorted(topic.partitions, key=_number))
        return cls(frozenset(live), tuple(watched), tuple(unwatched))

    def leaders(self) -> dict[int, int]:
        """Live broker -> partitions it leads (0 for a live broker that leads none)."""
        counts = Counter(p.leader for p in self.partitions if p.leader is not None)
        return {b: counts.get(b, 0) for b in sorted(self.live | {b for b in counts if b is not None})}


def _number(p: PartitionInfo) -> int:
    return p.partition


def _state(topic: str, p: PartitionInfo) -> PartitionState:
    return PartitionState(topic, p.partition, p.leader, tuple(p.replicas), tuple(p.isr))


def refusals(snapshot: Snapshot) -> list[str]:
    """Why the cluster may not have its leadership changed now (empty: it may)."""
    found = []
    everything = (*snapshot.partitions, *snapshot.unwatched)
    holding = Counter(b for p in everything for b in p.replicas)
    down = sorted(b for b in holding if b not in snapshot.live)
    if down:
        found.append(
            "broker_down: "
            + ", ".join(f"broker {b} (holds {holding[b]} replica(s))" for b in down)
            + " is not in the cluster's metadata; start it and wait until its replicas are back in "
            "sync before moving leaders"
        )
    behind = [f"{p.topic}:{p.partition}" for p in everything if p.under_replicated]
    if behind:
        shown = ", ".join(behind[:5]) + (f" and {len(behind) - 5} more" if len(behind) > 5 else "")
        found.append(
            f"under_replicated: {len(behind)} partition(s) have fewer in-sync replicas than replicas "
            f"({shown}); wait until they are back in sync"
        )
    return found


@dataclass(frozen=True, slots=True)
class Move:
    """One partition's change: its leader goes from `leader` to `new_leader`; its replicas are
    reordered to `new_replicas` when that differs from `replicas`."""

    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    new_leader: int
    new_replicas: tuple[int, ...]

    @property
    def reorders(self) -> bool:
        return self.new_replicas != self.replicas

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "replicas": list(self.replicas),
            "new_leader": self.new_leader,
            "new_replicas": list(self.new_replicas),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Move:
        return cls(
            str(raw["topic"]),
            int(raw["partition"]),
            None if raw["leader"] is None else int(raw["leader"]),
            tuple(int(b) for b in raw["replicas"]),
            int(raw["new_leader"]),
            tuple(int(b) for b in raw["new_replicas"]),
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """The reviewable diff: which partitions, from which broker to which, and the leader counts
    per broker before and after."""

    moves: tuple[Move, ...]
    leaders_before: dict[int, int] = field(default_factory=dict)
    leaders_after: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "partitions": [m.as_dict() for m in self.moves],
            "leaders_before": {str(b): n for b, n in self.leaders_before.items()},
            "leaders_after": {str(b): n for b, n in self.leaders_after.items()},
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Plan:
        return cls(
            tuple(Move.from_dict(m) for m in raw.get("partitions", [])),
            {int(b): int(n) for b, n in raw.get("leaders_before", {}).items()},
            {int(b): int(n) for b, n in raw.get("leaders_after", {}).items()},
        )


def _plan(snapshot: Snapshot, moves: list[Move]) -> Plan:
    before = snapshot.leaders()
    after = dict(before)
    for move in moves:
        if move.leader is not None:
            after[move.leader] = after.get(move.leader, 0) - 1
        after[move.new_leader] = after.get(move.new_leader, 0) + 1
    return Plan(tuple(moves), before, after)


def preferred_election(snapshot: Snapshot, broker_id: int | None) -> Plan:
    """The partitions led by `broker_id` (by anyone: None) whose first replica is another, live
    and in-sync broker."""
    moves = [
        Move(p.topic, p.partition, p.leader, p.replicas, p.replicas[0], p.replicas)
        for p in snapshot.partitions
        if p.replicas
        and p.leader != p.replicas[0]
        and (broker_id is None or p.leader == broker_id)
        and p.replicas[0] in snapshot.live
        and p.replicas[0] in p.isr
    ]
    return _plan(snapshot, moves)


def move_leadership(snapshot: Snapshot, broker_id: int) -> Plan:
    """Partitions to move off `broker_id` until it leads no more than its fair share."""
    counts = snapshot.leaders()
    if not counts or broker_id not in counts:
        return _plan(snapshot, [])
    fair = math.ceil(sum(counts.values()) / len(counts))
    moves = []
    for p in snapshot.partitions:
        if counts[broker_id] <= fair:
            break
        if p.leader != broker_id:
            continue
        candidates = [b for b in p.isr if b != broker_id and b in snapshot.live]
        if not candidates:
            continue
        target = min(candidates, key=lambda b: (counts.get(b, 0), b))
        if counts.get(target, 0) + 1 >= counts[broker_id]:
            continue  # it would only swap which broker is overloaded
        order = (target, *(b for b in p.replicas if b != target))
        moves.append(Move(p.topic, p.partition, p.leader, p.replicas, target, order))
        counts[broker_id] -= 1
        counts[target] = counts.get(target, 0) + 1
    return _plan(snapshot, moves)
