"""`kafka-health retention ...`: the retention button on the command line.

Whoever can run this command can reach the database, so the command line trusts `--as` and
`--team` like `alerts ack --by`; the web UI and API, reachable by anyone, authenticate instead.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from monitor.act import ledger
from monitor.act.model import display_state, request_json
from monitor.act.policy import default_policy_path, load_policy, parse_duration_ms, parse_size
from monitor.act.request import Request
from monitor.act.service import RetentionService
from monitor.act.tokens import create_token, list_tokens, revoke_token
from monitor.cli.common import (
    AsOption,
    ConfigOption,
    TeamOption,
    acting,
    err,
    id_argument,
    open_engine,
    out,
    run_or_exit,
    settings_from,
)
from monitor.core.formatting import printable, printable_markup
from monitor.core.user_input import is_digits, whole_number

app = typer.Typer(
    help="The retention button: raise, review, revert and extend retention.", no_args_is_help=True
)
policy_app = typer.Typer(help="The retention policy file.", no_args_is_help=True)
token_app = typer.Typer(help="API tokens for scripts (stored hashed).", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
app.add_typer(token_app, name="token")


@contextmanager
def _service(config: Path | None) -> Iterator[RetentionService]:
    """The service against the configured database (database.url, else the local one)."""
    from monitor.act.stage import build_service
    from monitor.core.clock import SystemClock

    settings = settings_from(config)
    engine = run_or_exit(lambda: open_engine(settings))
    service = build_service(settings, lambda: engine, SystemClock())
    try:
        run_or_exit(service.start)
        yield service
    finally:
        service.stop()
        engine.dispose()


def _print(request: Request) -> None:
    view = request_json(request)
    out.print(
        printable(
            f"request {view['id']}: {view['display_state']} ({view['tier']}) "
            f"{view['cluster']}/{view['topic']}: {view['change']}"
            + (f", expires {view['expires_at']}" if view["expires_at"] else "")
        ),
        highlight=False,
        markup=False,
    )
    if view.get("last_error"):
        out.print(f"  last error: {printable(view['last_error'])}", highlight=False, markup=False)


@policy_app.command("check")
def policy_check(
    file: Annotated[Path | None, typer.Argument(help="Default: the shipped policy.")] = None,
) -> None:
    """Validate the policy file without starting anything."""
    path = file or default_policy_path()
    policy = run_or_exit(lambda: load_policy(path))
    out.print(
        f"{path}: OK (instant up to {policy.instant.max_multiple:g} x for "
        f"{policy.instant.max_duration_ms // 3_600_000} h; reviewers: {', '.join(policy.reviewers)})",
        highlight=False,
    )


RequestId = Annotated[int, id_argument("request id")]


def _number_or(value: str, option: str, parse: Callable[[str], int]) -> int:
    """`value` as a number of milliseconds or bytes when it is ASCII digits, else as `parse`
    reads it (2d, 50GiB); a bad value raises ValueError naming `option`."""
    if is_digits(value):
        return whole_number(value, option, low=1)
    try:
        return parse(value)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from exc


@app.command("raise")
def raise_(
    cluster: Annotated[str, typer.Argument()],
    topic: Annotated[str, typer.Argument()],
    for_: Annotated[str, typer.Option("--for", help="How long before it reverts: 12h, 2d ...")],
    reason: Annotated[str, typer.Option("--reason", "-m", help="What is lagging, and why.")],
    ms: Annotated[str | None, typer.Option("--retention-ms", help="New retention.ms: ms or 2d, 36h.")] = None,
    size: Annotated[
        str | None, typer.Option("--retention-bytes", help="New retention.bytes: 50GiB ...")
    ] = None,
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Ask for a raise of a topic's retention (applied at once within the instant tier)."""
    new: dict[str, int] = {}
    if ms is not None:
        new["retention.ms"] = run_or_exit(lambda: _number_or(ms, "--retention-ms", parse_duration_ms))
    if size is not None:
        new["retention.bytes"] = run_or_exit(lambda: _number_or(size, "--retention-bytes", parse_size))
    duration = run_or_exit(lambda: parse_duration_ms(for_))
    with _service(config) as service:
        _print(
            run_or_exit(
                lambda: service.raise_retention(
                    acting(user, team, config), cluster, topic, new, duration, reason
                )
            )
        )


