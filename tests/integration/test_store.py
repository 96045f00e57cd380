"""The store against a real PostgreSQL: COPY ingest into day partitions, retention, the topic
config history's open-row rule, and connection failures."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from monitor.core.errors import StoreUnavailableError
from monitor.store.engine import make_engine
from monitor.store.ingest import copy_rows
from monitor.store.partitions import (
    create_day_partitions,
    drop_expired_partitions,
    ensure_partitions,
    existing_partitions,
    partition_name,
)

OFFSET_COLUMNS = ["cluster", "topic", "partition", "sampled_at", "start_offset", "end_offset", "run_id"]


def _rows_per_partition(engine: Engine, cluster: str) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT tableoid::regclass::text, count(*) FROM partition_offsets "
                "WHERE cluster = :cluster GROUP BY 1"
            ),
            {"cluster": cluster},
        ).all()
    return {name: count for name, count in rows}


def test_copy_50000_rows_lands_in_day_partitions(engine: Engine) -> None:
    start = datetime(2030, 1, 10, tzinfo=UTC)
    rows: list[tuple[Any, ...]] = [
        ("copy", f"topic-{i % 10}", i % 50, start + timedelta(seconds=5 * i), 0, i, 7) for i in range(50_000)
    ]
    late = start + timedelta(days=20, hours=3)
    rows.append(("copy", "topic-0", 0, late, 0, 1, None))
    expected = Counter(partition_name("partition_offsets", row[3].date()) for row in rows)
    assert len(expected) == 4  # three consecutive days plus the late one

    with engine.begin() as conn:
        # Partitions for 9, 10 and 11 January exist; 12 January and the late day do not.
        ensure_partitions(conn, start, 1)
        before = set(existing_partitions(conn, "partition_offsets"))
        assert partition_name("partition_offsets", late.date()) not in before
        assert copy_rows(conn, "partition_offsets", OFFSET_COLUMNS, iter(rows)) == 50_001

    assert _rows_per_partition(engine, "copy") == dict(expected)
    with engine.connect() as conn:
        after = set(existing_partitions(conn, "partition_offsets"))
        total = conn.execute(text("SELECT count(*) FROM partition_offsets WHERE cluster = 'copy'")).scalar()
    assert after - before == {
        partition_name("partition_offsets", date(2030, 1, 12)),
        partition_name("partition_offsets", late.date()),
    }
    assert total == 50_001


def test_copy_rows_leaves_the_transaction_to_the_caller(engine: Engine) -> None:
    at = datetime(2030, 2, 1, 8, tzinfo=UTC)
    with engine.connect() as conn:
        assert copy_rows(conn, "partition_offsets", OFFSET_COLUMNS, [("rolled", "t", 0, at, 0, 1, None)]) == 1
        assert (
            conn.execute(text("SELECT count(*) FROM partition_offsets WHERE cluster = 'rolled'")).scalar()
            == 1
        )
        conn.rollback()
    assert _rows_per_partition(engine, "rolled") == {}


def test_copy_rows_reports_other_errors_and_keeps_the_transaction_usable(engine: Engine) -> None:
    at = datetime(2030, 2, 2, 8, tzinfo=UTC)
    row = ("dup", "t", 0, at, 0, 1, None)
    with engine.begin() as conn:
        copy_rows(conn, "partition_offsets", OFFSET_COLUMNS, [row])
        with pytest.raises(Exception, match="duplicate key"):
            copy_rows(conn, "partition_offsets", OFFSET_COLUMNS, [row])
        assert (
            conn.execute(text("SELECT count(*) FROM partition_offsets WHERE cluster = 'dup'")).scalar() == 1
        )
    assert _rows_per_partition(engine, "dup") == {partition_name("partition_offsets", at.date()): 1}


BINARY_ROWS: list[tuple[Any, ...]] = [
    ("plain", {"team": "payments"}, datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), 1.5, 7),
    ("tab\there, new\nline", {"k": "back\\slash \\N \\."}, datetime(1970, 1, 1, tzinfo=UTC), None, None),
    ("bidi \u202e emoji 🔥 \x1b[31m", {"é": "zero\u200bwidth", "q": "\"'"}, None, -0.0, -(2**63)),
    ("", {}, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), float("inf"), 2**63 - 1),
]


@pytest.mark.parametrize("row", BINARY_ROWS, ids=range(len(BINARY_ROWS)))
def test_copy_rows_in_binary_writes_each_value_as_its_column_type(
    engine: Engine, row: tuple[Any, ...]
) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "CREATE TEMPORARY TABLE typed (name text, labels jsonb, at timestamptz, value float8,"
                " n bigint, untouched text DEFAULT 'default') ON COMMIT DROP"
            )
        )
        assert copy_rows(conn, "typed", ["name", "labels", "at", "value", "n"], [row], binary=True) == 1
        stored = conn.execute(text("SELECT name, labels, at, value, n, untouched FROM typed")).one()
    assert tuple(stored) == (*row, "default")


def test_copy_rows_in_binary_names_a_column_the_table_lacks(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMPORARY TABLE typed (name text) ON COMMIT DROP"))
        with pytest.raises(ValueError, match="table typed has no column nmae"):
            copy_rows(conn, "typed", ["nmae"], [("x",)], binary=True)


def test_copy_rows_streams_an_iterator_into_a_table_that_is_not_partitioned(engine: Engine) -> None:
    made: list[int] = []

    def rows() -> Iterator[tuple[int, str]]:
        for n in range(1_000):
            made.append(n)
            yield (n, f"row {n}")

    with engine.begin() as conn:
        conn.execute(text("CREATE TEMPORARY TABLE streamed (n integer, label text) ON COMMIT DROP"))
        produced = rows()
        assert made == [], "nothing is made before the COPY asks"
        assert copy_rows(conn, "streamed", ["n", "label"], produced) == 1_000
        assert copy_rows(conn, "streamed", ["n", "label"], iter([])) == 0
        stored = conn.execute(text("SELECT count(*), max(label) FROM streamed")).one()
    assert tuple(stored) == (1_000, "row 999")
    assert len(made) == 1_000


def test_ensure_partitions_is_idempotent(engine: Engine) -> None:
    now = datetime(2030, 3, 5, 23, 59, tzinfo=UTC)
    with engine.begin() as conn:
        created = ensure_partitions(conn, now, 2)
        assert ensure_partitions(conn, now, 2) == []
    assert partition_name("group_offsets", date(2030, 3, 4)) in created
    assert partition_name("commit_observations", date(2030, 3, 7)) in created
    assert partition_name("group_offsets", date(2030, 3, 8)) not in created


def test_drop_expired_partitions_drops_only_old_days(engine: Engine) -> None:
    days = [date(2031, 3, 1) + timedelta(days=n) for n in range(10)]  # 1 .. 10 March
    with engine.begin() as conn:
        create_day_partitions(conn, "partition_offsets", days)
        create_day_partitions(conn, "group_states", days)
        copy_rows(
            conn,
            "partition_offsets",
            OFFSET_COLUMNS,
            [
                ("ret", "t", 0, datetime(day.year, day.month, day.day, 12, tzinfo=UTC), 0, 1, None)
                for day in days
            ],
        )

    now = datetime(2031, 3, 10, 12, tzinfo=UTC)
    with engine.begin() as conn:
        dropped = drop_expired_partitions(conn, now, retention_days=3)
    # The cutoff is 7 March 12:00: days up to 6 March are entirely older; 7 March is not.
    expected_gone = {
        partition_name(table, day)
        for table in ("partition_offsets", "group_states")
        for day in days
        if day <= date(2031, 3, 6)
    }
    assert expected_gone <= set(dropped)
    assert not [name for name in dropped if name.endswith(("20310307", "20310308", "20310309", "20310310"))]

    with engine.connect() as conn:
        remaining = set(existing_partitions(conn, "partition_offsets"))
    assert {partition_name("partition_offsets", day) for day in days[6:]} <= remaining
    assert not expected_gone & remaining
    assert sorted(_rows_per_partition(engine, "ret")) == [
        partition_name("partition_offsets", day) for day in days[6:]
    ]
    with engine.begin() as conn:
        assert drop_expired_partitions(conn, now, retention_days=3) == []


def _open_config(conn: Connection, value: str, valid_to: datetime | None = None) -> None:
    conn.execute(
        text(
            "INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive, valid_from, valid_to) "
            "VALUES ('cfg', 'orders', 'retention.ms', :value, 'DYNAMIC_TOPIC_CONFIG', false, :at, :to)"
        ),
        {"value": value, "at": datetime(2030, 1, 1, tzinfo=UTC), "to": valid_to},
    )


def test_topic_configs_refuse_two_open_rows(engine: Engine) -> None:
    with engine.begin() as conn:
        _open_config(conn, "1000", valid_to=datetime(2030, 1, 2, tzinfo=UTC))
        _open_config(conn, "2000", valid_to=datetime(2030, 1, 3, tzinfo=UTC))
        _open_config(conn, "3000")
    with pytest.raises(IntegrityError, match="uq_topic_configs_open"), engine.begin() as conn:
        _open_config(conn, "4000")
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT value FROM topic_configs WHERE valid_to IS NULL")).scalars().all()
    assert rows == ["3000"]


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_make_engine_on_a_dead_port_raises_without_the_password() -> None:
    secret = "s3cret-Passw0rd"
    url = f"postgresql+psycopg://monitor:{secret}@127.0.0.1:{_dead_port()}/kafka_health"
    with pytest.raises(StoreUnavailableError) as caught:
        make_engine(url, connect_timeout=2)
    message = str(caught.value)
    assert secret not in message
    assert "monitor:***@127.0.0.1" in message
    assert "unavailable" in message


def test_engine_translates_later_connection_failures() -> None:
    secret = "an0ther-secret"
    engine = make_engine(f"postgresql://monitor:{secret}@127.0.0.1:{_dead_port()}/x", check=False)
    try:
        with pytest.raises(StoreUnavailableError) as caught, engine.connect():
            pass
    finally:
        engine.dispose()
    assert secret not in str(caught.value)
