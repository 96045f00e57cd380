"""Reading one group's rows of the newest evaluation costs the same whether the store keeps
two evaluations or hundreds (2,880 a day at the default interval): the derived tables index the
group (or topic) a reader picks by between the cluster and the evaluation (migration 0035).
Before, the primary key (which leads with the group) held the group's rows of every evaluation
kept, and the API's lag of one group slowed down with every evaluation of the day.

Measured as PostgreSQL's buffers touched in the derived table by the readers' own statements
(the API's and the pages' reads, and the SQL view people query), on a real PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, text

from monitor.expose.read import lag as read_lag
from monitor.expose.read.queries import latest_evaluation
from monitor.store.partitions import ensure_partitions

pytestmark = pytest.mark.integration

T0 = datetime(2031, 3, 1, 0, 0, tzinfo=UTC)
INTERVAL = 30
KEPT = 300
"""Evaluations kept in the second measurement: 2.5 hours at the default interval."""
GROUPS = 100
PARTITIONS = 10
TOPIC = "orders"
INDEX_PAGES = 6
"""Pages of an index's descent (its root, inner and leaf pages) in each day partition read."""


def _evaluations(conn: Connection, first: int, last: int) -> None:
    """Evaluations `first`..`last` (inclusive) of cluster `kept`: GROUPS groups reading the
    PARTITIONS partitions of one topic, with the topic's partitions."""
    at = f"CAST(:t0 AS timestamptz) + k * interval '{INTERVAL} seconds'"
    params = {"t0": T0, "first": first, "last": last}
    series = "generate_series(CAST(:first AS int), CAST(:last AS int)) k"
    conn.execute(
        text(f"INSERT INTO derived_cluster (cluster, evaluated_at) SELECT 'kept', {at} FROM {series}"), params
    )
    conn.execute(
        text(
            "INSERT INTO derived_group_partition (cluster, group_id, topic, partition, evaluated_at,"
            " committed_offset, end_offset, offset_lag, status)"
            f" SELECT 'kept', 'g' || g, '{TOPIC}', p, {at}, 100 * k, 100 * k + p, p, 'OK'"
            f" FROM {series}, generate_series(1, {GROUPS}) g, generate_series(0, {PARTITIONS - 1}) p"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO derived_group_topic (cluster, group_id, topic, evaluated_at, offset_lag, status)"
            f" SELECT 'kept', 'g' || g, '{TOPIC}', {at}, 190, 'OK'"
            f" FROM {series}, generate_series(1, {GROUPS}) g"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO derived_group (cluster, group_id, evaluated_at, offset_lag, status)"
            f" SELECT 'kept', 'g' || g, {at}, 190, 'OK' FROM {series}, generate_series(1, {GROUPS}) g"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO derived_partition (cluster, topic, partition, evaluated_at, end_offset)"
            f" SELECT 'kept', '{TOPIC}', p, {at}, 100 * k + p"
            f" FROM {series}, generate_series(0, {PARTITIONS - 1}) p"
        ),
        params,
    )


@pytest.fixture(scope="module")
def kept(engine: Engine) -> Iterator[Engine]:
    with engine.begin() as conn:
        ensure_partitions(conn, T0, ahead_days=1)
        conn.execute(
            text(
                "INSERT INTO clusters (name, bootstrap, first_seen, last_seen)"
                " VALUES ('kept', 'k1:9092', :t, :t)"
            ),
            {"t": T0},
        )
        _evaluations(conn, 0, 1)
        conn.execute(text("ANALYZE"))
    yield engine


def _statements(engine: Engine, read: Callable[[Connection], object]) -> list[tuple[str, Any]]:
    """The statements `read` runs."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        with engine.connect() as conn:
            read(conn)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return seen


def _plan(conn: Connection, statement: str, parameters: Any = None) -> dict[str, Any]:
    """The executed plan of `statement` with its buffers, as PostgreSQL's JSON gives it."""
    explained = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", parameters)
    document = explained.scalar_one()
    plan: dict[str, Any] = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    return plan


def _scans(plan: dict[str, Any], table: str) -> Iterator[dict[str, Any]]:
    """The nodes of `plan` that scan `table` (its day partitions)."""
    if re.fullmatch(rf"{table}_p\d{{8}}", str(plan.get("Relation Name", ""))):
        yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child, table)


def _buffers(plan: dict[str, Any], table: str) -> int:
    """Shared buffers the scans of `table` in `plan` touched."""
    return sum(
        int(n.get("Shared Hit Blocks", 0)) + int(n.get("Shared Read Blocks", 0)) for n in _scans(plan, table)
    )


