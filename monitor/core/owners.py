"""Ownership: which team owns which topics and consumer groups (`alert_rules/owners.yaml`).

Two stages need it: the alert stage labels and routes alerts by owner, and the act stage lets a
team raise the retention of the topics it owns. So which file it is (`owners_file`, one answer
for both), its model and its strict validation live here, beside the settings, and each stage
adds its own checks (the alert stage checks that each team's receivers are defined in
routing.yaml). The shipped `alert_rules/owners.yaml` is an example: it grants nothing unless a
configuration names it.

Patterns are Python regular expressions matched against the whole name; the first team whose
topic pattern matches a topic owns it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from monitor.core.errors import ConfigError
from monitor.core.patterns import UserPattern
from monitor.core.settings import AlertConfig, compile_name_pattern, compile_patterns
from monitor.core.yaml_files import format_validation_error, line_of, read_yaml

TEAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class _TeamSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    receivers: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TEAM_NAME.match(value):
            raise ValueError(f"team name {value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("topics", "groups")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return compile_patterns(value)


class _OwnersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    teams: list[_TeamSpec] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Team:
    """A team from owners.yaml: the topics and groups it owns (whole-name patterns)."""

    name: str
    receivers: tuple[str, ...]
    topics: tuple[UserPattern, ...]
    groups: tuple[UserPattern, ...]

    def owns_topic(self, topic: str) -> bool:
        return any(pattern.fullmatch(topic) for pattern in self.topics)

    def owns_group(self, group: str) -> bool:
        return any(pattern.fullmatch(group) for pattern in self.groups)


@dataclass(frozen=True, slots=True)
class Owners:
    """Every team, in file order. Pure: no I/O after loading."""

    teams: tuple[Team, ...] = ()

    def topic_owner(self, topic: str) -> Team | None:
        """The first team whose topic pattern matches `topic`."""
        return next((team for team in self.teams if team.owns_topic(topic)), None)

    def team(self, name: str) -> Team | None:
        return next((team for team in self.teams if team.name == name), None)


def _at(data: Any, lines: Mapping[tuple[int, Any], int], loc: tuple[str | int, ...]) -> str:
    line = line_of(data, lines, loc)
    where = ".".join(map(str, loc))
    return f"line {line}: {where}" if line else where


def check_owners_data(data: Any, lines: Mapping[tuple[int, Any], int]) -> tuple[tuple[Team, ...], list[str]]:
    """The teams of an owners file's parsed `data`, and its problems (`line N: key.path: message`).

    The teams are empty when there is any problem.
    """
    if data is None:
        return (), []
    if not isinstance(data, dict):
        return (), ["owners.yaml must hold a mapping with a `teams:` list (see alert_rules/README.md)"]
    problems: list[str] = []
    spec: _OwnersFile | None = None
    try:
        spec = _OwnersFile.model_validate(data)
    except ValidationError as exc:
        problems += format_validation_error(exc, data, lines)
    raw_teams = data.get("teams")
    seen: dict[str, int | None] = {}
    for index, team in enumerate(raw_teams if isinstance(raw_teams, list) else []):
        name = team.get("name") if isinstance(team, dict) else None
        if not isinstance(name, str):
            continue
        loc = ("teams", index, "name")
        if name in seen:
            problems.append(
                f"{_at(data, lines, loc)}: duplicate team {name!r}, already defined on line "
                f"{seen[name]}; merge the two"
            )
        seen.setdefault(name, line_of(data, lines, loc))
    if spec is None or problems:
        return (), problems
    teams = tuple(
        Team(
            team.name,
            tuple(team.receivers),
            tuple(compile_name_pattern(p) for p in team.topics),
            tuple(compile_name_pattern(p) for p in team.groups),
        )
        for team in spec.teams
    )
    return teams, []


def load_owners(path: Path) -> Owners:
    """Load and validate an owners file. Raises ConfigError naming the file, each line and the fix.

    Receiver names are not checked here (`kafka-health routes check` checks them against
    routing.yaml).
    """
    data, lines = read_yaml(path)
    teams, problems = check_owners_data(data, lines)
    if problems:
        raise ConfigError(problems, str(path))
    return Owners(teams)


def default_owners_path() -> Path:
    """The shipped `alert_rules/owners.yaml`: an example to copy, read only where it is named
    (the demo, `kafka-health routes` without options); it grants nothing in a deployment."""
    from monitor.core.resources import rules_dir

    return rules_dir() / "owners.yaml"


def owners_file(config: AlertConfig) -> Path | None:
    """THE ownership file of a deployment, for alerting (team labels, the team's receivers) and
    for the retention button (who may raise, revert, extend) alike: `alert.owners_file`, else the
    `owners.yaml` beside a configured `alert.routing_file`, else none. With none, no team owns
    anything: only the platform role (the policy's reviewers) may act."""
    if config.owners_file is not None:
        return config.owners_file
    return owners_beside(config.routing_file) if config.routing_file is not None else None


def owners_beside(routing_file: Path) -> Path | None:
    """The `owners.yaml` beside `routing_file`, if there is one and it is not the shipped example."""
    beside = routing_file.parent / "owners.yaml"
    if not beside.exists() or beside.resolve() == default_owners_path().resolve():
        return None
    return beside


def load_owners_file(path: Path | None) -> Owners:
    """The owners of `path` (see `load_owners`); no team at all without a file."""
    return load_owners(path) if path is not None else Owners()
