"""`kafka-health routes ...`: test, check and show the alert routing without running anything,
like Alertmanager's `amtool config routes test` and `amtool check-config`.

Without options the commands read the shipped `alert_rules/routing.yaml` and
`alert_rules/owners.yaml` (the example); `--routing FILE` alone reads the `owners.yaml` beside FILE,
if there is one, as the daemon does with `alert.routing_file`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from monitor.alert.config import Routing, check_routing, default_routing_paths
from monitor.alert.dispatch.route import Route, RouteMatch
from monitor.cli.common import err, out, shown_path
from monitor.core.errors import ConfigError
from monitor.core.formatting import printable, printable_markup
from monitor.core.owners import owners_file
from monitor.core.settings import AlertConfig
from monitor.core.vocabulary import format_duration

app = typer.Typer(
    help="Test, check and show the alert routing (alert_rules/routing.yaml and owners.yaml).",
    no_args_is_help=True,
)


_LABEL_ARG = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)

RoutingOption = Annotated[
    Path | None,
    typer.Option(
        "--routing", help="The routing file; default: alert_rules/routing.yaml.", show_default=False
    ),
]
OwnersOption = Annotated[
    Path | None,
    typer.Option(
        "--owners",
        help="The ownership file; default: owners.yaml beside the routing file, when it exists.",
        show_default=False,
    ),
]


def _paths(routing: Path | None, owners: Path | None) -> tuple[Path, Path | None]:
    """The files named, else the shipped pair (checking the example), with the daemon's rule for
    the ownership file of a routing file given alone (`core.owners.owners_file`)."""
    if routing is None:
        default_routing, default_owners = default_routing_paths()
        return default_routing, owners or default_owners
    return routing, owners_file(AlertConfig(routing_file=routing, owners_file=owners))


def _say_problems(errors: list[ConfigError]) -> None:
    for error in errors:
        source = shown_path(Path(error.source))
        err.print(f"{source}: {len(error.problems)} problem(s)", markup=False, highlight=False)
        for problem in error.problems:
            err.print(f"  {source}: {problem}", markup=False, highlight=False)


def _load(routing: Path | None, owners: Path | None) -> Routing:
    routing_path, owners_path = _paths(routing, owners)
    loaded, errors = check_routing(routing_path, owners_path)
    if errors or loaded is None:
        _say_problems(errors)
        err.print("the routing has problems (run `kafka-health routes check`)", markup=False)
        raise typer.Exit(2)
    return loaded


def parse_label_args(texts: list[str]) -> dict[str, str]:
    """`LABEL=VALUE` arguments as labels. Raises typer.BadParameter naming the bad one."""
    labels: dict[str, str] = {}
    for text in texts:
        found = _LABEL_ARG.match(text)
        if found is None:
            raise typer.BadParameter(
                f"{text!r} is not LABEL=VALUE; write e.g. severity=critical topic=payments "
                "(a label name is letters, digits and '_', not starting with a digit)",
                param_hint="LABEL=VALUE",
            )
        labels[found["name"]] = found["value"]
    return labels


@app.command("test")
def test(
    labels: Annotated[
        list[str],
        typer.Argument(
            help="The alert's labels, e.g. severity=critical topic=payments cluster=prod.",
            metavar="LABEL=VALUE",
        ),
    ],
    routing: RoutingOption = None,
    owners: OwnersOption = None,
) -> None:
    """Which receivers an alert with these labels would notify, through which route, and when."""
    given = parse_label_args(labels)
    loaded = _load(routing, owners)
    team = loaded.team_for(given)
    if team is None:
        out.print("team: none (no `team` label, no owner in owners.yaml)", highlight=False)
    else:
        source = "its team label" if given.get("team") else "owners.yaml"
        out.print(f"team: {printable(team)} (from {source})", highlight=False, markup=False)
    table = Table("receiver", "route", "group_by", "wait", "interval", "repeat", "escalation", "resolved")
    for index, column in enumerate(table.columns):
        column.no_wrap = index < 2
        column.min_width = len(str(column.header))
        column.overflow = "fold"  # a cut receiver name would mislead
    for match in loaded.receivers_for(given):
        table.add_row(
            *map(printable_markup, (match.receiver, match.route_path, ", ".join(match.group_by))),
            format_duration(match.group_wait),
            format_duration(match.group_interval),
            format_duration(match.repeat_interval),
            printable_markup(_escalation(match)),
            "yes" if match.send_resolved else "no",
        )
    out.print(table)


@app.command("check")
def check(routing: RoutingOption = None, owners: OwnersOption = None) -> None:
    """Validate the routing and ownership files; exits 2 with every problem and its line."""
    routing_path, owners_path = _paths(routing, owners)
    loaded, errors = check_routing(routing_path, owners_path)
    if errors or loaded is None:
        _say_problems(errors)
        raise typer.Exit(2)
    receivers = len(loaded.receiver_configs)
    routes = sum(1 for _ in loaded.root.walk())
    out.print(
        f"{shown_path(routing_path)}: OK ({receivers} receiver(s), {routes} route(s), "
        f"{len(loaded.inhibit_rules)} inhibit rule(s))",
        highlight=False,
    )
    if owners_path is not None:
        out.print(f"{shown_path(owners_path)}: OK ({len(loaded.teams)} team(s))", highlight=False)


@app.command("show")
def show(routing: RoutingOption = None, owners: OwnersOption = None) -> None:
    """The routing tree with each route's effective settings, the teams and the inhibit rules."""
    loaded = _load(routing, owners)
    tree = Tree(_describe(loaded.root), highlight=False)
    _add_children(tree, loaded.root)
    out.print(tree)
    for team in loaded.teams:
        topics = ", ".join(p.pattern for p in team.topics) or "-"
        groups = ", ".join(p.pattern for p in team.groups) or "-"
        out.print(
            printable(
                f"team {team.name}: receivers {', '.join(team.receivers) or '-'}; topics {topics}; "
                f"groups {groups}"
            ),
            markup=False,
            highlight=False,
        )
    for rule in loaded.inhibit_rules:
        source = ", ".join(map(str, rule.source_matchers))
        target = ", ".join(map(str, rule.target_matchers))
        equal = f" with equal {', '.join(rule.equal)}" if rule.equal else ""
        after = " that went pending after it" if rule.only_after_source else ""
        told = ", ".join(map(str, rule.still_notify))
        unless = f", still telling {{{told}}}" if told else ""
        line = f"inhibit: {{{source}}} mutes {{{target}}}{after}{equal}{unless}"
        out.print(printable(line), markup=False, highlight=False)


def _add_children(branch: Tree, route: Route) -> None:
    for child in route.routes:
        _add_children(branch.add(_describe(child), highlight=False), child)


def _describe(route: Route) -> Text:
    """Two lines: what the route takes and where it goes; then its effective settings."""
    match = route.match
    matchers = ", ".join(map(str, route.matchers)) or "every alert"
    head = f"{match.route_path} {{{matchers}}} -> {match.receiver}"
    settings = [
        f"group_by [{', '.join(match.group_by)}]",
        f"wait {format_duration(match.group_wait)}",
        f"interval {format_duration(match.group_interval)}",
        f"repeat {format_duration(match.repeat_interval)}",
    ]
    if match.escalate_to:
        settings.append(f"escalate {_escalation(match)}")
    if not match.send_resolved:
        settings.append("no resolved notices")
    text = Text(printable(head + (", continue" if route.continue_matching else "")))
    text.append("\n" + printable("; ".join(settings)), style="dim")
    return text


def _escalation(match: RouteMatch) -> str:
    if match.escalate_to is None:
        return "-"
    return f"after {format_duration(match.escalate_after)} to {match.escalate_to}"
