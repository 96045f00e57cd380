"""What every settings section shares: strict sections (unknown keys refused, numbers finite,
every `*_seconds` sane) and the name filters of clusters, topics and groups. The settings model
is `monitor.core.settings`."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from monitor.core.patterns import PatternError, UserPattern, compile_pattern
from monitor.core.vocabulary import check_seconds


class Strict(BaseModel):
    """A section: unknown keys refused, numbers finite, every `*_seconds` a time a setting can
    mean (`check_seconds`: not 1e-300, not centuries)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _sane_seconds(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name and info.field_name.endswith("_seconds") and isinstance(value, float | int):
            return check_seconds(value)
        return value


def compile_name_pattern(pattern: str) -> UserPattern:
    """A topic or group name pattern, compiled with RE2 to match whole names (use `fullmatch`).

    `.` matches every character, a newline included: a name is data, and a group id with a
    control character in it must still match `.*`, or it would silently not be monitored.
    Raises ValueError with the fix for a pattern that is too long or does not compile."""
    try:
        return compile_pattern(pattern, dot_all=True)
    except PatternError as exc:
        raise ValueError(f"{exc}; the pattern is matched against the whole name") from None


def compile_patterns(patterns: list[str]) -> list[str]:
    """Check every name pattern compiles; a bad one is an error that says how to fix it."""
    for pattern in patterns:
        compile_name_pattern(pattern)
    return patterns


class NameFilter(Strict):
    """Allow/deny regexes matched against whole names. Deny wins; empty allow means all."""

    allow: list[str] = Field(default_factory=lambda: [".*"])
    deny: list[str] = Field(default_factory=list)

    _allow_re: list[UserPattern] = []
    _deny_re: list[UserPattern] = []

    @field_validator("allow", "deny")
    @classmethod
    def _valid_regexes(cls, value: list[str]) -> list[str]:
        return compile_patterns(value)

    def model_post_init(self, __context: Any) -> None:
        object.__setattr__(self, "_allow_re", [compile_name_pattern(p) for p in self.allow])
        object.__setattr__(self, "_deny_re", [compile_name_pattern(p) for p in self.deny])

    def accepts(self, name: str) -> bool:
        if any(p.fullmatch(name) for p in self._deny_re):
            return False
        return not self._allow_re or any(p.fullmatch(name) for p in self._allow_re)
