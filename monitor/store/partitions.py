"""Daily RANGE partitions of the sample tables: created ahead of time, dropped past retention.

A partition of table ``t`` for day ``D`` (UTC) is named ``t_pYYYYMMDD`` and holds
``D 00:00 UTC <= time < D+1 00:00 UTC``. There is no default partition: a row for a day without a
partition is refused, and ``monitor.store.ingest`` creates the missing day and retries.

These functions take a connection and never commit its transaction; the caller owns it. Creating and
dropping partitions takes a transaction-scoped advisory lock, so two daemon instances doing
maintenance at once wait for each other instead of failing on a duplicate name.

Creating or dropping a partition locks its parent table against every reader and writer until the
transaction ends. The periodic maintenance (`maintain_partitions`) therefore works one table per
transaction, waiting at most `LOCK_WAIT` for each: a transaction that locked the 24 tables one
after another would deadlock with any reader that holds one of them and then reads another (the
API reads several tables in one transaction), and a long wait would queue every later reader of
that table behind it. A writer that finds a day missing (`ensure_days`) creates it the same way,
table by table in transactions of its own beside its write, and in its write's transaction only
when that is not had in time.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import psycopg
from sqlalchemy import Connection, Engine, TextClause, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from monitor.store.local_settings import setting_statement
from monitor.store.rollups import (
    HOUR,
    RESOLUTIONS,
    ROLLUP_GRACE,
    ROLLUP_HOURS_PER_PASS,
    SOURCES,
    day_hours,
    roll_up_hours,
    rolled_days,
    rolled_hours,
    rollup_table_name,
)
from monitor.store.schema import partitioned_tables

PARTITIONED_TABLES: dict[str, str] = partitioned_tables()
"""Table name -> the time column it is partitioned on."""

_LOCK_KEY = 0x6B68_7061_7274  # an arbitrary constant shared by every instance: "khpart"
LOCK_WAIT = timedelta(seconds=2)
"""How long the maintenance waits for a table's lock before it leaves the table to a later try."""
_LOCK_TRIES = 3
_LOCK_CONFLICTS = (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected)
_SUFFIX = re.compile(r"_p(\d{8})$")


