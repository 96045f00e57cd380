"""Engines and sessions, with connection failures translated to StoreUnavailableError.

The messages name the server with the password masked; a password never reaches a log line.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker

from monitor.core.errors import StoreUnavailableError

DRIVER = "postgresql+psycopg"


def json_loads(data: str | bytes | bytearray | memoryview) -> Any:
    """How the engines read json and jsonb values: with orjson, three to four times as fast as
    `json.loads` on the short label objects that an alert cycle reads by the ten thousand. Anything
    orjson refuses is read by `json.loads`. (orjson reads an integer beyond 64 bits as a float: the
    monitor stores none, its offsets and counts being 64-bit.)"""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)


def json_dumps(value: Any) -> bytes:
    """How values are written as json and jsonb where the write is bulk (a binary COPY): with
    orjson, compact UTF-8. What orjson refuses (a key that is not a string, an integer beyond 64
    bits) is written by `json.dumps`."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def normalize_url(url: str) -> str:
    """`url` with the psycopg 3 driver: plain ``postgresql://`` and ``postgres://`` URLs (the form
    DATABASE_URL usually takes) would otherwise select a driver that is not installed."""
    parsed = _parse(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername=DRIVER)
    return parsed.render_as_string(hide_password=False)


def mask_url(url: str | URL) -> str:
    """`url` as text with its password replaced by ``***``: safe to print and log."""
    parsed = url if isinstance(url, URL) else _parse(url)
    return parsed.render_as_string(hide_password=True)


def _parse(url: str) -> URL:
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    try:
        return make_url(url)
    except ArgumentError as exc:
        # The text may hold a password: never repeat it.
        raise StoreUnavailableError(
            "the database URL is not a valid SQLAlchemy URL; expected "
            "postgresql+psycopg://user:password@host:5432/dbname"
        ) from exc


def _reason(exc: BaseException | None, password: str | None) -> str:
    lines = [line.strip() for line in str(exc or "").splitlines() if line.strip()]
    reason = lines[0] if lines else type(exc).__name__
    if password:
        reason = reason.replace(password, "***")
    return reason


def unavailable(url: str | URL, exc: BaseException | None) -> StoreUnavailableError:
    """The error to raise when PostgreSQL at `url` cannot be used because of `exc`."""
    parsed = url if isinstance(url, URL) else _parse(url)
    return StoreUnavailableError(
        f"PostgreSQL at {mask_url(parsed)} is unavailable: {_reason(exc, parsed.password)}. "
        "Check that the server is running (kafka-health db up, for the local one) and that "
        "database.url / DATABASE_URL is right."
    )


def make_engine(url: str, *, check: bool = True, connect_timeout: int = 5, **kwargs: Any) -> Engine:
    """An engine on `url` (pool_pre_ping on), checked by one connection unless `check` is False.

    Raises StoreUnavailableError, with the URL masked, when the server cannot be reached then or
    when a connection cannot be opened later on.
    """
    parsed = _parse(normalize_url(url))
    connect_args = {"connect_timeout": connect_timeout, **kwargs.pop("connect_args", {})}
    kwargs.setdefault("json_deserializer", json_loads)
    engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args, **kwargs)

    @event.listens_for(engine, "handle_error")
    def _translate(context: ExceptionContext) -> None:
        if context.is_pre_ping:
            return
        if context.connection is None or context.is_disconnect:
            raise unavailable(parsed, context.original_exception) from context.sqlalchemy_exception

    if check:
        try:
            with engine.connect():
                pass
        except StoreUnavailableError:
            engine.dispose()
            raise
    return engine


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions on `engine` that keep loaded attributes after commit (expire_on_commit off)."""
    return sessionmaker(bind=engine, expire_on_commit=False)
