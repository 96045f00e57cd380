"""`kafka-health rules ...`: check, list and explain the alert rules without running anything.

The rule machinery (sqlglot, jinja2) is imported by the commands, not at start-up, so that the
other `kafka-health` commands do not pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from monitor.cli.common import err, out, shown_path
from monitor.core.derived import ENTITIES, KEYS, columns_of
from monitor.core.formatting import printable_markup

if TYPE_CHECKING:
    from monitor.evaluate.rules import RuleSet

app = typer.Typer(help="Check and list the alert rules (alert_rules/*.yaml).", no_args_is_help=True)


PathsArgument = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Rule files or directories; default: the shipped alert_rules/*.yaml "
        "(without routing.yaml, owners.yaml and policy.yaml).",
        show_default=False,
    ),
]


def _load(paths: list[Path] | None) -> RuleSet:
    from monitor.evaluate.rules import default_rule_paths, load_rules

    chosen = paths or default_rule_paths()
    if not chosen:
        err.print("error: no rule files found (alert_rules/*.yaml)", markup=False, highlight=False)
        raise typer.Exit(2)
    return load_rules(chosen)


@app.command("check")
def check(paths: PathsArgument = None) -> None:
    """Validate rule files: each is OK or gets its problems with line numbers.

    Exits 2 when any file has a problem.
    """
    ruleset = _load(paths)
    for report in ruleset.files:
        if report.error is None:
            out.print(f"{shown_path(report.path)}: OK ({len(report.rules)} rule(s))", highlight=False)
            continue
        problems = report.error.problems
        err.print(f"{shown_path(report.path)}: {len(problems)} problem(s)", markup=False, highlight=False)
        for problem in problems:
            err.print(f"  {shown_path(report.path)}: {problem}", markup=False, highlight=False)
    if not ruleset.ok:
        bad = len(ruleset.errors)
        err.print(f"{bad} of {len(ruleset.files)} file(s) have problems", markup=False, highlight=False)
        raise typer.Exit(2)


@app.command("list")
def list_rules(paths: PathsArgument = None) -> None:
    """The valid rules: name, entity, severity tiers and `for`."""
    from monitor.core.vocabulary import format_duration
    from monitor.evaluate.rules import describe_tiers

    ruleset = _load(paths)
    table = Table("name", "entity", "tiers", "for")
    table.columns[0].no_wrap = True
    for rule in ruleset.rules:
        table.add_row(
            rule.name, rule.entity, printable_markup(describe_tiers(rule)), format_duration(rule.for_seconds)
        )
    out.print(table)
    if not ruleset.ok:
        err.print(
            f"{len(ruleset.errors)} file(s) have problems; their bad rules are not listed "
            "(run `kafka-health rules check`)",
            markup=False,
            highlight=False,
        )


@app.command("columns")
def columns(
    entity: Annotated[str | None, typer.Argument(help="One entity; default: all of them.")] = None,
) -> None:
    """The columns a rule (and its templates) may use, per entity."""
    if entity is not None and entity not in ENTITIES:
        err.print(f"error: unknown entity {entity!r}; use one of {', '.join(ENTITIES)}", markup=False)
        raise typer.Exit(2)
    for name in [entity] if entity else list(ENTITIES):
        keys = ", ".join(("cluster", *KEYS[name]))
        table = Table("column", "type", "meaning", title=f"{name} (key: {keys})", title_justify="left")
        for column in columns_of(name).values():
            table.add_row(column.name, column.type, column.meaning)
        out.print(table)
