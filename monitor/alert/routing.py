"""Routing and ownership: which receivers hear about an alert, how its notices are grouped and
timed, who owns it, and which alerts mute others.

Two operator-edited files, both strict (an unknown key, a bad matcher or duration, or a receiver
that is not defined is a `ConfigError` naming the file, the line and the fix):

- `alert_rules/routing.yaml`: `settings`, `receivers`, the `route` tree and `inhibit_rules`;
- `alert_rules/owners.yaml`: `teams`, each owning topics and consumer groups by pattern.

The tree follows Alertmanager: depth first, a child takes an alert when all its matchers hold;
the first child that takes it wins unless it has `continue: true`; when no child takes it, the
node itself does. Children inherit the receiver, grouping, timings, `send_resolved` and the
escalation settings of their parent. Escalation is ours (Alertmanager has none): an
unacknowledged alert still firing after `escalate_after` is also sent to `escalate_to`.

Ownership: a rule's own `team` label wins; otherwise the first team whose topic pattern matches
the alert's `topic`, else whose group pattern matches its `group_id`, becomes the `team` label
(so routes can match `team=payments`), and that team's receivers are notified besides whatever
the tree picks.

Each receiver's kind settings are checked by the receivers' registry
(`monitor.alert.receivers.registry.parse_receiver`); the routing keeps each receiver's raw mapping.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
)

from monitor.alert.matchers import Matcher, matches_all, parse_matchers
from monitor.alert.receivers.registry import parse_receiver
from monitor.core.errors import ConfigError
from monitor.core.owners import Team, check_owners_data
from monitor.core.resources import rules_dir
from monitor.core.vocabulary import format_duration, parse_duration
from monitor.core.yaml_files import format_validation_error, line_of, read_yaml

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
DEFAULT_SILENCE_MAX_DURATION = 7 * 86400

_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_LINE = re.compile(r"^line (\d+): ")
_T = TypeVar("_T")


# ---------------------------------------------------------------------------------------------
# What the files hold (validated, not yet resolved)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _matcher_text(text: str) -> str:
    Matcher.parse(text)  # a MatcherError is a ValueError: pydantic reports it at the list item
    return text


MatcherText = Annotated[str, AfterValidator(_matcher_text)]


class _RouteSpec(_Strict):
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
    routes: list[_RouteSpec] = Field(default_factory=list)

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
            if label != GROUP_BY_ALL and not _LABEL.match(label):
                raise ValueError(
                    f"bad label name {label!r}: letters, digits and '_', not starting with a digit"
                )
        return value


class _InhibitSpec(_Strict):
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
            if not _LABEL.match(label):
                raise ValueError(
                    f"bad label name {label!r}: letters, digits and '_', not starting with a digit"
                )
        return value


class _SettingsSpec(_Strict):
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


class _RoutingFile(_Strict):
    settings: _SettingsSpec = Field(default_factory=_SettingsSpec)
    receivers: list[Any]
    route: _RouteSpec
    inhibit_rules: list[_InhibitSpec] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The resolved model


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


@dataclass(frozen=True, slots=True)
class InhibitRule:
    """While an alert matching `source_matchers` fires, alerts matching `target_matchers` that
    share the `equal` labels with it are covered by it (an alert never covers itself): they are
    muted, and the source's notice carries them as its impact. With `only_after_source`, only
    targets that went pending after the source did: what was already wrong before the cause
    appeared is not its effect, and is still told. A covered target matching every
    `still_notify` matcher (when there are any) is told anyway: its consequence is worse than
    the source's notice says (writes failing behind a broker that is down)."""

    source_matchers: tuple[Matcher, ...]
    target_matchers: tuple[Matcher, ...]
    equal: tuple[str, ...]
    only_after_source: bool = False
    still_notify: tuple[Matcher, ...] = ()

    def covers(self, source_labels: Mapping[str, str], target_labels: Mapping[str, str]) -> bool:
        """Whether the target counts in the source's impact (muted or still told)."""
        if dict(source_labels) == dict(target_labels):
            return False
        return (
            matches_all(self.source_matchers, source_labels)
            and matches_all(self.target_matchers, target_labels)
            and all(source_labels.get(n, "") == target_labels.get(n, "") for n in self.equal)
        )

    def still_told(self, target_labels: Mapping[str, str]) -> bool:
        return bool(self.still_notify) and matches_all(self.still_notify, target_labels)

    def inhibits(self, source_labels: Mapping[str, str], target_labels: Mapping[str, str]) -> bool:
        """Whether the target is muted: covered and not told anyway."""
        return self.covers(source_labels, target_labels) and not self.still_told(target_labels)


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

    def inhibits(self, source_labels: Mapping[str, str], target_labels: Mapping[str, str]) -> bool:
        """Whether a firing alert with `source_labels` mutes one with `target_labels`."""
        return any(rule.inhibits(source_labels, target_labels) for rule in self.inhibit_rules)

    def team(self, name: str) -> Team | None:
        return next((team for team in self.teams if team.name == name), None)