@dataclass(frozen=True)
class MaintenanceResult:
    created: list[str]
    dropped: list[str]
    rolled_up: list[str]
    postponed: list[str]
    """Tables whose partitions wait for the next pass: another transaction held them too long."""


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def day_of(value: datetime) -> date:
    """The UTC day a timestamp falls on (naive values are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).date()


def _check_table(table: str) -> None:
    if table not in PARTITIONED_TABLES:
        known = ", ".join(sorted(PARTITIONED_TABLES))
        raise ValueError(f"{table!r} is not partitioned by day; the partitioned tables are {known}")


def _lock(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def existing_partitions(conn: Connection, table: str) -> list[str]:
    """Names of the partitions currently attached to `table`, sorted."""
    _check_table(table)
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = CAST(:parent AS regclass) ORDER BY c.relname"
        ),
        {"parent": table},
    )
    return [str(name) for name in rows.scalars()]


def _bound(day: date) -> str:
    return datetime.combine(day, time(), tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S+00")


def create_day_partitions(conn: Connection, table: str, days: Iterable[date]) -> list[str]:
    """Create the partitions of `table` for `days` that do not exist yet; return the new names."""
    _check_table(table)
    wanted = sorted(set(days))
    if not wanted:
        return []
    _lock(conn)
    present = set(existing_partitions(conn, table))
    created = []
    for day in wanted:
        name = partition_name(table, day)
        if name in present:
            continue
        # Identifiers come from the fixed table list and a formatted date; bounds are UTC literals.
        conn.execute(
            text(
                f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" '
                f"FOR VALUES FROM ('{_bound(day)}') TO ('{_bound(day + timedelta(days=1))}')"
            )
        )
        created.append(name)
    return created


def ensure_days(conn: Connection, wanted: dict[str, set[date]], *, apart: bool = True) -> None:
    """Create the day partitions `wanted` ({table: days}) that do not exist yet.

    One catalog lookup when they all exist (the usual case); the partition lock is only taken
    when one is missing, so concurrent writers of other clusters are not serialised.

    With `apart` (writers), each table's missing days are created and committed in a transaction
    of its own on another connection (`_create_apart`), so that `conn`'s transaction never holds
    one table's exclusive lock while it waits for another's: a write that created several tables'
    days in its own transaction deadlocked with a reader of two of them, as the maintenance did
    (module docstring). A table not had within LOCK_WAIT (`conn`'s own transaction may be what
    holds it: an earlier write of the same table) is created in `conn`'s transaction, as before.
    """
    names = {partition_name(table, day): (table, day) for table, days in wanted.items() for day in days}
    if not names:
        return
    missing = conn.execute(
        text("SELECT n FROM unnest(CAST(:names AS text[])) AS n WHERE to_regclass(quote_ident(n)) IS NULL"),
        {"names": sorted(names)},
    ).scalars()
    by_table: dict[str, set[date]] = defaultdict(set)
    for name in missing:
        table, day = names[name]
        by_table[table].add(day)
    for table, days in sorted(by_table.items()):
        if not (apart and _create_apart(conn.engine, table, days)):
            create_day_partitions(conn, table, days)


def _lock_wait_statement(wait: timedelta) -> TextClause:
    """The statement that makes the rest of a transaction wait at most `wait` for any lock."""
    return text(setting_statement({"lock_timeout": f"{max(1, int(wait.total_seconds() * 1000))}ms"}))


def _locked_step(
    engine: Engine, waits: TextClause, step: Callable[[Connection, str], list[str]], table: str
) -> list[str] | None:
    """`step` on `table` in a transaction of its own whose lock waits `waits` bounds
    (`_lock_wait_statement`); None, nothing done, when a lock was not had in time or the wait
    ended in a deadlock."""
    try:
        with engine.begin() as conn:
            conn.execute(waits)
            return step(conn, table)
    except OperationalError as exc:
        if not isinstance(exc.orig, _LOCK_CONFLICTS):
            raise
        return None


def _create_apart(engine: Engine, table: str, days: Iterable[date]) -> bool:
    """Create `table`'s `days` in a transaction of its own that waits at most LOCK_WAIT for a lock;
    False when the lock (or a connection of the pool) was not had in time, nothing created."""
    try:
        created = _locked_step(
            engine,
            _lock_wait_statement(LOCK_WAIT),
            lambda conn, name: create_day_partitions(conn, name, days),
            table,
        )
    except PoolTimeoutError:
        return False
    return created is not None


def _kept_days(now: datetime, ahead_days: int) -> list[date]:
    """Yesterday .. today + `ahead_days`: the days the maintenance keeps a partition for."""
    if ahead_days < 0:
        raise ValueError(f"ahead_days must be >= 0, got {ahead_days}")
    today = day_of(now)
    return [today + timedelta(days=offset) for offset in range(-1, ahead_days + 1)]


def ensure_partitions(conn: Connection, now: datetime, ahead_days: int) -> list[str]:
    """Make sure every partitioned table has yesterday .. today + `ahead_days`, in the caller's
    transaction (a new database, tests; the daemon's maintenance goes table by table:
    `maintain_partitions`); return new names.

    Idempotent: existing partitions are left alone.
    """
    days = _kept_days(now, ahead_days)
    created: list[str] = []
    for table in PARTITIONED_TABLES:
        created.extend(create_day_partitions(conn, table, days))
    return created


def partition_days(conn: Connection, table: str) -> list[date]:
    """The days of `table`'s ``<table>_pYYYYMMDD`` partitions, oldest first."""
    days = []
    for name in existing_partitions(conn, table):
        match = _SUFFIX.search(name)
        if match is not None and name == f"{table}{match.group(0)}":
            days.append(datetime.strptime(match.group(1), "%Y%m%d").date())
    return sorted(days)


def _utc(now: datetime) -> datetime:
    return now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)


def drop_expired_partitions(
    conn: Connection,
    now: datetime,
    retention_days: int,
    longer: Mapping[str, int] | None = None,
    tables: Iterable[str] | None = None,
) -> list[str]:
    """Drop the day partitions of `tables` (every partitioned table by default) whose every row
    is older than `retention_days` (or the table's own retention in `longer`: the rollups');
    return their names.

    A partition for day D goes once D + 1 <= now - retention_days, so no sample younger than the
    retention is ever dropped. Tables that are not ``<table>_pYYYYMMDD`` partitions are ignored.
    """
    longer = longer or {}
    for days in (retention_days, *longer.values()):
        if days < 1:
            raise ValueError(f"retention days must be >= 1, got {days}")
    chosen = list(PARTITIONED_TABLES if tables is None else tables)
    for table in chosen:
        _check_table(table)
    _lock(conn)
    dropped = []
    for table in chosen:
        cutoff = _utc(now) - timedelta(days=longer.get(table, retention_days))
        rolled = rolled_days(conn, table) if table in SOURCES else None
        for day in partition_days(conn, table):
            if rolled is not None and day not in rolled:
                continue  # waits for its rollup (a later pass: `due_hours`, `roll_up_hour`)
            if datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC) <= cutoff:
                name = partition_name(table, day)
                conn.execute(text(f'DROP TABLE IF EXISTS "{name}"'))
                dropped.append(name)
    return sorted(dropped)


