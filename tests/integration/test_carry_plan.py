"""The carry decision (`carry.CARRIED`) as PostgreSQL plans it where the tables it reads have no
statistics, as the partitions an evaluation has just written have none: guessed a row or two each,
its grouped CTEs are joined in nested loops, which at 100,000 group-partitions of a still fleet took
235 s instead of 4.3 s (a merge join on the cluster alone did the like to a copy of the carried
rows). `choose_carried` runs it, and `carry_rows` its copies, with nested loops, merge joins and
sorts off (`carry.CARRY_PLANNER`), and each leaves the settings as it found them for the rest of the
transaction."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, Engine, event, text

from monitor.store import carry
from monitor.store.partitions import PARTITIONED_TABLES, create_day_partitions, day_of

NOW = datetime(2031, 3, 1, 12, 0, 30, tzinfo=UTC)
WINDOW = timedelta(minutes=15)


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    with engine.begin() as setup:
        for table in PARTITIONED_TABLES:
            create_day_partitions(setup, table, [day_of(NOW)])
    with engine.connect() as connection:
        # None of the tables has statistics (a new deployment's, or a day's first partitions).
        connection.execute(text("DELETE FROM pg_statistic"))
        yield connection
        connection.rollback()


def _plan(conn: Connection) -> str:
    values = {
        "plan_id": "a" * 32, "clusters": ["c"], "previous": NOW - timedelta(seconds=30), "now": NOW,
        "since": NOW - timedelta(seconds=30) - WINDOW, "window": WINDOW, "stale_after": timedelta(minutes=5),
        "quiet_commits": carry.QUIET_COMMITS, "separator": "/", "offsets_job": "offsets",
        "reached": ["ok", "partial"], "group_entities": list(carry.GROUP_ENTITIES),
        "was_clusters": ["c"], "was_groups": ["g"],
    }  # fmt: skip
    return "\n".join(str(row[0]) for row in conn.execute(text(f"EXPLAIN {carry.CARRIED.text}"), values))


def test_without_statistics_the_carry_decision_joins_by_hash(conn: Connection) -> None:
    plain = _plan(conn)
    assert "Nested Loop" in plain, f"the planner's guess the setting works around:\n{plain}"

    conn.execute(text(carry.CARRY_PLANNER))

    planned = _plan(conn)
    assert "Nested Loop" not in planned and "Merge Join" not in planned, planned
    assert "Hash Join" in planned, planned


def test_the_carry_runs_under_its_setting_and_restores_the_one_it_found(
    conn: Connection, engine: Engine
) -> None:
    for name in carry.PLANNER_SETTINGS:
        conn.execute(text(f"SET LOCAL {name} = on"))
    statements: list[str] = []

    def before(connection: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    previous = NOW - timedelta(seconds=30)
    event.listen(engine, "before_cursor_execute", before)
    try:
        carried = carry.choose_carried(
            conn, "a" * 32, ["c"], previous, NOW, WINDOW,
            stale_after=timedelta(minutes=5), separator="/", offsets_job="offsets", reached=["ok", "partial"],
        )  # fmt: skip
        copied = carry.carry_rows(conn, "a" * 32, previous, NOW)
    finally:
        event.remove(engine, "before_cursor_execute", before)

    assert carried == 0 and set(copied.values()) == {0}  # an empty store carries nothing
    runs = [
        i
        for i, s in enumerate(statements)
        if "INSERT INTO evaluation_carried" in s or "INSERT INTO derived_" in s
    ]
    assert len(runs) == 1 + len(carry.GROUP_ENTITIES)
    for i in runs:
        assert statements[i - 1] == carry.CARRY_PLANNER, statements[i]
        assert all(f"set_config('{name}'" in statements[i + 1] for name in carry.PLANNER_SETTINGS)
    assert carry.PLANNER_SETTINGS == ("enable_nestloop", "enable_mergejoin", "enable_sort")
    assert all(conn.execute(text(f"SHOW {name}")).scalar_one() == "on" for name in carry.PLANNER_SETTINGS)
