"""`kafka-health db ...`: the project-local PostgreSQL and migrations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from monitor.cli.common import ConfigOption, database_url
from monitor.core.errors import StoreUnavailableError
from monitor.core.settings import Settings, load_settings
from monitor.devtools.paths import var_dir
from monitor.devtools.postgres import LocalPostgres
from monitor.store import migrate
from monitor.store.engine import make_engine, mask_url
from monitor.store.partitions import ensure_partitions

app = typer.Typer(help="Start the local PostgreSQL and migrate the schema.", no_args_is_help=True)


def _say(message: str) -> None:
    typer.echo(message, err=True)


def _local(settings: Settings) -> LocalPostgres:
    return LocalPostgres(var_dir() / "postgres", settings.database.local_port, log=_say)


def _external_url(settings: Settings) -> str | None:
    url = settings.database.url
    return None if url is None else url.get_secret_value()


@app.command()
def up(config: ConfigOption = None) -> None:
    """Start the project-local PostgreSQL on 127.0.0.1.

    The first time, it is initialised under var/postgres; the kafka_health database is created.
    Does nothing when database.url (or DATABASE_URL) is set.
    """
    settings = load_settings(config)
    external = _external_url(settings)
    if external is not None:
        _say(
            f"database.url is set ({mask_url(external)}): nothing to start (the local PostgreSQL is not used)"
        )
        return
    server = _local(settings)
    server.up()
    _say(f"PostgreSQL is up: {server.url()}")


@app.command()
def down(config: ConfigOption = None) -> None:
    """Stop the project-local PostgreSQL (its data stays under var/postgres)."""
    settings = load_settings(config)
    external = _external_url(settings)
    if external is not None:
        _say(
            f"database.url is set ({mask_url(external)}): nothing to stop (the local PostgreSQL is not used)"
        )
        return
    server = _local(settings)
    _say("PostgreSQL stopped" if server.down() else "PostgreSQL was not running")


@app.command()
def status(config: ConfigOption = None) -> None:
    """Say whether the database is up and which migration it is at.

    Exits with status 1 when the database is stopped or unreachable.
    """
    settings = load_settings(config)
    url = database_url(settings)
    if _external_url(settings) is None and not _local(settings).status():
        typer.echo(f"local PostgreSQL: stopped ({_local(settings).home})")
        raise typer.Exit(1)
    try:
        revision = migrate.current(url)
    except StoreUnavailableError as exc:
        typer.echo(f"unreachable: {exc}")
        raise typer.Exit(1) from exc
    head = ", ".join(migrate.heads())
    state = "up to date" if revision == head else f"head is {head}; run `kafka-health db migrate`"
    typer.echo(f"{mask_url(url)}: up; schema at {revision or 'no revision'} ({state})")


@app.command("url")
def url_command(config: ConfigOption = None) -> None:
    """Print the SQLAlchemy URL of the database, with any password masked."""
    settings = load_settings(config)
    typer.echo(mask_url(database_url(settings)))


@app.command("migrate")
def migrate_command(
    config: ConfigOption = None,
    revision: Annotated[str, typer.Option("--revision", "-r", help="Target revision.")] = "head",
) -> None:
    """Upgrade the schema to --revision (default head).

    At head, the sample tables' day partitions are then created, from yesterday to
    database.partitions_ahead_days ahead.
    """
    settings = load_settings(config)
    url = database_url(settings)
    _say(f"migrating {mask_url(url)} to {revision}")
    migrate.upgrade(url, revision)
    at = migrate.current(url)
    if at is not None and at in migrate.heads():
        engine = make_engine(url)
        try:
            with engine.begin() as conn:
                created = ensure_partitions(conn, datetime.now(UTC), settings.database.partitions_ahead_days)
        finally:
            engine.dispose()
        _say(f"created {len(created)} day partition(s)")
    typer.echo(f"schema at {at or 'no revision'}")


@app.command()
def downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. 0001, -1 or base.")],
    config: ConfigOption = None,
) -> None:
    """Downgrade the schema to REVISION (`base` drops every table and its data)."""
    settings = load_settings(config)
    url = database_url(settings)
    _say(f"downgrading {mask_url(url)} to {revision}")
    migrate.downgrade(url, revision)
    typer.echo(f"schema at {migrate.current(url) or 'no revision'}")