def due_hours(
    conn: Connection, now: datetime, max_hours: int = ROLLUP_HOURS_PER_PASS
) -> dict[str, list[datetime]]:
    """Raw table -> its oldest complete hours not rolled up yet, at most `max_hours` of each. A
    raw day is not dropped before its 24 hours are rolled up, so a backlog (days kept before
    rollups existed, a daemon that was down) is worked off pass by pass, each pass bounded."""
    if max_hours < 1:
        raise ValueError(f"max_hours must be >= 1, got {max_hours}")
    due: dict[str, list[datetime]] = {}
    for source in SOURCES:
        marked = rolled_hours(conn, source)
        due[source] = [
            hour
            for day in partition_days(conn, source)
            for hour in day_hours(day)
            if hour not in marked and hour + HOUR + ROLLUP_GRACE <= _utc(now)
        ][:max_hours]
    return due


def roll_up_hour(conn: Connection, source: str, hour: datetime, now: datetime) -> bool:
    """Roll up one hour of `source` under the partition lock (each hour once: another instance
    may have rolled it up since it was found due); whether this call did. The rollup tables' day
    is created first, beside this transaction (`ensure_days`), not while it reads the raw table."""
    ensure_days(conn, {rollup_table_name(source, resolution): {hour.date()} for resolution in RESOLUTIONS})
    _lock(conn)
    if hour in rolled_hours(conn, source, since=hour):
        return False
    roll_up_hours(conn, source, [hour], now)
    return True


def _per_table(
    engine: Engine, step: Callable[[Connection, str], list[str]], lock_wait: timedelta
) -> tuple[list[str], list[str]]:
    """Run `step` on each partitioned table in a transaction of its own that waits at most
    `lock_wait` for a lock; a table that is not had in time is tried again after the others, up
    to `_LOCK_TRIES` times. Returns (what the steps returned, the tables given up on)."""
    waits = _lock_wait_statement(lock_wait)
    done: list[str] = []
    waiting = list(PARTITIONED_TABLES)
    for _ in range(_LOCK_TRIES):
        busy = []
        for table in waiting:
            result = _locked_step(engine, waits, step, table)
            if result is None:
                busy.append(table)
            else:
                done.extend(result)
        waiting = busy
        if not waiting:
            break
    return done, waiting


def maintain_partitions(
    engine: Engine,
    now: datetime,
    *,
    ahead_days: int,
    retention_days: int,
    longer: Mapping[str, int] | None = None,
    lock_wait: timedelta = LOCK_WAIT,
) -> MaintenanceResult:
    """The periodic maintenance step: create the coming days, roll up the complete hours, then
    drop the expired days (a raw day is rolled up before it can be dropped). Each table's
    creations and drops, and each hour rolled up, is a transaction of its own: at a million
    group-partitions an hour is most of an hour of PostgreSQL's work, and one transaction for the
    pass would hold the partition lock and keep every table's dead rows from being vacuumed that
    long; a transaction over several tables' locks deadlocks with readers (module docstring).
    A table whose lock is not had within `lock_wait` (three tries) is `postponed`: its coming
    days are days ahead, its expired days wait an hour more."""
    days = _kept_days(now, ahead_days)
    created, late = _per_table(
        engine, lambda conn, table: create_day_partitions(conn, table, days), lock_wait
    )
    with engine.begin() as conn:
        due = due_hours(conn, now)
    rolled: dict[tuple[str, date], list[datetime]] = {}
    for source, hours in due.items():
        for hour in hours:
            with engine.begin() as conn:
                if roll_up_hour(conn, source, hour, now):
                    rolled.setdefault((source, hour.date()), []).append(hour)
    dropped, stale = _per_table(
        engine,
        lambda conn, table: drop_expired_partitions(conn, now, retention_days, longer, [table]),
        lock_wait,
    )
    rolled_up = [
        f"{source} {day.isoformat()} {hours[0]:%H}:00-{hours[-1] + HOUR:%H}:00"
        for (source, day), hours in sorted(rolled.items())
    ]
    return MaintenanceResult(
        created=created,
        dropped=sorted(dropped),
        rolled_up=rolled_up,
        postponed=sorted(set(late) | set(stale)),
    )
