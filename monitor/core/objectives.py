"""Lag objectives: "lag <= 60 s in 99.5 % of minutes over 28 days" for a group or a pattern of
groups (`alert_rules/objectives.yaml`, or `evaluate.objectives_file`), and the arithmetic of their
error budgets and burn rates (DOMAIN.md section 8).

A minute is bad for (objective, group) when the group's lag in seconds (its worst partition,
`max_lag_seconds` of the group entity) is above the objective's `lag_seconds` at an evaluation in
that minute. The error budget is the fraction `1 - target` of the minutes; the burn rate over a
window is the fraction of its recorded minutes that were bad divided by that budget: 1 spends the
budget exactly over the objective's window, 14.4 spends 2 % of 30 days' budget in one hour.

The windows and factors of the multi-window alerts (the common SRE practice) are `BURN_ALERTS`:
an alert fires when both its long and its short window burn at least its factor. The shipped
rules (`alert_rules/lag_objectives.yaml`) spell the same numbers in their conditions; a unit test
keeps the two equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from monitor.core.errors import ConfigError
from monitor.core.settings_base import compile_name_pattern
from monitor.core.yaml_files import format_validation_error, line_of, read_yaml

OBJECTIVE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_OBJECTIVES = 200
"""Objectives a file may hold: each adds rows per matching group to every evaluation."""
MAX_OBJECTIVE_PATTERN = 200
"""Longest group or cluster pattern: a name, or a short pattern of names."""
MAX_WINDOW_DAYS = 90


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One of the burn-rate windows an evaluation computes: its column and its length."""

    column: str
    length: timedelta

    @property
    def label(self) -> str:
        """The window as labels and headings name it: `5m`, `1h`, `3d`."""
        return self.column.removeprefix("burn_rate_")


BURN_WINDOWS: tuple[BurnWindow, ...] = (
    BurnWindow("burn_rate_5m", timedelta(minutes=5)),
    BurnWindow("burn_rate_30m", timedelta(minutes=30)),
    BurnWindow("burn_rate_1h", timedelta(hours=1)),
    BurnWindow("burn_rate_6h", timedelta(hours=6)),
    BurnWindow("burn_rate_3d", timedelta(days=3)),
)


@dataclass(frozen=True, slots=True)
class BurnAlert:
    """An alert on a pair of windows: both must burn at least `factor` (long for significance,
    short so that it resolves soon after the burning stops)."""

    rule: str
    severity: str
    long: str
    short: str
    factor: float


BURN_ALERTS: tuple[BurnAlert, ...] = (
    BurnAlert("LagObjectiveFastBurn", "critical", "burn_rate_1h", "burn_rate_5m", 14.4),
    BurnAlert("LagObjectiveFastBurn", "critical", "burn_rate_6h", "burn_rate_30m", 6.0),
    BurnAlert("LagObjectiveSlowBurn", "warning", "burn_rate_3d", "burn_rate_6h", 1.0),
)
"""Page at 14.4x over 1 h and 5 min (2 % of a 30-day budget in an hour) or at 6x over 6 h and
30 min (5 % in six hours); ticket at 1x over 3 days and 6 h (the budget is being spent exactly)."""

LONGEST_BURN_WINDOW = max(w.length for w in BURN_WINDOWS)


def budget_fraction(target_percent: float) -> float:
    """The error budget as a fraction of the minutes: 1 - target (99.5 % -> 0.005)."""
    return 1.0 - target_percent / 100.0


def burn_rate(bad_minutes: int, minutes: int, target_percent: float) -> float | None:
    """The bad-minute fraction over the budget fraction; None without a recorded minute."""
    if minutes <= 0:
        return None
    return (bad_minutes / minutes) / budget_fraction(target_percent)


def budget_remaining(bad_minutes: int, window_minutes: int, target_percent: float) -> float:
    """The fraction of the budget over the objective's window (`window_minutes`) not spent yet by
    `bad_minutes`: 1 untouched, 0 spent, negative overspent."""
    allowed = window_minutes * budget_fraction(target_percent)
    return 1.0 - bad_minutes / allowed


