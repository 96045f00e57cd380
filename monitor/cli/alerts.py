"""`kafka-health alerts ...`: what is firing, acknowledge, silence, and the notification outbox.

Each command works on the database the configuration points at (DATABASE_URL, else the local
PostgreSQL, which must be running: `kafka-health db up`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlalchemy import Connection

from monitor.alert import actions
from monitor.alert.notify.outbox import outbox_counts, outbox_rows
from monitor.cli.common import (
    ConfigOption,
    acting,
    fail,
    id_argument,
    number_parser,
    open_engine,
    out,
    settings_from,
)
from monitor.core.clock import SystemClock
from monitor.core.errors import ConfigError, MonitorError
from monitor.core.formatting import printable, printable_markup
from monitor.core.identity import Identity
from monitor.core.settings import Settings, load_settings
from monitor.core.user_input import is_digits, timestamp, whole_number
from monitor.core.vocabulary import OUTBOX_STATES

app = typer.Typer(help="Alerts: list (the default), acknowledge, silence, and the notification outbox.")

AsOption = Annotated[str | None, typer.Option("--as", "--by", help="Who acts (default: your login name).")]
TeamOption = Annotated[list[str] | None, typer.Option("--team", "-t", help="A team you belong to (repeat).")]


@contextmanager
def _connection(config: Path | None) -> Iterator[Connection]:
    try:
        engine = open_engine(load_settings(config))
        with engine.begin() as conn:
            yield conn
    except actions.ActionError as exc:
        raise fail(str(exc)) from exc
    except (ConfigError, MonitorError) as exc:
        raise fail(str(exc)) from exc


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _who(user: str | None, teams: list[str] | None, config: Path | None) -> Identity:
    try:
        return acting(user, teams, config)
    except ValueError as exc:
        raise fail(str(exc)) from exc


@contextmanager
def _action(
    config: Path | None, who: Identity, subject: str, subject_id: int | None, what: str
) -> Iterator[tuple[Connection, Settings]]:
    """A transaction for one alert action by `who`; a refusal is audited, then said."""
    settings = settings_from(config)
    try:
        engine = open_engine(settings)
    except MonitorError as exc:
        raise fail(str(exc)) from exc
    try:
        with actions.audited(engine, who, subject, subject_id, what, SystemClock().now) as conn:
            yield conn, settings
    except actions.ActionError as exc:
        raise fail(f"{exc.code}: {exc}", 1) from exc
    except MonitorError as exc:
        raise fail(str(exc)) from exc
    finally:
        engine.dispose()


def _table(rows: list[dict[str, Any]], columns: list[str], title: str) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if row.get(c) is None else printable_markup(row.get(c)) for c in columns))
    out.print(table)


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")]


@app.callback(invoke_without_command=True)
def default(ctx: typer.Context, as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """`kafka-health alerts` alone lists the open alerts."""
    if ctx.invoked_subcommand is None:
        list_alerts(as_json=as_json, config=config)


@app.command("list")
def list_alerts(as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Open alerts, most severe first (muted ones say by which silence or alert)."""
    with _connection(config) as conn:
        rows = actions.open_alerts(conn)
    if as_json:
        print(json.dumps(rows, default=_plain, indent=2, sort_keys=True))
        return
    _table(rows, ["id", "severity", "state", "rule", "entity_key", "starts_at", "silenced_by",
                  "inhibited_by"],
           f"{len(rows)} open alert(s)")  # fmt: skip


@app.command("incidents")
def incidents(config: ConfigOption = None) -> None:
    """Open notification groups per receiver: when notified, acknowledged, escalated."""
    with _connection(config) as conn:
        rows = actions.open_incidents(conn)
    _table(rows, ["id", "receiver", "severity", "alerts", "first_notified_at", "acknowledged_by",
                  "escalated_to"],
           f"{len(rows)} open incident(s)")  # fmt: skip