def _rows(plan: dict[str, Any], table: str) -> int:
    """Rows the scans of `table` in `plan` returned, over every loop."""
    return sum(int(n.get("Actual Rows", 0)) * int(n.get("Actual Loops", 1)) for n in _scans(plan, table))


def _cost(engine: Engine, read: Callable[[Connection], object], table: str, mention: str) -> int:
    """Buffers of `table` touched by the statements of `read` that name `mention` (the table
    or a view of it)."""
    total = 0
    statements = [(s, p) for s, p in _statements(engine, read) if mention in s]
    assert statements, f"the read does not read {mention}"
    with engine.connect() as conn:
        for statement, parameters in statements:
            total += _buffers(_plan(conn, statement, parameters), table)
    return total


def _group_partitions(conn: Connection) -> object:
    listing = read_lag.group_partitions(conn, "kept", "g42")
    assert listing.total == PARTITIONS
    return listing


def _group(conn: Connection) -> object:
    found = read_lag.group(conn, "kept", "g42")
    assert found is not None and [t.topic for t in found.topics] == [TOPIC]
    return found


def _view(conn: Connection) -> object:
    rows = conn.execute(
        text("SELECT * FROM group_partition_lag WHERE cluster = 'kept' AND group_id = 'g42'")
    ).all()
    assert len(rows) == PARTITIONS
    return rows


READS: dict[str, tuple[Callable[[Connection], object], str, str, int]] = {
    "the API's lag of one group": (
        _group_partitions,
        "derived_group_partition",
        "derived_group_partition",
        PARTITIONS,
    ),
    "one group's summary": (_group, "derived_group", "FROM derived_group d ", 1),
    "one group's topics": (_group, "derived_group_topic", "derived_group_topic", 1),
    "the view group_partition_lag, one group": (
        _view,
        "derived_group_partition",
        "group_partition_lag",
        PARTITIONS,
    ),
}
"""What each read costs: the read, the table it reads, what its statements name (the table or a
view of it), and how many of the table's rows it asks for."""


def test_one_groups_newest_rows_cost_the_same_with_hundreds_of_evaluations_kept(kept: Engine) -> None:
    before = {name: _cost(kept, *read[:3]) for name, read in READS.items()}
    with kept.begin() as conn:
        _evaluations(conn, 2, KEPT - 1)
        conn.execute(text("ANALYZE"))
    newest = T0 + timedelta(seconds=INTERVAL * (KEPT - 1))
    with kept.connect() as conn:
        assert latest_evaluation(conn, "kept") == newest
    after = {name: _cost(kept, *read[:3]) for name, read in READS.items()}
    for name, (*_, rows) in READS.items():
        # The index's descent and at most a page per row asked for; the group's rows of every
        # kept evaluation (300 x 10), or the newest evaluation's rows of every group (100 x 10),
        # are dozens of pages or more.
        assert after[name] <= max(before[name], rows) + INDEX_PAGES, (name, before[name], after[name])


def test_the_newest_evaluation_of_a_cluster_is_found_without_reading_the_ones_before(engine: Engine) -> None:
    """`latest_evaluations`, which every read of "now" joins, reads a row per cluster and day
    partition, not every evaluation the raw days keep (20,160 a cluster in 7 days)."""
    start = T0 + timedelta(days=10)
    clusters = ("heads-a", "heads-b", "heads-c")
    with engine.begin() as conn:
        ensure_partitions(conn, start, ahead_days=1)
        conn.execute(
            text(
                "INSERT INTO derived_cluster (cluster, evaluated_at)"
                f" SELECT c, CAST(:start AS timestamptz) + k * interval '{INTERVAL} seconds'"
                " FROM unnest(CAST(:clusters AS text[])) c, generate_series(0, 2879) k"
            ),
            {"start": start, "clusters": list(clusters)},
        )
        conn.execute(text("ANALYZE derived_cluster"))
    newest = start + timedelta(seconds=INTERVAL * 2879)
    with engine.connect() as conn:
        assert latest_evaluation(conn, "heads-b") == newest
        heads = {
            str(row.cluster): row.evaluated_at
            for row in conn.execute(
                text("SELECT cluster, evaluated_at FROM latest_evaluations WHERE cluster LIKE 'heads-%'")
            )
        }
        assert heads == dict.fromkeys(clusters, newest)
        partitions = conn.execute(
            text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'derived_cluster'::regclass")
        ).scalar_one()
        every = conn.execute(text("SELECT count(DISTINCT cluster) FROM derived_cluster")).scalar_one()
        plan = _plan(conn, "SELECT evaluated_at FROM latest_evaluations WHERE cluster = 'heads-b'")
    # at most a row per cluster and day partition (and the walk's last, empty step)
    assert _rows(plan, "derived_cluster") <= (every + 1) * partitions, plan
