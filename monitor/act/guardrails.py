"""The guardrails of a retention raise: small pure functions over what is known about the topic.

Each check returns a `Check`: its rule name, whether it passed, whether it allows the instant tier,
and a message with the numbers (a refusal names the rule and the numbers that broke it).
`evaluate` runs them all, in a fixed order, so a requester sees every problem at once, and decides
the tier: instant when every check allows it, reviewed otherwise.

Disk projection (DOMAIN.md section 2): a partition keeps data until the earlier of its limits,
so its size is about `min(retention.bytes, produce bytes/s x retention.ms)`; the extra bytes of a
raise are that size after minus before, on every broker that holds a replica of the partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from monitor.act.policy import Policy, TierLimits
from monitor.core.formatting import bytes_filter, duration_filter

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
MANAGED_CONFIGS = (RETENTION_MS, RETENTION_BYTES)
UNLIMITED = -1
Tier = Literal["instant", "reviewed"]


@dataclass(frozen=True, slots=True)
class PartitionFacts:
    partition: int
    replicas: tuple[int, ...]
    produce_bytes_rate: float | None = None
    """Bytes/s the partition grew over the last evaluation window; None when not measured."""


@dataclass(frozen=True, slots=True)
class BrokerDisk:
    broker_id: int
    total_bytes: int
    usable_bytes: int

    @property
    def used_bytes(self) -> int:
        return self.total_bytes - self.usable_bytes


@dataclass(frozen=True, slots=True)
class TopicFacts:
    """What the guardrails know about a topic when a raise is requested."""

    cluster: str
    topic: str
    owner: str | None
    """The owning team from owners.yaml."""
    current: Mapping[str, int]
    """retention.ms and retention.bytes in force now (-1: unlimited)."""
    partitions: tuple[PartitionFacts, ...] = ()
    brokers: Mapping[int, BrokerDisk] = field(default_factory=dict)
    open_request: int | None = None
    """The id of the topic's open request, if it has one."""


@dataclass(frozen=True, slots=True)
class RaiseAsk:
    requester: str
    teams: frozenset[str]
    new: Mapping[str, int]
    """retention.ms and/or retention.bytes to set."""
    duration_ms: int


@dataclass(frozen=True, slots=True)
class Check:
    rule: str
    ok: bool
    message: str
    instant: bool = True
    """Whether this check lets the raise apply at once (within the instant tier)."""


@dataclass(frozen=True, slots=True)
class BrokerProjection:
    broker_id: int
    total_bytes: int
    used_bytes: int
    extra_bytes: int

    @property
    def projected_ratio(self) -> float:
        return (self.used_bytes + self.extra_bytes) / self.total_bytes if self.total_bytes else math.inf

    def describe(self) -> str:
        return (
            f"broker {self.broker_id}: {bytes_filter(self.used_bytes)} used + "
            f"{bytes_filter(self.extra_bytes)} for this raise of {bytes_filter(self.total_bytes)} = "
            f"{self.projected_ratio * 100:.1f}%"
        )