# ---------------------------------------------------------------------------------------------
# Loading


def default_routing_paths() -> tuple[Path, Path]:
    """The shipped `alert_rules/routing.yaml` and `alert_rules/owners.yaml`."""
    directory = rules_dir()
    return directory / "routing.yaml", directory / "owners.yaml"


def load_routing(routing_path: Path, owners_path: Path | None = None) -> Routing:
    """Load and validate both files. Raises ConfigError listing every problem with its line;
    when both files have problems, each problem starts with its file."""
    routing, errors = check_routing(routing_path, owners_path)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        problems = [f"{error.source}: {problem}" for error in errors for problem in error.problems]
        raise ConfigError(problems, "routing configuration")
    assert routing is not None
    return routing


def check_routing(
    routing_path: Path, owners_path: Path | None = None
) -> tuple[Routing | None, list[ConfigError]]:
    """The routing (None when a file has a problem) and one ConfigError per file with problems."""
    errors: list[ConfigError] = []
    try:
        data, lines = read_yaml(routing_path)
    except ConfigError as exc:
        return None, [exc]
    problems = _Problems(data, lines)
    parts = _check_routing_file(data, problems)
    if problems:
        errors.append(ConfigError(problems.sorted(), str(routing_path)))
    defined = parts.defined if parts else set()

    teams: tuple[Team, ...] = ()
    if owners_path is not None:
        try:
            owners_data, owners_lines = read_yaml(owners_path)
        except ConfigError as exc:
            return None, [*errors, exc]
        owner_problems = _Problems(owners_data, owners_lines)
        teams = _check_owners_file(owners_data, owner_problems, defined, checked=parts is not None)
        if owner_problems:
            errors.append(ConfigError(owner_problems.sorted(), str(owners_path)))
    if errors or parts is None or parts.routing is None:
        return None, errors
    return replace(parts.routing, teams=teams), []


class _Problems:
    """Problems of one file, each `line N: key.path: message`."""

    def __init__(self, data: Any, lines: Mapping[tuple[int, Any], int]) -> None:
        self.data = data
        self.lines = lines
        self.items: list[str] = []

    def add(self, loc: tuple[str | int, ...], message: str) -> None:
        line = line_of(self.data, self.lines, loc)
        where = ".".join(map(str, loc)) or "(top level)"
        self.items.append(f"{_at(line)}{where}: {message}")

    def line(self, loc: tuple[str | int, ...]) -> int | None:
        return line_of(self.data, self.lines, loc)

    def sorted(self) -> list[str]:
        return sorted(self.items, key=lambda text: int(m.group(1)) if (m := _LINE.match(text)) else 0)

    def __bool__(self) -> bool:
        return bool(self.items)


@dataclass
class _Parts:
    defined: set[str]
    routing: Routing | None


