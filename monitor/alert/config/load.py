"""Loading `alert_rules/routing.yaml` and `alert_rules/owners.yaml`: strict, every problem
reported at once (an unknown key, a bad matcher or duration, or a receiver that is not defined is
a `ConfigError` naming the file, the line and the fix), then resolved into `Routing`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from monitor.alert.config.routing import Routing, RoutingSettings
from monitor.alert.config.schema import RouteSpec, RoutingFile
from monitor.alert.dispatch.route import Route, RouteMatch, root_defaults
from monitor.alert.matchers import parse_matchers
from monitor.alert.mute.inhibit import InhibitRule
from monitor.alert.receivers.console import ConsoleReceiverConfig
from monitor.alert.receivers.registry import parse_receiver
from monitor.core.errors import ConfigError
from monitor.core.owners import Team, check_owners_data, owners_file
from monitor.core.resources import rules_dir
from monitor.core.settings import AlertConfig
from monitor.core.yaml_files import format_validation_error, line_of, read_yaml

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_LINE = re.compile(r"^line (\d+): ")
_T = TypeVar("_T")


def routing_paths(config: AlertConfig) -> tuple[Path, Path | None]:
    """The routing file (the configured one, else the shipped one) and THE ownership file
    (`core.owners.owners_file`: configured, or beside a configured routing file; never the shipped
    example by itself)."""
    default_routing, _ = default_routing_paths()
    return config.routing_file or default_routing, owners_file(config)


def console_inboxes(routing: Routing) -> dict[str, Path]:
    """Receiver name -> file, for each console receiver of `routing` with a `path` (the demo's
    inbox)."""
    inboxes: dict[str, Path] = {}
    for name, raw in routing.receiver_configs.items():
        receiver = parse_receiver(raw)
        if isinstance(receiver, ConsoleReceiverConfig) and receiver.console.path is not None:
            inboxes[name] = receiver.console.path
    return inboxes


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
    spec: RoutingFile | None = None
    try:
        spec = RoutingFile.model_validate(data)
    except ValidationError as exc:
        problems.items += format_validation_error(exc, data, problems.lines)
    configs, defined = _check_receivers(data.get("receivers"), problems)
    if isinstance(data.get("route"), dict):
        _check_references(data["route"], ("route",), defined, problems)
    if spec is None or problems:
        return _Parts(defined, None)
    root = _resolve(spec.route, ("route",), None, "root", problems)
    _check_receiver_timing(spec.route, root, ("route",), configs, problems)
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
    spec: RouteSpec, loc: tuple[str | int, ...], parent: RouteMatch | None, path: str, problems: _Problems
) -> Route:
    """A node with its parent's settings filled in, checking the escalation pair it ends up with."""
    base = parent or root_defaults(path)
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


def _check_receiver_timing(
    spec: RouteSpec,
    route: Route,
    loc: tuple[str | int, ...],
    configs: Mapping[str, Mapping[str, Any]],
    problems: _Problems,
) -> None:
    """Each route's receiver checks the route's timing against its own (`route_problem`: an
    Alertmanager's `ends_after`), through the whole tree."""
    raw = configs.get(route.match.receiver)
    problem = parse_receiver(raw).route_problem(route.match.repeat_interval) if raw is not None else None
    if problem is not None:
        problems.add((*loc, "repeat_interval") if spec.repeat_interval is not None else loc, problem)
    for index, (child_spec, child) in enumerate(zip(spec.routes, route.routes, strict=True)):
        _check_receiver_timing(child_spec, child, (*loc, "routes", index), configs, problems)


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
