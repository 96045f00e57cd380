"""Commands imported when they run: `kafka-health --help` lists each by the name and help text
given here, and only the command that runs imports its module (and what that module needs:
SQLAlchemy, the Kafka clients, the web layer), so that the command line, and the daemon above
all, do not load every command's dependencies before doing anything."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click as click  # the click that Typer bundles, whose classes its groups use
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Deferred:
    """A command of module `module`: its Typer app `attribute` (a command group), or a function
    `attribute(app)` that registers it on a Typer app (a root command). `help` is what the
    listing shows: the first paragraph of the command's own help (a unit test compares them)."""

    name: str
    module: str
    help: str
    attribute: str = "app"
    first: bool = False
    """Listed before the root commands defined in `monitor.cli.main` (else after them)."""

    def load(self) -> click.Command:
        found = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(found, typer.Typer):
            command: click.Command = typer.main.get_group(found)
        else:
            holder = typer.Typer()
            found(holder)
            command = typer.main.get_group(holder).commands[self.name]
        command.name = self.name
        return command


class _Listed(TyperCommand):
    """A deferred command as the listing shows it; never run (`LazyGroup.resolve_command`)."""

    def __init__(self, deferred: Deferred) -> None:
        super().__init__(deferred.name, help=deferred.help)
        self.deferred = deferred


class LazyGroup(TyperGroup):
    """A Typer group with `deferred` commands beside its own: listed from the table, imported
    when one is resolved to run (also for its own `--help` and for shell completion)."""

    deferred: tuple[Deferred, ...] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        listed: dict[str, click.Command] = {d.name: _Listed(d) for d in self.deferred}
        first = {d.name: listed[d.name] for d in self.deferred if d.first}
        self.commands = {**first, **self.commands, **listed}

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Listed):
            command = self.commands[command.name or ""] = command.deferred.load()
        return name, command, rest
