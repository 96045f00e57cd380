"""Alembic environment for kafka-health.

The database URL, first found wins: a connection or URL passed in by ``monitor.store.migrate``
(``config.attributes``), ``alembic -x url=...``, ``database.url`` from the settings (which includes
DATABASE_URL), then the project-local PostgreSQL started by ``kafka-health db up``.
"""

from __future__ import annotations

import re
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import Connection

from monitor.core.settings import load_settings
from monitor.store.engine import make_engine, normalize_url
from monitor.store.schema import metadata

config = context.config
target_metadata = metadata

# Day partitions are created at run time by monitor.store.partitions, not by migrations.
_DAY_PARTITION = re.compile(r"_p\d{8}$")

if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    return not (type_ == "table" and name is not None and _DAY_PARTITION.search(name))


def database_url() -> str:
    explicit = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    if explicit:
        return normalize_url(str(explicit))
    database = load_settings().database
    if database.url is not None:
        return normalize_url(database.url.get_secret_value())
    return f"postgresql+psycopg://kafka_health@127.0.0.1:{database.local_port}/kafka_health"


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=include_name,
        compare_type=True,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        include_name=include_name,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = database_url()
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _configure(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
