"""The evaluation's windowed reads, as PostgreSQL plans them: the window's bounds come from the
clock (a subquery the planner cannot see into), so without the reads' session settings
(`extract.WINDOW_SCAN`) it walks the time-first key row by row; with them the window is read as a
bitmap, and the rows are the same."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, Engine, text

from monitor.evaluate import extract
from monitor.store.evaluation import set_clock
from monitor.store.partitions import create_day_partitions, day_of

NOW = datetime(2031, 3, 1, 12, 0, tzinfo=UTC)
PLAN = "a" * 32
GROUPS, PARTITIONS, SAMPLES = 60, 250, 4
WINDOW = timedelta(minutes=15)


@pytest.fixture(scope="module")
def window(engine: Engine) -> Engine:
    """SAMPLES offsets cycles of GROUPS x PARTITIONS group-partitions in the window, written in
    another order than the key's (as cycles interleave with other writes), and the latest rows."""
    with engine.begin() as conn:
        create_day_partitions(conn, "group_offsets", [day_of(NOW)])
        keys = (
            "FROM generate_series(0, :p - 1) AS p, generate_series(0, :g - 1) AS g,"
            " generate_series(0, :s - 1) AS s"
        )
        at = ":now - make_interval(secs => 180 * s)"
        conn.execute(
            text(
                "INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at,"
                f" committed_offset, lag) SELECT 'c', 'group-' || g, 'topic', p, {at}, 1000 - s, s {keys}"
                " ORDER BY p, g, s"
            ),
            {"p": PARTITIONS, "g": GROUPS, "s": SAMPLES, "now": NOW},
        )
        conn.execute(
            text(
                "INSERT INTO latest_group_offsets (cluster, group_id, topic, partition, sampled_at,"
                " committed_offset, lag)"
                " SELECT cluster, group_id, topic, partition, sampled_at, committed_offset, lag"
                " FROM group_offsets WHERE cluster = 'c' AND sampled_at = :now"
            ),
            {"now": NOW},
        )
        set_clock(conn, PLAN, NOW)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE group_offsets, latest_group_offsets"))
    return engine


@pytest.fixture
def conn(window: Engine) -> Iterator[Connection]:
    with window.connect() as connection:
        yield connection
        connection.rollback()
        connection.execute(text("RESET ALL"))  # the settings are the session's: not for the pool
        connection.commit()


def _read(conn: Connection, table: str, part: int = 0) -> tuple[str, list[tuple[object, ...]]]:
    """The plan and the rows of the input `table`'s read, in slice `part` of two."""
    sql = f"SELECT * FROM {extract.query(table, ['c'], WINDOW, PLAN)} WHERE {extract.slices(2)[part]}"
    plan = "\n".join(str(row[0]) for row in conn.execute(text("EXPLAIN " + sql)))
    return plan, sorted(tuple(row) for row in conn.execute(text(sql)))


@pytest.mark.parametrize(
    ("table", "without", "rows"),
    [
        ("group_offsets", "Index Scan using", GROUPS * PARTITIONS * SAMPLES),
    ],
)
def test_a_windowed_read_reads_the_window_in_page_order_and_the_same_rows(
    conn: Connection, table: str, without: str, rows: int
) -> None:
    plain_plan, plain_rows = _read(conn, table)
    assert without in plain_plan, f"the planner's guess this read works around:\n{plain_plan}"

    statement = extract.session_statement(table)
    assert statement is not None
    conn.execute(text(statement))
    plan, read = _read(conn, table)

    assert "Index Scan using" not in plan and "Nested Loop" not in plan, plan
    assert "Bitmap Index Scan" in plan, plan
    assert read == plain_rows
    assert len(read) + len(_read(conn, table, 1)[1]) == rows  # the two slices hold every row


def test_an_input_read_whole_runs_without_a_session_statement() -> None:
    assert extract.session_statement("latest_group_offsets") is None
    assert extract.session_statement("latest_commits") is None, "a key's newest commit: no window"
    assert extract.session_statement("partitions") is None
    assert extract.session_statement("partition_offsets") == extract.WINDOW_SCAN