class _ObjectiveSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="unique name, shown in alerts and pages")
    group: str = Field(description="the consumer group id, or a pattern matching whole group ids")
    cluster: str = Field(default=".*", description="pattern of the clusters it applies to")
    lag_seconds: float = Field(gt=0, le=30 * 86_400, description="a minute is bad above this lag")
    target: float = Field(gt=0, lt=100, description="percent of minutes that must be good")
    window_days: int = Field(default=28, ge=1, le=MAX_WINDOW_DAYS)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not OBJECTIVE_NAME.match(value):
            raise ValueError(
                f"objective name {value!r} must be 1 to 100 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        return value

    @field_validator("group", "cluster")
    @classmethod
    def _pattern(cls, value: str) -> str:
        if len(value) > MAX_OBJECTIVE_PATTERN:
            raise ValueError(
                f"pattern of {len(value)} characters; at most {MAX_OBJECTIVE_PATTERN}: name the group, "
                "or write a shorter pattern"
            )
        compile_name_pattern(value)
        return value


class _ObjectivesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    objectives: list[_ObjectiveSpec] = Field(default_factory=list, max_length=MAX_OBJECTIVES)


@dataclass(frozen=True, slots=True)
class Objective:
    """A lag objective: the groups (whole-name pattern) of the clusters (pattern) it applies to,
    and its threshold, target (percent) and window."""

    name: str
    group: str
    cluster: str
    lag_seconds: float
    target: float
    window_days: int

    @property
    def window(self) -> timedelta:
        return timedelta(days=self.window_days)


def check_objectives_data(
    data: Any, lines: Mapping[tuple[int, Any], int]
) -> tuple[tuple[Objective, ...], list[str]]:
    """The objectives of a parsed file and its problems (`line N: key.path: message`); no
    objective when there is any problem."""
    if data is None:
        return (), []
    if not isinstance(data, dict):
        return (), ["the objectives file must hold a mapping with an `objectives:` list (see the README)"]
    try:
        spec = _ObjectivesFile.model_validate(data)
    except ValidationError as exc:
        return (), format_validation_error(exc, data, lines)
    problems: list[str] = []
    seen: dict[str, int | None] = {}
    for index, objective in enumerate(spec.objectives):
        line = line_of(data, lines, ("objectives", index, "name"))
        if objective.name in seen:
            where = f"line {line}: " if line else ""
            problems.append(
                f"{where}objectives.{index}.name: duplicate objective {objective.name!r}, already "
                f"defined on line {seen[objective.name]}; give each objective its own name"
            )
        seen.setdefault(objective.name, line)
    if problems:
        return (), problems
    return tuple(Objective(**o.model_dump()) for o in spec.objectives), []


def load_objectives(path: Path) -> tuple[Objective, ...]:
    """The objectives of `path`. Raises ConfigError naming the file, each line and the fix."""
    data, lines = read_yaml(path)
    objectives, problems = check_objectives_data(data, lines)
    if problems:
        raise ConfigError(problems, str(path))
    return objectives


def default_objectives_path() -> Path:
    """The shipped `alert_rules/objectives.yaml` (an example that matches no real group)."""
    from monitor.core.resources import rules_dir

    return rules_dir() / "objectives.yaml"


def objectives_of(path: Path | None) -> tuple[Objective, ...]:
    """The objectives of `path`, else of the shipped file."""
    return load_objectives(path if path is not None else default_objectives_path())


def matching_groups(
    objectives: Sequence[Objective], groups: Iterable[tuple[str, str]]
) -> list[tuple[str, str, str]]:
    """(objective, cluster, group_id) of each of `groups` ((cluster, group_id)) each objective's
    patterns match whole. RE2 matches them, in time linear in the names, as the file was checked:
    a pattern that would backtrack for ever in another regex engine costs no more than any other."""
    compiled = [(o.name, compile_name_pattern(o.cluster), compile_name_pattern(o.group)) for o in objectives]
    return [
        (name, cluster, group_id)
        for cluster, group_id in groups
        for name, cluster_pattern, group_pattern in compiled
        if cluster_pattern.fullmatch(cluster) and group_pattern.fullmatch(group_id)
    ]


def objectives_rows(objectives: Sequence[Objective]) -> list[tuple[str, str, str, float, float, int]]:
    """The objectives as rows (name, group, cluster, lag_seconds, target, window_days)."""
    return [(o.name, o.group, o.cluster, o.lag_seconds, o.target, o.window_days) for o in objectives]