@app.command("approve")
def approve(
    request_id: RequestId,
    comment: Annotated[str, typer.Option("--comment", "-m")] = "",
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Approve a waiting request, an instant raise's review, or an extension (a reviewer)."""
    with _service(config) as service:
        _print(run_or_exit(lambda: service.approve(acting(user, team, config), request_id, comment)))


@app.command("reject")
def reject(
    request_id: RequestId,
    reason: Annotated[str, typer.Option("--reason", "-m")],
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Reject a request or extension, roll back an instant raise, or withdraw your own request."""
    with _service(config) as service:
        _print(run_or_exit(lambda: service.reject(acting(user, team, config), request_id, reason)))


@app.command("revert")
def revert(
    request_id: RequestId,
    reason: Annotated[str, typer.Option("--reason", "-m")] = "reverted by hand",
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Restore the old values now."""
    with _service(config) as service:
        _print(run_or_exit(lambda: service.revert(acting(user, team, config), request_id, reason)))


@app.command("extend")
def extend(
    request_id: RequestId,
    for_: Annotated[str, typer.Option("--for", help="How much longer: 12h, 1d ...")],
    reason: Annotated[str, typer.Option("--reason", "-m")],
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Ask for more time; a reviewer approves it."""
    duration = run_or_exit(lambda: parse_duration_ms(for_))
    with _service(config) as service:
        _print(run_or_exit(lambda: service.extend(acting(user, team, config), request_id, duration, reason)))


@app.command("list")
def list_(
    cluster: Annotated[str | None, typer.Option()] = None,
    topic: Annotated[str | None, typer.Option()] = None,
    state: Annotated[str | None, typer.Option()] = None,
    config: ConfigOption = None,
) -> None:
    """Requests, newest first."""
    with _service(config) as service, service.engine().connect() as conn:
        rows = ledger.list_requests(conn, cluster=cluster, topic=topic, states=[state] if state else None)
    table = Table("id", "state", "cluster", "topic", "change", "by", "expires")
    for row in rows:
        view = request_json(row)
        table.add_row(
            str(row.id),
            display_state(row),
            *map(printable_markup, (row.cluster, row.topic, view["change"], row.requested_by)),
            view["expires_at"] or "-",
        )
    out.print(table)


@app.command("show")
def show(
    request_id: RequestId,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    config: ConfigOption = None,
) -> None:
    """One request with its audit trail."""
    with _service(config) as service, service.engine().connect() as conn:
        row = ledger.get(conn, request_id)
        audit = ledger.audit_of(conn, request_id)
    if row is None:
        err.print(f"no retention request {request_id}")
        raise typer.Exit(1)
    if as_json:
        out.print_json(json.dumps({**request_json(row), "audit": audit}, default=str))
        return
    _print(row)
    for entry in audit:
        detail = entry["detail"] or entry["reason"] or ""
        commit = f" commit {entry['commit_id'][:10]}" if entry["commit_id"] else ""
        out.print(
            f"  {entry['at']:%Y-%m-%d %H:%M:%S} {printable(entry['actor'])}: {entry['action']}{commit} "
            f"{printable(detail)}",
            highlight=False,
            markup=False,
        )


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="What uses the token (e.g. ci-payments).")],
    user: Annotated[str, typer.Option("--user", help="Who the token acts as.")],
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Create a token; it is printed once and stored only as a hash."""
    with _service(config) as service, service.engine().begin() as conn:
        token = create_token(
            conn,
            name=name,
            user=user,
            teams=team or [],
            created_by=getpass.getuser(),
            now=service.clock.now(),
        )
    out.print(token, highlight=False, markup=False)


@token_app.command("revoke")
def token_revoke(name: str, config: ConfigOption = None) -> None:
    """Revoke every live token of that name."""
    with _service(config) as service, service.engine().begin() as conn:
        count = revoke_token(conn, name, service.clock.now())
    out.print(f"revoked {count} token(s)")


@token_app.command("list")
def token_list(config: ConfigOption = None) -> None:
    """Tokens (never their values)."""
    with _service(config) as service, service.engine().connect() as conn:
        rows = list_tokens(conn)
    table = Table("name", "user", "teams", "created", "revoked")
    for row in rows:
        table.add_row(
            printable_markup(row["name"]),
            printable_markup(row["user_name"]),
            printable_markup(", ".join(row["teams"])),  # type: ignore[arg-type]
            f"{row['created_at']:%Y-%m-%d}",
            str(row["revoked_at"] or "-"),
        )
    out.print(table)


__all__ = ["RetentionService", "app"]
