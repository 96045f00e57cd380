"""What an inhibiting alert stands for: the consequences it mutes, so that its notice tells them.

Inhibition mutes echoes, not consequences. While a broker is down, its partitions' lost replicas
are its echo; but partitions under min.insync.replicas (acks=all producers fail), offline or with
two replicas lost are what the people paged for the broker must know first. So the source alert
carries an `Impact`: how many alerts of each rule it covers (muted ones, and those its rule still
lets through with `still_notify`), and the worst of them.

"Worst" is the severity first, then the consequence (DOMAIN.md, Replication): offline, then data
lost, then writes failing (under min ISR), then two replicas lost, then one; other rules after
those, by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final, Protocol

from monitor.alert.model import Impact, ImpactItem
from monitor.core.vocabulary import SEVERITY_RANK

WORST_LISTED: Final = 5
"""Muted alerts named in the source's notice; the rest are counted."""

CONSEQUENCE_ORDER: Final = (
    "PartitionOffline",
    "DataLossOccurred",
    "PartitionUnderMinIsr",
    "PartitionReplicasLost",
    "TimeUntilDataLoss",
    "PartitionReplicaLost",
)
"""Rules of the shipped pack by how bad their consequence is, worst first."""


class Covered(Protocol):
    """An alert as the impact sees it (the cycle's AlertRow)."""

    @property
    def rule(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def entity_key(self) -> str: ...
    @property
    def summary(self) -> str: ...


def consequence_key(alert: Covered) -> tuple[int, int, str, str]:
    """Sort key, worst first."""
    order = CONSEQUENCE_ORDER.index(alert.rule) if alert.rule in CONSEQUENCE_ORDER else len(CONSEQUENCE_ORDER)
    return (-SEVERITY_RANK.get(alert.severity, 0), order, alert.rule, alert.entity_key)


def impact_of(covered: Iterable[Covered], limit: int = WORST_LISTED) -> Impact | None:
    """The impact of a source covering `covered`; None when it covers nothing."""
    ordered = sorted(covered, key=consequence_key)
    if not ordered:
        return None
    counts = Counter(alert.rule for alert in ordered)
    rules = list(dict.fromkeys(alert.rule for alert in ordered))  # worst rule first
    return Impact(
        counts={rule: counts[rule] for rule in rules},
        worst=tuple(ImpactItem(a.rule, a.severity, a.entity_key, a.summary) for a in ordered[:limit]),
    )


def signature(impact: Impact | None) -> str:
    """What about an impact is news: the rules it covers (a new kind of consequence), not counts
    that move every cycle."""
    return ",".join(sorted(impact.counts)) if impact else ""
