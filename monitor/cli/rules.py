"""`kafka-health rules ...`: check, list, explain and export the alert rules without running anything.

The rule machinery (sqlglot, jinja2) is imported by the commands, not at start-up, so that the
other `kafka-health` commands do not pay for it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from monitor.cli.common import err, fail, out, shown_path
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


@app.command("objectives")
def objectives(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="The objectives file; default: the shipped alert_rules/objectives.yaml.", show_default=False
        ),
    ] = None,
) -> None:
    """Validate a lag objectives file and list its objectives. Exits 2 when it has a problem."""
    from monitor.core.errors import ConfigError
    from monitor.core.objectives import budget_fraction, objectives_of

    try:
        found = objectives_of(path)
    except ConfigError as exc:
        for line in exc.lines():
            err.print(line, markup=False, highlight=False)
        raise typer.Exit(2) from None
    table = Table("name", "group", "cluster", "lag", "target", "window", "budget")
    for o in found:
        budget = budget_fraction(o.target) * o.window_days * 1440
        table.add_row(
            o.name, o.group, o.cluster, f"{o.lag_seconds:g} s", f"{o.target:g} %", f"{o.window_days} d",
            f"{budget:.0f} bad minutes",
        )  # fmt: skip
    out.print(table)
    out.print(f"OK ({len(found)} objective(s))", highlight=False)


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


EXPORT_FORMATS = ("prometheus",)


@app.command("export")
def export(
    format_: Annotated[
        str, typer.Option("--format", help=f"The rule file format: {', '.join(EXPORT_FORMATS)}.")
    ],
    rules_dir: Annotated[
        Path | None,
        typer.Option(
            "--rules-dir",
            help="The rule files to export, as `evaluate.rules_dir` names them; default: the shipped pack.",
        ),
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write here; default: standard output.")
    ] = None,
    max_for: Annotated[
        str | None,
        typer.Option(
            "--max-for",
            help="Cap every rule's `for:` at this duration (e.g. 0s, 30s), to try the pack out.",
        ),
    ] = None,
) -> None:
    """The rules as a Prometheus rule file (alerting rules over the series of /metrics).

    Rules that need what /metrics does not serve are listed on stderr (and in the file's header)
    with the reason; the others are written. Exits 2 on a bad argument or a bad rule file.
    """
    from monitor.core.vocabulary import parse_duration
    from monitor.expose.metrics.rules_export.export import export_rules

    if format_ not in EXPORT_FORMATS:
        raise fail(f"unknown --format {format_!r}; use one of: {', '.join(EXPORT_FORMATS)}")
    try:
        cap = None if max_for is None else parse_duration(max_for)
    except ValueError as exc:
        raise fail(f"--max-for: {exc}") from exc
    _check_out(out_file)
    ruleset = _load(_export_paths(rules_dir))
    if not ruleset.ok:
        for problem in ruleset.problems:
            err.print(f"error: {problem}", markup=False, highlight=False)
        raise fail("the rule files have problems; fix them first (`kafka-health rules check`)")
    exported = export_rules([(report.path, report.rules) for report in ruleset.files], max_for=cap)
    for skipped in exported.skipped:
        err.print(skipped.line(), markup=False, highlight=False)
    if out_file is None:
        sys.stdout.write(exported.text())
        return
    write_text(out_file, exported.text())
    err.print(
        f"wrote {len(exported.exported)} rule(s) to {shown_path(out_file)}; "
        f"{len(exported.skipped)} not exported",
        markup=False,
        highlight=False,
    )


def export_prometheus_rules(rules_dir: Path | None, out_file: Path) -> tuple[int, int]:
    """The rules of `rules_dir` (None: the shipped pack) written to `out_file` as Prometheus
    rules; (alerting rules exported, rules not exported). The demo's Prometheus loads them."""
    from monitor.evaluate.rules import load_rules, rule_files
    from monitor.expose.metrics.rules_export.export import export_rules

    ruleset = load_rules(rule_files(rules_dir))
    exported = export_rules([(report.path, report.rules) for report in ruleset.files])
    write_text(out_file, exported.text())
    return len(exported.exported), len(exported.skipped)


def write_text(path: Path, text: str) -> None:
    """`text` into `path`, whole or not at all (written beside it, then renamed)."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise fail(
            f"cannot write {shown_path(path)}: {exc.strerror or exc}; choose a writable --out"
        ) from exc


def _export_paths(rules_dir: Path | None) -> list[Path] | None:
    """The rule files of `--rules-dir` (None: the shipped pack); a bad directory is an error."""
    if rules_dir is None:
        return None
    if not rules_dir.is_dir():
        raise fail(
            f"--rules-dir {shown_path(rules_dir)} is not a directory; "
            "give the directory of your *.yaml rule files"
        )
    from monitor.evaluate.rules import rule_files

    found = rule_files(rules_dir)
    if not found:
        raise fail(f"--rules-dir {shown_path(rules_dir)} holds no *.yaml rule file")
    return found


def _check_out(out_file: Path | None) -> None:
    if out_file is None:
        return
    if out_file.is_dir():
        raise fail(
            f"--out {shown_path(out_file)} is a directory; give a file name, "
            f"e.g. {shown_path(out_file / 'kafka-health.rules.yaml')}"
        )
    if not out_file.parent.is_dir():
        raise fail(
            f"--out {shown_path(out_file)}: the directory {shown_path(out_file.parent)} does not exist; "
            "create it first"
        )
