"""The route tree (Alertmanager's `dispatch/route.go`): which receivers take an alert, with the
grouping, timing, `send_resolved` and escalation settings of the route that chose each.

Depth first, a child takes an alert when all its matchers hold; the first child that takes it
wins unless it has `continue: true`; when no child takes it, the node itself does. Children
inherit the settings of their parent (resolved when the routing file is loaded,
`monitor.alert.config`). Escalation is ours (Alertmanager has none): an unacknowledged alert still
firing after `escalate_after` is also sent to `escalate_to`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from monitor.alert.matchers import Matcher, matches_all

GROUP_BY_ALL = "..."
"""`group_by: [...]` groups by every label: one notification per alert."""
DEFAULT_GROUP_BY = ("cluster", "rule", "group_id")
"""A consumer group in trouble is its own notification group (its first notice waits only
`group_wait`, not another group's `group_interval`); alerts without a `group_id` (partitions,
topics, brokers) group by rule and cluster, so a broker restart is one message, not one per topic."""
DEFAULT_GROUP_WAIT = 30
DEFAULT_GROUP_INTERVAL = 2 * 60
"""News of a group already notified (a new alert, a worse one, one that resolved) waits at most
this long: Alertmanager's 5m batches more, but leaves a new kind of trouble untold for 5 minutes."""
DEFAULT_REPEAT_INTERVAL = 4 * 3600


@dataclass(frozen=True, slots=True)
class RouteMatch:
    """One receiver an alert goes to, with the effective settings of the route that chose it.

    Durations are seconds. `group_by == ("...",)` groups by every label. Several matches of one
    alert can carry the same escalation; escalate once per (escalate_to, group).
    """

    receiver: str
    group_by: tuple[str, ...]
    group_wait: int
    group_interval: int
    repeat_interval: int
    escalate_after: int | None
    escalate_to: str | None
    send_resolved: bool
    route_path: str
    """`root`, `root/0`, `root/0/1` (child indexes), or `owners:TEAM` for a team's receiver."""

    def group_labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        """The labels that identify the alert's group at this receiver."""
        if self.group_by == (GROUP_BY_ALL,):
            return dict(labels)
        return {name: labels[name] for name in self.group_by if name in labels}


@dataclass(frozen=True, slots=True)
class Route:
    """One node of the tree, its inherited settings already resolved into `match`."""

    matchers: tuple[Matcher, ...]
    continue_matching: bool
    match: RouteMatch
    routes: tuple[Route, ...] = ()

    def find(self, labels: Mapping[str, str]) -> list[RouteMatch]:
        """The matches under this node (Alertmanager's order), empty when it does not match."""
        if not matches_all(self.matchers, labels):
            return []
        found: list[RouteMatch] = []
        for child in self.routes:
            taken = child.find(labels)
            found += taken
            if taken and not child.continue_matching:
                break
        return found or [self.match]

    def walk(self) -> Iterable[Route]:
        yield self
        for child in self.routes:
            yield from child.walk()


def root_defaults(path: str = "root") -> RouteMatch:
    """The settings a root route starts from before its own keys apply (no receiver yet)."""
    return RouteMatch(
        receiver="",
        group_by=DEFAULT_GROUP_BY,
        group_wait=DEFAULT_GROUP_WAIT,
        group_interval=DEFAULT_GROUP_INTERVAL,
        repeat_interval=DEFAULT_REPEAT_INTERVAL,
        escalate_after=None,
        escalate_to=None,
        send_resolved=True,
        route_path=path,
    )
