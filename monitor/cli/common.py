"""What every command shares, written once: the consoles, the `--config` option, loading the
settings, the database the configuration points at, who acts (`--as`, `--team`), and how an error
is said (`error: ...` on stderr, exit status 2; 1 for a refusal the command reports itself)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from monitor.core.errors import ConfigError, MonitorError
from monitor.core.formatting import printable
from monitor.core.identity import Identity
from monitor.core.user_input import BIGINT_MAX, whole_number

if TYPE_CHECKING:  # imported where used: the command line starts without them (monitor.cli.lazy)
    from sqlalchemy import Engine

    from monitor.core.settings import Settings

T = TypeVar("T")
WINDOW = timedelta(minutes=1)
"""The moving window of the limit on changes per identity."""

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="monitor.yaml; without it the embedded defaults are used."),
]

AsOption = Annotated[str | None, typer.Option("--as", help="Who acts (default: the login name).")]


def number_parser(what: str, low: int = 1, high: int = BIGINT_MAX) -> Callable[[str], int]:
    """An argument's parser: ASCII digits within [low, high], read by `user_input.whole_number`;
    anything else is a usage error naming `what` (exit status 2, one line: `main.main`)."""

    def parse(value: str) -> int:
        try:
            return whole_number(value, what, low=low, high=high)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc

    return parse


def id_argument(what: str) -> Any:
    """A positional id (a 64-bit database id), e.g. `Annotated[int, id_argument("repair id")]`."""
    return typer.Argument(
        parser=number_parser(what), metavar=what.upper().replace(" ", "_"), show_default=False
    )


TeamOption = Annotated[list[str] | None, typer.Option("--team", "-t", help="A team you belong to (repeat).")]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Say `error: message` on stderr, as written (names in it are data); the exit to raise."""
    err.print(f"error: {message}", markup=False, highlight=False)
    return typer.Exit(code)


def fail_config(exc: ConfigError) -> typer.Exit:
    """Say each problem of an invalid operator file as `error: FILE: line N: ...`, one line each;
    the exit (status 2) to raise."""
    for line in exc.lines():
        err.print(f"error: {line}", markup=False, highlight=False)
    return typer.Exit(2)


def shown_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it, else as given (also when it
    cannot be resolved: a loop of symbolic links is reported by the loader, not here)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError, RuntimeError):
        return str(path)


def settings_from(config: Path | None) -> Settings:
    """The settings of `config` and the environment; an invalid file exits with its problems."""
    from monitor.core.settings import load_settings

    try:
        return load_settings(config)
    except ConfigError as exc:
        raise fail_config(exc) from exc


def database_url(settings: Settings) -> str:
    """database.url (DATABASE_URL) when set, else the project-local server's."""
    from monitor.devtools.database import database_url as configured_or_local

    return configured_or_local(settings)


def open_engine(settings: Settings) -> Engine:
    """An engine on the database the settings name; it connects on first use."""
    from monitor.store.engine import make_engine

    return make_engine(database_url(settings))


def acting(user: str | None, teams: list[str] | None, config: Path | None) -> Identity:
    """Who runs a changing command: `--as` (default: the login name) with the `--team`s given,
    once `admitted`."""
    who = Identity.command_line(user, teams)
    admitted(who, settings_from(config))
    return who


def admitted(who: Identity, settings: Settings) -> None:
    """Refuse a change (exit status 1) when `who` made `web.identity.change_requests_per_minute`
    changes or attempts in the last minute through the command line, as the web answers 429: a
    script in a loop cannot ask without end (a repair request describes the cluster live). The
    count is the audit trail's, so it holds across processes; the web counts its own."""
    from sqlalchemy.exc import SQLAlchemyError

    from monitor.store.audit import recent_entries

    limit = settings.web.identity.change_requests_per_minute
    now = datetime.now(UTC)
    try:
        engine = open_engine(settings)
        try:
            with engine.connect() as conn:
                recent = recent_entries(conn, who.user, "cli", now - WINDOW, limit)
        finally:
            engine.dispose()
    except MonitorError as exc:
        raise fail(str(exc)) from exc
    except SQLAlchemyError as exc:
        raise fail(
            f"cannot count {who.user}'s recent changes in the audit trail ({type(exc).__name__}); "
            "check that the database is up and migrated (kafka-health db migrate)"
        ) from exc
    if len(recent) >= limit:
        wait = max(1, math.ceil((recent[-1] + WINDOW - now).total_seconds()))
        raise fail(
            printable(
                f"rate_limited: {who.user} asked for {limit} changes in the last minute "
                f"(web.identity.change_requests_per_minute); ask again in {wait} s"
            ),
            1,
        )


def run_or_exit(action: Callable[[], T]) -> T:
    """`action()`; a refusal of the act stage (retention or repair) is said with its code, exit
    status 1; any other error of the monitor, or a bad value, is `error: ...`, exit status 2."""
    from monitor.act.model import RetentionError

    try:
        return action()
    except RetentionError as exc:
        err.print(printable(f"{exc.code}: {exc}"), markup=False, highlight=False)
        raise typer.Exit(1) from exc
    except ConfigError as exc:
        raise fail_config(exc) from exc
    except (MonitorError, ValueError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from exc