def _check_routing_file(data: Any, problems: _Problems) -> _Parts | None:
    if not isinstance(data, dict):
        problems.items.append(
            "routing.yaml must hold a mapping with `receivers:` and `route:` (see alert_rules/README.md)"
        )
        return None
    spec: _RoutingFile | None = None
    try:
        spec = _RoutingFile.model_validate(data)
    except ValidationError as exc:
        problems.items += format_validation_error(exc, data, problems.lines)
    configs, defined = _check_receivers(data.get("receivers"), problems)
    if isinstance(data.get("route"), dict):
        _check_references(data["route"], ("route",), defined, problems)
    if spec is None or problems:
        return _Parts(defined, None)
    root = _resolve(spec.route, ("route",), None, "root", problems)
    rules = tuple(
        InhibitRule(
            parse_matchers(r.source_matchers),
            parse_matchers(r.target_matchers),
            tuple(r.equal),
            r.only_after_source,
            parse_matchers(r.still_notify),
        )
        for r in spec.inhibit_rules
    )
    settings = RoutingSettings(spec.settings.silence_max_duration, spec.settings.external_url)
    if problems:
        return _Parts(defined, None)
    return _Parts(defined, Routing(root, configs, rules, settings))


def _check_receivers(raw: Any, problems: _Problems) -> tuple[dict[str, Mapping[str, Any]], set[str]]:
    """The valid receivers by name, and every name defined (so that one bad receiver does not
    also make each route that uses it an 'unknown receiver')."""
    configs: dict[str, Mapping[str, Any]] = {}
    first: dict[str, tuple[str | int, ...]] = {}
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        loc: tuple[str | int, ...] = ("receivers", index)
        if not isinstance(item, dict):
            problems.add(loc, "a receiver is a mapping: {name: ops-slack, slack: {...}}")
            continue
        name = item.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            fix = "letters, digits, '.', '_' or '-'" if isinstance(name, str) else "add one, e.g. ops-slack"
            problems.add((*loc, "name") if "name" in item else loc, f"every receiver needs a name: {fix}")
            continue
        if name in first:
            problems.add(
                (*loc, "name"),
                f"duplicate receiver name {name!r}, already defined on line {problems.line(first[name])}; "
                "rename one (routes refer to receivers by name)",
            )
            continue
        first[name] = (*loc, "name")
        before = len(problems.items)
        _parse_receiver(item, loc, problems)
        if len(problems.items) == before:
            configs[name] = item
    return configs, set(first)


def _parse_receiver(item: dict[str, Any], loc: tuple[str | int, ...], problems: _Problems) -> None:
    try:
        parse_receiver(item)
    except ValidationError as exc:
        for error in exc.errors():
            where = (*loc, *error["loc"])
            if error["type"] == "extra_forbidden":
                message = "unknown key; remove it or check its spelling"
            elif error["type"] == "missing":
                message = "required key is missing; add it"
            else:
                message = str(error["msg"]).removeprefix("Value error, ")
            problems.add(where, message)
    except ConfigError as exc:
        for problem in exc.problems:
            problems.add(loc, problem)
    except (ValueError, TypeError, KeyError) as exc:
        problems.add(loc, str(exc))


def _check_references(
    node: dict[str, Any], loc: tuple[str | int, ...], defined: set[str], problems: _Problems
) -> None:
    root = loc == ("route",)
    if root and not node.get("receiver"):
        problems.add(
            loc, "the root route needs a receiver: it gets every alert no child takes, e.g. receiver: console"
        )
    if root and node.get("matchers"):
        problems.add(
            (*loc, "matchers"),
            "the root route takes every alert; put matchers on a child route under routes:",
        )
    if root and node.get("continue"):
        problems.add((*loc, "continue"), "the root route has no siblings to continue to; remove it")
    for key in ("receiver", "escalate_to"):
        name = node.get(key)
        if isinstance(name, str) and name not in defined:
            problems.add(
                (*loc, key),
                f"unknown receiver {name!r}{_hint(name, defined)}; "
                f"define it under receivers: or use one of {', '.join(sorted(defined)) or '(none)'}",
            )
    children = node.get("routes")
    for index, child in enumerate(children if isinstance(children, list) else []):
        if isinstance(child, dict):
            _check_references(child, (*loc, "routes", index), defined, problems)


