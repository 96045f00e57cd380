"""The demo's workload as data: its topics, its consumer groups and their behaviours, and the
timeline of broker failures, with what the terminal says at each step. Pure: nothing here
connects; `runner.py` plays a plan on a cluster.

How each behaviour meets the default rules (alert_rules/*.yaml) within the first minutes, with the
demo's intervals (`monitor.devtools.demo.demo_settings`):

- `clicks` starts with 20 minutes of history whose record timestamps lie in the past (CreateTime
  set by the producer, as a replay from upstream would write them), and the slow group starts
  from its beginning. Its append lag and lag in seconds are then about 20 minutes at once, over
  the 5 and 15 minute thresholds of ConsumerAppendLag and ConsumerLagSeconds; without the history
  a group consuming half as fast as the producers would need half an hour to get there.
- The stopped group reads the first part of `audit`'s history (also backdated), commits and
  closes: its committed offset never moves again, so its status is STOP from the first
  evaluation, and its append lag is already minutes.
- The stalled group stays in its group (pauses its partitions and keeps polling) and commits the
  same offsets again and again while the producers go on. Offsets alone cannot tell it from a
  stopped consumer (status.py): it is STOP too, with one member where the stopped group has none.
- The rewinding group seeks each partition back and commits the lower offset, every
  `rewind_every_seconds`, its partitions staggered so that one of them is always below the
  highest offset the window remembers: status REWIND, continuously, as ConsumerGroupStatus's
  `for:` needs. That holds only while it has a backlog (a consumer that catches up is above
  every offset it committed before), so it replays `clicks` from the beginning, faster than
  the producers write but never catching up, and on a topic whose producers go on when two
  brokers are down (acks=1).
- `telemetry` has retention.bytes of a few segments and a producer that fills them in about a
  minute: the size limit deletes long before retention.ms (1 hour), so its time coverage is about
  a minute (RetentionShortfall, and the topic page's coverage). No group reads it: on a topic
  that keeps a minute a group that keeps up is healthy (no TimeUntilDataLoss), and one that stops
  loses data within the minute.
- `inventory.events` keeps 4 minutes (retention.ms) in 15-second segments; its group reads a
  quarter of what is produced, so reading its backlog takes four times as long as producing it
  did: its data-loss margin is minutes at most, TimeUntilDataLoss fires (critical) at the first
  evaluation and, about six
  minutes in, retention deletes what the group has not read (DataLossOccurred).
- The topics that should show replica loss have replication factor 3 and min.insync.replicas 2:
  stopping one broker loses a replica (PartitionReplicaLost, BrokerDown), stopping a second one
  puts them under min.insync.replicas (PartitionUnderMinIsr) and the acks=all producer of
  `payments.orders` fails. The other topics keep min.insync.replicas 1 and acks=1, so their
  producers and consumers go on with one broker left.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from urllib.parse import quote


class Behaviour(StrEnum):
    HEALTHY = "healthy"
    SLOW = "slow"
    STOPPED = "stopped"
    STALLED = "stalled"
    REWINDING = "rewinding"


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """A topic and its producer: `rate` messages/s of `payload_bytes`, spread evenly over the
    partitions, written `burst_seconds` worth at a time (a tenth of a second: steady; seconds:
    bursts at the same average rate). `history_seconds` of backdated messages (at `rate`) are
    written first."""

    name: str
    partitions: int
    rate: float
    payload_bytes: int = 200
    configs: dict[str, str] = field(default_factory=dict)
    acks: str = "1"
    history_seconds: float = 0.0
    purpose: str = ""
    burst_seconds: float = 0.1


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """A consumer group on one topic (its members: `members_of`).

    `rate`: messages/s it consumes at most (None: as fast as it can). `from_beginning`: where a
    group without committed offsets starts. `act_after_seconds`: when a STOPPED group closes and a
    STALLED one stops moving. A REWINDING group seeks each partition back by what it consumes in
    `rewind_seconds` (at its `rate`) and commits there: first after `first_rewind_seconds`, then
    every `rewind_every_seconds`, the partitions' turns spread over that period.
    """

    group_id: str
    topic: str
    behaviour: Behaviour
    rate: float | None = None
    from_beginning: bool = False
    act_after_seconds: float = 0.0
    first_rewind_seconds: float = 30.0
    rewind_every_seconds: float = 120.0
    rewind_seconds: float = 80.0
    expect: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """A timeline step: at `at_seconds` after the start, stop broker `broker_id`."""

    at_seconds: float
    broker_id: int
    expect: str


@dataclass(frozen=True, slots=True)
class Plan:
    topics: tuple[TopicPlan, ...]
    groups: tuple[GroupPlan, ...]
    steps: tuple[Step, ...]
    web_url: str
    cluster: str
    summary_at_seconds: float | None = None

    def topic(self, name: str) -> TopicPlan:
        return next(t for t in self.topics if t.name == name)

    def group(self, group_id: str) -> GroupPlan:
        return next(g for g in self.groups if g.group_id == group_id)

    def group_url(self, group_id: str) -> str:
        return f"{self.web_url}/clusters/{quote(self.cluster)}/groups/{quote(group_id)}"

    def topic_url(self, topic: str) -> str:
        return f"{self.web_url}/clusters/{quote(self.cluster)}/topics/{quote(topic)}"

    @property
    def alerts_url(self) -> str:
        return f"{self.web_url}/alerts"

    @property
    def inbox_url(self) -> str:
        return f"{self.web_url}/inbox"

    @property
    def cluster_url(self) -> str:
        return f"{self.web_url}/clusters/{quote(self.cluster)}"


# The demo's own topics (DEMO_TOPIC is the retention button's, created by demo.py).
PAYMENTS = "payments.orders"
CLICKS = "clicks"
AUDIT = "audit"
TELEMETRY = "telemetry"
INVENTORY = "inventory.events"

MIB = 1024 * 1024
_REPLICA_LOSS = {"min.insync.replicas": "2"}


def demo_plan(
    *,
    web_url: str,
    cluster: str,
    nodes: int,
    stop_brokers: Sequence[int] = (2, 3),
    speed: float = 1.0,
    prefix: str = "",
) -> Plan:
    """The demo's workload. `speed` > 1 compresses every duration of the story (the timeline, the
    groups' timings, the retention and segment times of the short-lived topics) by that factor,
    for tests; rates and history stay. `prefix` goes before every topic and group name.
    `stop_brokers` are stopped one after the other (none on a one-node cluster)."""
    if speed <= 0:
        raise ValueError(f"speed must be positive, not {speed}")

    def t(seconds: float) -> float:
        return seconds / speed

    def ms(seconds: float) -> str:
        return str(max(1, round(seconds * 1000 / speed)))

    def name(base: str) -> str:
        return f"{prefix}{base}"

    replicas = min(3, nodes)
    loss = _REPLICA_LOSS if replicas >= 3 else {}
    topics = (
        TopicPlan(name(PAYMENTS), 3, rate=20, acks="all", configs=dict(loss),
                  purpose="orders, acks=all, min.insync.replicas 2"),
        TopicPlan(name(CLICKS), 3, rate=30, history_seconds=1200,
                  purpose="starts with 20 minutes of backdated history"),
        TopicPlan(name(AUDIT), 3, rate=10, history_seconds=900, configs=dict(loss),
                  purpose="starts with 15 minutes of backdated history; min.insync.replicas 2"),
        TopicPlan(name(TELEMETRY), 1, rate=40, payload_bytes=1600,
                  configs={"retention.bytes": str(2 * MIB), "segment.bytes": str(MIB),
                           "retention.ms": str(3_600_000)},
                  purpose="retention.bytes 2 MiB cuts its 1 hour retention.ms to about a minute"),
        TopicPlan(name(INVENTORY), 3, rate=20,
                  configs={"retention.ms": ms(240), "segment.ms": ms(15), "segment.bytes": str(MIB)},
                  purpose="retention.ms 4 minutes in 15-second segments"),
    )  # fmt: skip
    groups = (
        GroupPlan(name("payments-ledger"), name(PAYMENTS), Behaviour.HEALTHY,
                  expect="keeps up: lag near 0, status OK"),
        GroupPlan(name("clicks-analytics"), name(CLICKS), Behaviour.SLOW, rate=15, from_beginning=True,
                  expect="20 minutes behind and falling further: ConsumerAppendLag firing after ~3 min, "
                  "ConsumerLagSeconds after ~6 min"),
        GroupPlan(name("clicks-replayer"), name(CLICKS), Behaviour.REWINDING, rate=54, from_beginning=True,
                  first_rewind_seconds=t(30), rewind_every_seconds=t(120), rewind_seconds=t(80),
                  expect="goes back and commits lower offsets: status REWIND; ConsumerGroupStatus "
                  "pending, firing after its 5m `for:`"),
        GroupPlan(name("clicks-sessionizer"), name(CLICKS), Behaviour.STALLED, rate=40,
                  act_after_seconds=t(20),
                  expect="its members stay, the same committed offsets while lag grows: status STOP"),
        GroupPlan(name("audit-archiver"), name(AUDIT), Behaviour.STOPPED, rate=200, from_beginning=True,
                  act_after_seconds=t(10),
                  expect="no member, lag growing: status STOP, ConsumerAppendLag firing after ~3 min"),
        GroupPlan(name("inventory-replicator"), name(INVENTORY), Behaviour.SLOW, rate=5, from_beginning=True,
                  expect="TimeUntilDataLoss (critical) at the first evaluation; DataLossOccurred "
                  "after ~6 min"),
    )  # fmt: skip
    steps = broker_steps(stop_brokers if replicas >= 3 else (), speed, [name(PAYMENTS), name(AUDIT)])
    return Plan(topics, groups, steps, web_url.rstrip("/"), cluster, summary_at_seconds=t(300))


def broker_steps(broker_ids: Iterable[int], speed: float, min_isr_topics: Sequence[str]) -> tuple[Step, ...]:
    """Stop the first broker after two minutes and the second two minutes later.

    Two minutes, not one: the lag alerts go pending at the first evaluation and fire about three
    minutes in (their `for:` is 2m). BrokerDown mutes only lag that went pending after it
    (deploy/demo-routing.yaml, `only_after_source`), so the demo's lag is told either way; the
    first minutes show the lag incidents alone, before the broker ones."""
    topics = " and ".join(min_isr_topics)
    expectations = (
        "expect BrokerDown (critical) within ~2 min and PartitionReplicaLost (one replica lost) on "
        "every topic; BrokerDown mutes the lost replicas it causes and its page counts them",
        f"expect PartitionUnderMinIsr (critical) on {topics} within ~2 min: only one replica left, "
        f"under min.insync.replicas 2, so the acks=all producer of {min_isr_topics[0]} fails; "
        "paged on its own (worse than a broker down) and in BrokerDown's impact",
    )
    times = (120.0, 240.0)
    chosen = zip(times, broker_ids, expectations, strict=False)
    return tuple(Step(at / speed, broker, expect) for at, broker, expect in chosen)


def members_of(group: GroupPlan, partitions: int) -> int:
    """Consumers in the group: one per partition for a paced group (clients.ConsumerLoop says
    why), one for a group that reads as fast as it can."""
    return 1 if group.rate is None else max(1, partitions)


def due(steps: Sequence[Step], elapsed: float, done: int) -> list[Step]:
    """The steps after the first `done` whose time has come, in order."""
    ordered = sorted(steps, key=lambda s: s.at_seconds)
    return [s for s in ordered[done:] if s.at_seconds <= elapsed]


def rewind_at(group: GroupPlan, partition: int, partitions: int, done: int) -> float:
    """When partition `partition` of `partitions` makes its rewind number `done` (from 0): the
    partitions take turns, a third of the period apart with three, so one of them has always
    rewound recently."""
    turn = partition / max(partitions, 1)
    return group.first_rewind_seconds + group.rewind_every_seconds * (done + turn)


def scaled(plan: Plan, factor: float) -> Plan:
    """`plan` with every producer and consumer rate multiplied by `factor` (lighter test runs)."""
    return replace(
        plan,
        topics=tuple(replace(t, rate=t.rate * factor) for t in plan.topics),
        groups=tuple(replace(g, rate=None if g.rate is None else g.rate * factor) for g in plan.groups),
    )


class Pacer:
    """At most `rate` events per second on average, from the first call: `wait_for(n)` returns
    how long to sleep before `n` more events are allowed (0 when they are)."""

    def __init__(self, rate: float | None, start: float) -> None:
        self.rate = rate
        self.start = start
        self.count = 0

    def wait_for(self, now: float, n: int = 1) -> float:
        if self.rate is None or self.rate <= 0:
            return 0.0
        allowed_at = self.start + (self.count + n) / self.rate
        return max(0.0, allowed_at - now)

    def record(self, n: int = 1) -> None:
        self.count += n
