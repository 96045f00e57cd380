"""A topic search for a name fragment (`LIKE '%fragment%'`) at 10,000 topics reads the trigram
index of migration 0013, as the read layer runs it, and finds the same topics; a user who may not
create the index's extension is told who must."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from monitor.expose.read import topics as read_topics
from monitor.expose.read.queries import ALL
from monitor.store import migrate
from monitor.store.engine import make_engine
from tests.fixtures.postgres import PgServer, unique_database_name

TOPICS = 10_000
INDEX = "ix_topics_topic_trgm"


@pytest.fixture(scope="module")
def fleet(engine: Engine) -> Engine:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO clusters VALUES ('fleet', 'k1:9092', 'id', 1, now(), now())"))
        conn.execute(
            text(
                "INSERT INTO topics SELECT 'fleet', 'topic-' || lpad(n::text, 5, '0'), 10, 3, false, now(),"
                " now(), NULL FROM generate_series(0, :n - 1) AS n"
            ),
            {"n": TOPICS},
        )
    # What autovacuum does after a burst of new topics: the index's pending entries merged, and
    # the planner's statistics.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE topics"))
    return engine


@contextmanager
def _searches(engine: Engine) -> Iterator[list[tuple[str, dict[str, object]]]]:
    """Every statement with a LIKE that the read layer runs while the block runs."""
    seen: list[tuple[str, dict[str, object]]] = []

    def record(_c: object, _cur: object, statement: str, params: object, _ctx: object, _many: bool) -> None:
        if " LIKE " in statement and isinstance(params, dict):
            seen.append((statement, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _plan(conn: Connection, statement: str, params: dict[str, object]) -> str:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    cursor.execute("EXPLAIN " + statement, params)
    return "\n".join(str(row[0]) for row in cursor.fetchall())


def test_a_topic_search_reads_the_trigram_index(fleet: Engine) -> None:
    with _searches(fleet) as seen, fleet.connect() as conn:
        found = read_topics.topics(conn, "fleet", search="0099", sort="worst", page=ALL)
    assert [t.topic for t in found.items] == ["topic-00099", *(f"topic-0099{d}" for d in range(10))]
    assert found.total == 11
    assert len(seen) == 1, "one statement chooses the page"
    with fleet.connect() as conn:
        plan = _plan(conn, *seen[0])
    assert f"Bitmap Index Scan on {INDEX}" in plan, plan
    assert "Seq Scan on topics" not in plan, plan


def test_without_a_search_no_index_is_needed_and_every_topic_is_listed(fleet: Engine) -> None:
    with fleet.connect() as conn:
        assert read_topics.topics(conn, "fleet", sort="topic").total == TOPICS
        wildcard = read_topics.topics(conn, "fleet", search="topic_%")
    assert wildcard.total == 0, "LIKE's wildcards are taken literally"


def test_an_upgrade_that_may_not_create_the_extension_says_who_must(pg_server: PgServer) -> None:
    role, name = f"kh_no_ext_{uuid.uuid4().hex[:8]}", unique_database_name("kh_no_ext")
    admin = make_engine(pg_server.admin_url)
    url = pg_server.create_database(name)
    try:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        owner = make_engine(url)
        try:
            with owner.begin() as conn:  # tables in the schema, but no CREATE on the database
                conn.execute(text(f"GRANT CREATE ON SCHEMA public TO {role}"))
        finally:
            owner.dispose()
        limited = make_url(url).set(username=role).render_as_string(hide_password=False)
        with pytest.raises(
            DBAPIError, match=rf'ask the database owner .* "CREATE EXTENSION pg_trgm;" in database {name}'
        ):
            migrate.upgrade(limited)
        assert migrate.current(limited) == "0012", "the revisions before it stay applied"
    finally:
        pg_server.drop_database(name)
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()
