"""The retention policy: the guardrails of the retention button, an operator-edited YAML file.

`alert_rules/retention-policy.yaml` by default (`retention.policy_file` moves it). Strict like the
other YAML files: an unknown key, a bad duration or size, or a limit that contradicts another is a
`ConfigError` naming the file, the line and the fix; `kafka-health retention policy check`
validates it without starting anything.

Two tiers. A raise within `instant` is applied at once and reviewed afterwards (a reviewer
approves it or rolls it back); a larger one, still within `limits`, waits for approval by a member
of a `reviewers` team other than the requester. Past `limits` it is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from monitor.core.errors import ConfigError
from monitor.core.owners import TEAM_NAME
from monitor.core.resources import rules_dir
from monitor.core.user_input import shown
from monitor.core.vocabulary import parse_duration
from monitor.core.yaml_files import format_validation_error, read_yaml

_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) *(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$")
_SIZE_UNITS = {
    None: 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}


KAFKA_LONG_MAX = 2**63 - 1
"""The largest value of a Kafka `long` config (retention.ms, retention.bytes)."""


def bounded_long(value: int, what: str) -> int:
    """`value` when a Kafka long config can hold it; else ValueError naming `what`."""
    if not 0 < value <= KAFKA_LONG_MAX:
        raise ValueError(f"{what} must be between 1 and {KAFKA_LONG_MAX}, not {str(value)[:30]}")
    return value


def parse_duration_ms(value: Any) -> int:
    """Milliseconds in 30m, 12h, 7d, 1d12h (the duration grammar; zero refused). Raises ValueError
    saying how to write one."""
    seconds = parse_duration(value, allow_zero=False, examples="30m, 12h, 7d or 1d12h")
    return bounded_long(seconds * 1000, f"duration {shown(value)} in milliseconds")


def parse_size(value: Any) -> int:
    """Bytes in 500GiB, 10GB, 1048576. Raises ValueError saying how to write one."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return bounded_long(value, "a size in bytes")
    if isinstance(value, str) and len(value) <= 40 and (found := _SIZE.match(value.strip())):
        size = float(found.group(1)) * _SIZE_UNITS[found.group(2)]
        if 0 < size <= KAFKA_LONG_MAX:
            return int(size)
    raise ValueError(f"bad size {shown(value)}: write bytes or a number and a unit, e.g. 500MiB, 50GiB, 2TB")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TierLimits(_Strict):
    """Bounds of one tier; values are milliseconds and bytes once parsed."""

    max_retention_ms: int = Field(description="Highest retention.ms a raise may set (a duration).")
    max_retention_bytes: int = Field(description="Highest retention.bytes (per partition) a raise may set.")
    max_multiple: float = Field(gt=1, description="New value / current value, at most.")
    max_duration_ms: int = Field(alias="max_duration", description="How long a raise may last.")

    @field_validator("max_retention_ms", "max_duration_ms", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration_ms(value)

    @field_validator("max_retention_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int:
        return parse_size(value)


class _PolicyFile(_Strict):
    limits: TierLimits
    instant: TierLimits
    disk_usage_ceiling: float = Field(
        gt=0, lt=1, description="Projected used / total bytes allowed on every broker hosting a replica."
    )
    reviewers: list[str] = Field(min_length=1)
    notify_before_expiry_ms: int = Field(default=3_600_000, alias="notify_before_expiry")
    unknown_disk_cost: Literal["review", "refuse"] = "review"

    @field_validator("notify_before_expiry_ms", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration_ms(value)

    @field_validator("reviewers")
    @classmethod
    def _teams(cls, value: list[str]) -> list[str]:
        for team in value:
            if not TEAM_NAME.match(team):
                raise ValueError(f"team name {team!r} must be letters, digits, '.', '_' or '-'")
        return value

    @model_validator(mode="after")
    def _instant_within_limits(self) -> _PolicyFile:
        for name in ("max_retention_ms", "max_retention_bytes", "max_multiple", "max_duration_ms"):
            instant, limit = getattr(self.instant, name), getattr(self.limits, name)
            if instant > limit:
                key = name.removesuffix("_ms") if name == "max_duration_ms" else name
                raise ValueError(
                    f"instant.{key} ({instant:g}) is above limits.{key} ({limit:g}): the instant tier "
                    "must lie within the limits; lower instant or raise limits"
                )
        return self


@dataclass(frozen=True, slots=True)
class Policy:
    """The validated policy. Pure: no I/O after loading."""

    limits: TierLimits
    instant: TierLimits
    disk_usage_ceiling: float
    reviewers: tuple[str, ...]
    notify_before_expiry_ms: int
    unknown_disk_cost: Literal["review", "refuse"]
    source: str = "policy"

    def is_reviewer(self, teams: frozenset[str]) -> bool:
        return any(team in teams for team in self.reviewers)


def _problems(exc: ValidationError, data: Any, lines: dict[tuple[int, Any], int]) -> list[str]:
    return [p.replace("max_duration_ms", "max_duration") for p in format_validation_error(exc, data, lines)]


def load_policy(path: Path) -> Policy:
    """Load and validate the policy file. Raises ConfigError with every problem, its line and fix."""
    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(
            ["the policy holds a mapping with limits:, instant:, disk_usage_ceiling: and reviewers:"],
            str(path),
        )
    try:
        spec = _PolicyFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc, data, lines), str(path)) from exc
    return Policy(
        limits=spec.limits,
        instant=spec.instant,
        disk_usage_ceiling=spec.disk_usage_ceiling,
        reviewers=tuple(spec.reviewers),
        notify_before_expiry_ms=spec.notify_before_expiry_ms,
        unknown_disk_cost=spec.unknown_disk_cost,
        source=str(path),
    )


def default_policy_path() -> Path:
    """The shipped `alert_rules/retention-policy.yaml`."""
    return rules_dir() / "retention-policy.yaml"
