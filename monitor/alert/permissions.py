"""Who may do what to alerts: the one authorization rule of each alert action, used by the CLI,
the HTTP API, the web forms and the acknowledgement link alike.

- acknowledge an incident: a member of the team of its alerts (every team, for an incident of
  several), or the platform role; an incident of alerts without a team needs the platform role;
- create a silence: a member of the team the silence names with an equality matcher
  `team=<team>`, so it can only mute that team's alerts; anything wider (other teams, alerts
  without a team, several teams' critical alerts, every alert) needs the platform role;
- expire a silence: its creator, a member of the team it names, or the platform role.

The platform role belongs to the members of `web.identity.platform_teams` (the team that runs
Kafka, who owns the broker and replication alerts). Each check returns None when the action is
allowed, else the reason it is not, which the action raises as a `forbidden` refusal.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from monitor.alert.matchers import Matcher
from monitor.core.identity import Identity

MAX_MATCHERS = 32
TEAM_LABEL = "team"


def has_platform_role(who: Identity, platform_teams: Collection[str]) -> bool:
    return any(team in who.teams for team in platform_teams)


def acknowledge_refusal(
    who: Identity, incident: int, teams: Collection[str | None], platform_teams: Collection[str]
) -> str | None:
    """Why `who` may not acknowledge `incident`, whose alerts belong to `teams` (None: an alert
    without a team), None when they may. The rule of silences: a member of the alerts' team (of
    every team, for an incident of several), or the platform role."""
    if has_platform_role(who, platform_teams):
        return None
    if teams and all(team is not None and team in who.teams for team in teams):
        return None
    owners = ", ".join(sorted(t for t in teams if t is not None)) or "none"
    yours = ", ".join(sorted(who.teams)) or "none"
    return (
        f"{who.user} may acknowledge only their own teams' incidents (yours: {yours}); incident "
        f"{incident} is of team(s): {owners}{' and alerts without a team' if None in teams else ''}. "
        f"Acknowledging another team's incident needs the platform role (a member of {_list(platform_teams)})"
    )


def named_teams(matchers: Sequence[Matcher]) -> set[str]:
    """The teams a silence is limited to by an equality matcher on the `team` label."""
    return {m.value for m in matchers if m.name == TEAM_LABEL and m.op == "=" and m.value}


def silence_refusal(
    who: Identity, matchers: Sequence[Matcher], platform_teams: Collection[str]
) -> str | None:
    """Why `who` may not create a silence over `matchers` (None: they may)."""
    if has_platform_role(who, platform_teams) or named_teams(matchers) & who.teams:
        return None
    yours = ", ".join(sorted(who.teams)) or "none"
    return (
        f"{who.user} may silence only the alerts of their own teams (yours: {yours}): add a matcher "
        f"team=<your team>. Silencing other teams' alerts, alerts without a team or every alert needs "
        f"the platform role (a member of {_list(platform_teams)})"
    )


def expire_refusal(
    who: Identity, created_by: str, matchers: Sequence[Matcher], platform_teams: Collection[str]
) -> str | None:
    """Why `who` may not end this silence early (None: they may)."""
    if who.user == created_by or has_platform_role(who, platform_teams):
        return None
    if named_teams(matchers) & who.teams:
        return None
    return (
        f"{who.user} may not expire a silence created by {created_by} for another team: its creator, "
        f"a member of the team it names or the platform role ({_list(platform_teams)}) may"
    )


def _list(teams: Collection[str]) -> str:
    return ", ".join(sorted(teams)) or "no team: set web.identity.platform_teams"