@dataclass(frozen=True, slots=True)
class DiskProjection:
    brokers: tuple[BrokerProjection, ...]
    unknown: tuple[str, ...]
    """Why the cost could not be projected (no produce rate, no disk size of a broker ...)."""

    @property
    def extra_bytes(self) -> int:
        return sum(b.extra_bytes for b in self.brokers)

    def as_dict(self) -> dict[str, object]:
        return {
            "extra_bytes": self.extra_bytes,
            "unknown": list(self.unknown),
            "brokers": [
                {
                    "broker_id": b.broker_id,
                    "total_bytes": b.total_bytes,
                    "used_bytes": b.used_bytes,
                    "extra_bytes": b.extra_bytes,
                    "projected_ratio": round(b.projected_ratio, 4),
                }
                for b in self.brokers
            ],
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    checks: tuple[Check, ...]
    tier: Tier
    disk: DiskProjection

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def refusals(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]

    def refusal_text(self) -> str:
        return "; ".join(f"{c.rule}: {c.message}" for c in self.refusals)


def _value(name: str, value: int) -> str:
    if value == UNLIMITED:
        return "unlimited (-1)"
    return duration_filter(value / 1000) if name == RETENTION_MS else bytes_filter(value)


# ---------------------------------------------------------------------------------------------
# The checks, in the order they are reported


def check_owner(facts: TopicFacts, ask: RaiseAsk) -> Check:
    if facts.owner is None:
        return Check(
            "owner_team",
            False,
            f"no team owns topic {facts.topic!r}: add its pattern to the owning team in the ownership "
            "file (alert.owners_file, or the owners.yaml beside alert.routing_file)",
        )
    if facts.owner not in ask.teams:
        teams = ", ".join(sorted(ask.teams)) or "none"
        return Check(
            "owner_team",
            False,
            f"topic {facts.topic!r} belongs to team {facts.owner!r}, and {ask.requester} is in teams: "
            f"{teams}; ask a member of {facts.owner!r}",
        )
    return Check("owner_team", True, f"{ask.requester} is in {facts.owner!r}, which owns the topic")


def check_something_to_change(facts: TopicFacts, ask: RaiseAsk) -> Check:
    unknown = sorted(set(ask.new) - set(MANAGED_CONFIGS))
    if unknown:
        return Check(
            "managed_configs", False, f"only {', '.join(MANAGED_CONFIGS)} can be raised, not {unknown}"
        )
    if not ask.new:
        return Check("managed_configs", False, "give a new retention.ms and/or retention.bytes")
    return Check("managed_configs", True, f"changes {', '.join(sorted(ask.new))}")


def check_higher(facts: TopicFacts, ask: RaiseAsk) -> Check:
    for name, new in sorted(ask.new.items()):
        current = facts.current.get(name)
        if name not in MANAGED_CONFIGS:
            continue  # check_something_to_change refuses these
        if current is None:
            return Check("higher_than_current", False, f"the current {name} of the topic is not known")
        if current == UNLIMITED:
            return Check("higher_than_current", False, f"{name} is already unlimited (-1); nothing is higher")
        if new == UNLIMITED or new <= current:
            return Check(
                "higher_than_current",
                False,
                f"{name} {_value(name, new)} is not higher than the current {_value(name, current)}; "
                "the button only raises retention (lowering goes through the Kafka team)",
            )
    return Check("higher_than_current", True, "every new value is higher than the current one")


def _limit_of(name: str, limits: TierLimits) -> int:
    return limits.max_retention_ms if name == RETENTION_MS else limits.max_retention_bytes


def check_value_limit(policy: Policy, ask: RaiseAsk) -> Check:
    instant = True
    for name, new in sorted(ask.new.items()):
        limit = _limit_of(name, policy.limits)
        if new > limit:
            return Check(
                "max_value",
                False,
                f"{name} {_value(name, new)} is above the policy's limit of {_value(name, limit)} "
                f"({policy.source}); ask for at most that",
            )
        instant = instant and new <= _limit_of(name, policy.instant)
    return Check("max_value", True, "within the policy's maximum values", instant)


def check_multiple(facts: TopicFacts, policy: Policy, ask: RaiseAsk) -> Check:
    instant = True
    for name, new in sorted(ask.new.items()):
        current = facts.current.get(name, 0)
        if current <= 0:
            continue  # check_higher refuses these
        multiple = new / current
        if multiple > policy.limits.max_multiple:
            return Check(
                "max_multiple",
                False,
                f"{name} {_value(name, new)} is {multiple:.1f} x the current {_value(name, current)}, "
                f"above the policy's {policy.limits.max_multiple:g} x; ask for at most "
                f"{_value(name, int(current * policy.limits.max_multiple))}",
            )
        instant = instant and multiple <= policy.instant.max_multiple
    return Check("max_multiple", True, "within the policy's maximum multiple", instant)


def check_duration(policy: Policy, ask: RaiseAsk) -> Check:
    limit = policy.limits.max_duration_ms
    if ask.duration_ms <= 0:
        return Check("max_duration", False, "give how long the raise lasts, e.g. 12h or 2d")
    if ask.duration_ms > limit:
        return Check(
            "max_duration",
            False,
            f"a raise for {duration_filter(ask.duration_ms / 1000)} is longer than the policy's "
            f"{duration_filter(limit / 1000)}; ask for at most that (and extend it later if needed)",
        )
    return Check(
        "max_duration",
        True,
        "within the policy's duration",
        ask.duration_ms <= policy.instant.max_duration_ms,
    )


def _kept_bytes(retention_ms: int, retention_bytes: int, rate: float) -> float:
    """About how many bytes a partition keeps under these limits (inf: unbounded)."""
    by_size = retention_bytes if retention_bytes > 0 else math.inf
    by_time = rate * retention_ms / 1000 if retention_ms > 0 else math.inf
    return min(by_size, by_time)


def _added_bytes(old: tuple[int, int], new: tuple[int, int], rate: float | None) -> float | None:
    """Extra bytes one replica keeps after the raise; None when that cannot be told."""
    if rate is None:
        if new[0] != old[0]:
            return None  # a longer time keeps more only as fast as producers write
        # Only the size limit moves: at most the difference (both finite, or nothing changes).
        return float(new[1] - old[1]) if old[1] > 0 and new[1] > 0 else 0.0
    before, after = _kept_bytes(*old, rate), _kept_bytes(*new, rate)
    if math.isinf(after):
        return 0.0 if math.isinf(before) else None
    return max(after - before, 0.0)


def project_disk(facts: TopicFacts, new: Mapping[str, int]) -> DiskProjection:
    """Extra bytes per broker holding a replica, with the disk each broker has now."""
    old_ms = facts.current.get(RETENTION_MS, UNLIMITED)
    old_bytes = facts.current.get(RETENTION_BYTES, UNLIMITED)
    limits_before = (old_ms, old_bytes)
    limits_after = (new.get(RETENTION_MS, old_ms), new.get(RETENTION_BYTES, old_bytes))
    extra: dict[int, float] = {}
    unknown: list[str] = []
    no_rate: list[int] = []
    for part in facts.partitions:
        added = _added_bytes(limits_before, limits_after, part.produce_bytes_rate)
        if added is None:
            no_rate.append(part.partition)
            continue
        for broker in part.replicas:
            extra[broker] = extra.get(broker, 0.0) + added
    if no_rate:
        unknown.append(f"no produce rate measured yet for partition(s) {_ranges(no_rate)}")
    if not facts.partitions:
        unknown.append("the topic's partitions and replicas are not known")
    brokers = []
    for broker_id in sorted({b for part in facts.partitions for b in part.replicas}):
        disk = facts.brokers.get(broker_id)
        if disk is None or disk.total_bytes <= 0:
            unknown.append(f"no disk size collected for broker {broker_id}")
            continue
        brokers.append(
            BrokerProjection(broker_id, disk.total_bytes, disk.used_bytes, round(extra.get(broker_id, 0.0)))
        )
    return DiskProjection(tuple(brokers), tuple(unknown))


def check_disk(policy: Policy, disk: DiskProjection) -> Check:
    ceiling = policy.disk_usage_ceiling
    over = [b for b in disk.brokers if b.projected_ratio > ceiling]
    if over:
        return Check(
            "disk_headroom",
            False,
            "; ".join(b.describe() for b in over)
            + f", above the ceiling of {ceiling * 100:.0f}%; ask for less, or for a shorter time",
        )
    if disk.unknown:
        message = "disk cost unknown: " + "; ".join(disk.unknown)
        if policy.unknown_disk_cost == "refuse":
            return Check("disk_headroom", False, message + "; try again after the next collection")
        return Check("disk_headroom", True, message + " (a reviewer decides)", instant=False)
    worst = max(disk.brokers, key=lambda b: b.projected_ratio, default=None)
    shown = worst.describe() if worst else "no replica grows"
    return Check("disk_headroom", True, f"every broker stays under {ceiling * 100:.0f}% ({shown})")


def check_one_open(facts: TopicFacts) -> Check:
    if facts.open_request is not None:
        return Check(
            "one_open_request",
            False,
            f"request {facts.open_request} is still open on {facts.topic!r}; wait for it, extend it, "
            "or revert it first",
        )
    return Check("one_open_request", True, "no other open request on the topic")


def evaluate(policy: Policy, facts: TopicFacts, ask: RaiseAsk) -> Verdict:
    """Every check, in order, and the tier the raise gets when all pass."""
    disk = project_disk(facts, ask.new)
    checks = (
        check_owner(facts, ask),
        check_something_to_change(facts, ask),
        check_higher(facts, ask),
        check_value_limit(policy, ask),
        check_multiple(facts, policy, ask),
        check_duration(policy, ask),
        check_disk(policy, disk),
        check_one_open(facts),
    )
    tier: Tier = "instant" if all(c.instant for c in checks) else "reviewed"
    return Verdict(checks, tier, disk)


def _ranges(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:10])
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
