"""The routing configuration, loaded and resolved: the route tree, the receivers' settings, the
inhibition rules, the teams of `owners.yaml` and the settings. Pure: no I/O after loading.

Ownership: a rule's own `team` label wins; otherwise the first team whose topic pattern matches
the alert's `topic`, else whose group pattern matches its `group_id`, becomes the `team` label
(so routes can match `team=payments`), and that team's receivers are notified besides whatever
the tree picks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from monitor.alert.dispatch.route import Route, RouteMatch
from monitor.alert.mute.inhibit import InhibitRule
from monitor.core.owners import Team

DEFAULT_SILENCE_MAX_DURATION = 7 * 86400


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    silence_max_duration: int = DEFAULT_SILENCE_MAX_DURATION
    """The longest silence anyone may create, in seconds."""
    external_url: str | None = None
    """The monitor's web address for links in notifications, without a trailing slash."""


@dataclass(frozen=True, slots=True)
class Routing:
    """Both files, resolved. Pure: no I/O after loading."""

    root: Route
    receiver_configs: dict[str, Mapping[str, Any]]
    """Receiver name -> its mapping from routing.yaml (`name` and one kind key)."""
    inhibit_rules: tuple[InhibitRule, ...] = ()
    settings: RoutingSettings = field(default_factory=RoutingSettings)
    teams: tuple[Team, ...] = ()

    def team_for(self, labels: Mapping[str, str]) -> str | None:
        """The owning team: the alert's own `team` label, else by topic, else by group."""
        if labels.get("team"):
            return labels["team"]
        topic = labels.get("topic", "")
        group = labels.get("group_id") or labels.get("group", "")
        for team in self.teams if topic else ():
            if team.owns_topic(topic):
                return team.name
        for team in self.teams if group else ():
            if team.owns_group(group):
                return team.name
        return None

    def with_team(self, labels: Mapping[str, str]) -> dict[str, str]:
        """`labels` plus the owning team's `team` label, as routes and notifications see them."""
        team = self.team_for(labels)
        return {**labels, "team": team} if team else dict(labels)

    def route(self, labels: Mapping[str, str]) -> list[RouteMatch]:
        """Every match of the tree in order (a receiver may appear twice); never empty."""
        return self.root.find(labels)

    def receivers_for(self, labels: Mapping[str, str]) -> list[RouteMatch]:
        """Who is notified: the tree's matches (on the labels with `team`) and the owning team's
        receivers, one match per receiver, the first one winning.

        A team's receiver gets the first match's grouping and timings but no escalation: the
        tree's route already escalates, once.
        """
        team = self.team_for(labels)
        matches = self.route(self.with_team(labels))
        chosen: dict[str, RouteMatch] = {}
        for match in matches:
            chosen.setdefault(match.receiver, match)
        owner = self.team(team) if team else None
        for receiver in owner.receivers if owner else ():
            if receiver not in chosen:
                chosen[receiver] = replace(
                    matches[0],
                    receiver=receiver,
                    escalate_after=None,
                    escalate_to=None,
                    route_path=f"owners:{team}",
                )
        return list(chosen.values())

    def routed_by(self) -> tuple[str, ...]:
        """Every label name `receivers_for` reads (the tree's matchers and what ownership reads):
        alerts equal on these are routed alike."""
        names = {m.name for route in self.root.walk() for m in route.matchers}
        return tuple(sorted(names | {"team", "topic", "group_id", "group"}))

    def inhibits(self, source_labels: Mapping[str, str], target_labels: Mapping[str, str]) -> bool:
        """Whether a firing alert with `source_labels` mutes one with `target_labels`."""
        return any(rule.inhibits(source_labels, target_labels) for rule in self.inhibit_rules)

    def team(self, name: str) -> Team | None:
        return next((team for team in self.teams if team.name == name), None)