@app.command("ack")
def ack(
    incident: Annotated[
        str, typer.Argument(help="An incident id (`alerts incidents`) or an alert fingerprint.")
    ],
    user: AsOption = None,
    team: TeamOption = None,
    comment: Annotated[str, typer.Option("--comment", "-m", help="Why, or what you are doing.")] = "",
    config: ConfigOption = None,
) -> None:
    """Acknowledge an incident: no more repeats, no escalation; the pager is told."""
    who = _who(user, team, config)
    group_id = None
    if is_digits(incident):  # an incident id; anything else is a fingerprint
        try:
            group_id = whole_number(incident, "the incident id", low=1)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    with _action(config, who, "incident", group_id, "acknowledge") as (conn, settings):
        named = {"group_id": group_id} if group_id is not None else {"fingerprint": incident}
        ids = actions.acknowledge(
            conn, who, now=SystemClock().now(), comment=comment,
            platform_teams=settings.web.identity.platform_teams, **named,
        )  # fmt: skip
    out.print(
        f"acknowledged incident(s) {', '.join(map(str, ids))} as {printable(who.user)}",
        highlight=False,
        markup=False,
    )


@app.command("silence")
def silence(
    matchers: Annotated[
        list[str], typer.Argument(help="label=value, label!=value, label=~regex, label!~regex")
    ],
    duration: Annotated[str, typer.Option("--for", help="How long: 30m, 2h, 1d.")] = "2h",
    start: Annotated[
        str | None, typer.Option("--start", help="When it starts, ISO 8601 with offset; default now.")
    ] = None,
    comment: Annotated[str, typer.Option("--comment", "-m", help="Why (required).")] = "",
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Mute the alerts that match every MATCHER for a while."""
    from monitor.alert.config import load_routing, routing_paths
    from monitor.core.vocabulary import parse_duration

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise fail(f"--for: {exc}") from exc
    starts_at = None
    if start is not None:
        try:
            starts_at = timestamp(start, "--start")
        except ValueError as exc:
            raise fail(str(exc)) from exc
    who = _who(user, team, config)
    with _action(config, who, "silence", None, "create silence") as (conn, settings):
        routing = load_routing(*routing_paths(settings.alert))
        max_duration = timedelta(seconds=routing.settings.silence_max_duration)
        if seconds > max_duration.total_seconds():
            raise actions.ActionError(f"a silence may last at most {max_duration}; ask for less")
        silence_id = actions.create_silence(
            conn,
            who,
            matchers=list(matchers),
            comment=comment,
            now=SystemClock().now(),
            duration=timedelta(seconds=seconds),
            max_duration=max_duration,
            platform_teams=settings.web.identity.platform_teams,
            starts_at=starts_at,
            max_per_team=settings.alert.max_silences_per_team,
        )
    out.print(f"silence {silence_id} created for {duration}", highlight=False)


@app.command("silences")
def list_silences(
    all_: Annotated[bool, typer.Option("--all", help="Also the ended and expired ones.")] = False,
    config: ConfigOption = None,
) -> None:
    """Silences with who made them and why."""
    with _connection(config) as conn:
        rows = actions.silences(conn, SystemClock().now(), include_ended=all_)
    for row in rows:
        row["matchers"] = " ".join(row["matchers"])
    _table(rows, ["id", "matchers", "starts_at", "ends_at", "created_by", "comment", "active"],
           f"{len(rows)} silence(s)")  # fmt: skip


@app.command("expire")
def expire(
    silence_id: Annotated[int, id_argument("silence id")],
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """End a silence now (its creator, its team, or the platform role)."""
    who = _who(user, team, config)
    with _action(config, who, "silence", silence_id, "expire silence") as (conn, settings):
        platform = settings.web.identity.platform_teams
        actions.expire_silence(conn, who, silence_id, SystemClock().now(), platform)
    out.print(f"silence {silence_id} expired", highlight=False)


@app.command("outbox")
def outbox(
    state: Annotated[
        str | None,
        typer.Option("--state", help="pending, sending, sent, failed or dropped; default: all."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", parser=number_parser("--limit", 1, 10_000))] = 50,
    config: ConfigOption = None,
) -> None:
    """The newest notifications and how their delivery went (failed ones say why)."""
    if state is not None and state not in OUTBOX_STATES:
        raise fail(f"--state {state!r}: use {', '.join(OUTBOX_STATES)}")
    with _connection(config) as conn:
        rows = outbox_rows(conn, state, limit)
        counts = outbox_counts(conn)
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "empty"
    _table(rows, ["id", "receiver", "kind", "state", "attempts", "created_at", "sent_at", "last_status",
                  "last_error"],
           f"notification outbox ({summary})")  # fmt: skip