def _resolve(
    spec: _RouteSpec, loc: tuple[str | int, ...], parent: RouteMatch | None, path: str, problems: _Problems
) -> Route:
    """A node with its parent's settings filled in, checking the escalation pair it ends up with."""
    base = parent or RouteMatch(
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
    match = RouteMatch(
        receiver=spec.receiver or base.receiver,
        group_by=tuple(spec.group_by) if spec.group_by is not None else base.group_by,
        group_wait=_pick(spec.group_wait, base.group_wait),
        group_interval=_pick(spec.group_interval, base.group_interval),
        repeat_interval=_pick(spec.repeat_interval, base.repeat_interval),
        escalate_after=spec.escalate_after if spec.escalate_after is not None else base.escalate_after,
        escalate_to=spec.escalate_to or base.escalate_to,
        send_resolved=_pick(spec.send_resolved, base.send_resolved),
        route_path=path,
    )
    if spec.escalate_after is not None and match.escalate_to is None:
        problems.add(
            (*loc, "escalate_after"),
            "escalation needs a receiver to escalate to; add escalate_to: oncall-pager (for example)",
        )
    if spec.escalate_to is not None and match.escalate_after is None:
        problems.add((*loc, "escalate_to"), "escalation needs a delay; add escalate_after: 2h (for example)")
    if match.escalate_to == match.receiver:
        if spec.escalate_to is not None:
            problems.add(
                (*loc, "escalate_to"),
                f"{match.receiver!r} is this route's own receiver, so "
                "escalating to it changes nothing; escalate to the paging receiver",
            )
        # Inherited by a route that already notifies the escalation receiver: nothing to escalate.
        match = replace(match, escalate_after=None, escalate_to=None)
    children = tuple(
        _resolve(child, (*loc, "routes", i), match, f"{path}/{i}", problems)
        for i, child in enumerate(spec.routes)
    )
    return Route(parse_matchers(spec.matchers), spec.continue_, match, children)


def _pick(value: _T | None, inherited: _T) -> _T:
    return inherited if value is None else value


def _check_owners_file(
    data: Any, problems: _Problems, defined: set[str], *, checked: bool
) -> tuple[Team, ...]:
    """The teams (validated by `monitor.core.owners`), checking that their receivers are defined;
    `checked` is False when routing.yaml could not be read, so receiver names cannot be checked."""
    teams, found = check_owners_data(data, problems.lines)
    problems.items += found
    raw_teams = data.get("teams") if isinstance(data, dict) else None
    for index, team in enumerate(raw_teams if isinstance(raw_teams, list) and checked else []):
        receivers = team.get("receivers") if isinstance(team, dict) else None
        for position, receiver in enumerate(receivers if isinstance(receivers, list) else []):
            if isinstance(receiver, str) and receiver not in defined:
                problems.add(
                    ("teams", index, "receivers", position),
                    f"unknown receiver {receiver!r}{_hint(receiver, defined)}; define it under receivers: "
                    f"in routing.yaml or use one of {', '.join(sorted(defined)) or '(none)'}",
                )
    if problems:
        return ()
    return teams


def _hint(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _at(line: int | None) -> str:
    return f"line {line}: " if line else ""


__all__ = [
    "GROUP_BY_ALL",
    "InhibitRule",
    "Route",
    "RouteMatch",
    "Routing",
    "RoutingSettings",
    "Team",
    "check_routing",
    "default_routing_paths",
    "format_duration",
    "load_routing",
    "parse_duration",
]
