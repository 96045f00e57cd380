"""What `alert_rules/routing.yaml` may hold: its keys, their types and the checks of one value
(durations, label names, matchers, URLs). Validated, not yet resolved: `config/load.py` resolves
the route tree's inheritance and checks what refers to what.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, field_validator

from monitor.alert.config.routing import DEFAULT_SILENCE_MAX_DURATION
from monitor.alert.dispatch.route import GROUP_BY_ALL
from monitor.alert.matchers import Matcher
from monitor.core.vocabulary import parse_duration

LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _matcher_text(text: str) -> str:
    Matcher.parse(text)  # a MatcherError is a ValueError: pydantic reports it at the list item
    return text


MatcherText = Annotated[str, AfterValidator(_matcher_text)]


class RouteSpec(_Strict):
    receiver: str | None = None
    matchers: list[MatcherText] = Field(default_factory=list)
    continue_: StrictBool = Field(default=False, alias="continue")
    group_by: list[str] | None = None
    group_wait: int | None = None
    group_interval: int | None = None
    repeat_interval: int | None = None
    escalate_after: int | None = None
    escalate_to: str | None = None
    send_resolved: StrictBool | None = None
    routes: list[RouteSpec] = Field(default_factory=list)

    @field_validator("group_wait", "group_interval", "repeat_interval", "escalate_after", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return None if value is None else parse_duration(value)

    @field_validator("group_interval", "repeat_interval", "escalate_after")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError("must be longer than 0s, e.g. 5m")
        return value

    @field_validator("group_by")
    @classmethod
    def _labels(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if GROUP_BY_ALL in value and len(value) > 1:
            raise ValueError("'...' groups by every label already; give it alone: group_by: ['...']")
        for label in value:
            if label != GROUP_BY_ALL and not LABEL.match(label):
                raise ValueError(
                    f"bad label name {label!r}: letters, digits and '_', not starting with a digit"
                )
        return value


class InhibitSpec(_Strict):
    source_matchers: list[MatcherText]
    target_matchers: list[MatcherText]
    equal: list[str] = Field(default_factory=list)
    only_after_source: bool = False
    still_notify: list[MatcherText] = Field(default_factory=list)

    @field_validator("source_matchers", "target_matchers")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one matcher: without one, every alert would match")
        return value

    @field_validator("equal")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        for label in value:
            if not LABEL.match(label):
                raise ValueError(
                    f"bad label name {label!r}: letters, digits and '_', not starting with a digit"
                )
        return value


class SettingsSpec(_Strict):
    silence_max_duration: int = DEFAULT_SILENCE_MAX_DURATION
    external_url: str | None = None

    @field_validator("silence_max_duration", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration(value)

    @field_validator("silence_max_duration")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be longer than 0s, e.g. 7d")
        return value

    @field_validator("external_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://\S+$", value):
            raise ValueError(f"{value!r} must be an http(s) URL, e.g. https://kafka-health.example.com")
        return value.rstrip("/") if value else value


class RoutingFile(_Strict):
    settings: SettingsSpec = Field(default_factory=SettingsSpec)
    receivers: list[Any]
    route: RouteSpec
    inhibit_rules: list[InhibitSpec] = Field(default_factory=list)
