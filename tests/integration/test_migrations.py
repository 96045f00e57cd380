"""Migrations you can trust: one head, ORM metadata equal to the migrated schema, and a working
upgrade -> downgrade -> upgrade cycle with data in the tables."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from monitor.core.clock import to_millis
from monitor.core.records import (
    CommitObservation,
    CommittedOffset,
    DataLossEvent,
    GroupDescription,
    GroupMember,
    GroupOffsetSample,
    OffsetsBatch,
    PartitionOffsets,
    PartitionSample,
    RecordTimestamp,
)
from monitor.store import migrate
from monitor.store.engine import make_engine
from monitor.store.ingest import copy_rows
from monitor.store.partitions import (
    PARTITIONED_TABLES,
    ensure_days,
    ensure_partitions,
    existing_partitions,
    partition_name,
)
from monitor.store.samples import write_offsets_batch
from monitor.store.schema import metadata
from tests.conditions import wait_for
from tests.fixtures.postgres import PgServer, unique_database_name

NOW = datetime(2030, 6, 15, 12, 0, tzinfo=UTC)
_DAY_PARTITION = re.compile(r"_p\d{8}$")


def _not_a_day_partition(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    return not (type_ == "table" and name is not None and _DAY_PARTITION.search(name))


def _tables(engine: Engine) -> set[str]:
    return {name for name in inspect(engine).get_table_names() if not _DAY_PARTITION.search(name)}


@pytest.fixture
def scratch_url(pg_server: PgServer) -> Iterator[str]:
    """An empty database of its own, for tests that move the schema up and down."""
    name = unique_database_name("kh_migr")
    url = pg_server.create_database(name)
    try:
        yield url
    finally:
        pg_server.drop_database(name)


def test_exactly_one_head() -> None:
    assert len(migrate.heads()) == 1


def test_the_head_read_from_the_scripts_lines_is_alembics() -> None:
    """`declared_head` reads the head without importing the scripts (a start's fast path)."""
    assert migrate.declared_head() == migrate.heads()[0]


def test_upgrading_a_database_at_the_head_asks_alembic_nothing(
    scratch_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path only answers for a database at the head: one below it is migrated."""
    import alembic.command

    migrate.upgrade(scratch_url, "0032")
    upgraded: list[str] = []
    real = alembic.command.upgrade
    monkeypatch.setattr(
        alembic.command, "upgrade", lambda config, rev: (upgraded.append(rev), real(config, rev))
    )
    migrate.upgrade(scratch_url)
    assert upgraded == ["head"] and migrate.current(scratch_url) == migrate.heads()[0]
    migrate.upgrade(scratch_url)
    assert upgraded == ["head"], "at the head: one query, no alembic"


def test_the_store_refuses_a_schema_below_the_head_without_asking_alembic(
    scratch_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's start tells the revision from the scripts' lines and one query: alembic's
    migration context (and its import, a quarter of a second of the start) is not used."""
    from monitor.core.clock import SystemClock
    from monitor.core.errors import StoreUnavailableError
    from monitor.core.settings_store import DatabaseConfig
    from monitor.store.service import StoreService

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the start asked alembic")

    def start(store: StoreService) -> None:
        with monkeypatch.context() as patched:
            patched.setattr(MigrationContext, "configure", refuse)
            try:
                store.start()
            finally:
                store.stop()

    store = StoreService(scratch_url, DatabaseConfig(), SystemClock())
    expects = r"the code expects \d{4}; run `kafka-health db migrate`"
    with pytest.raises(StoreUnavailableError, match=f"at revision none, {expects}"):
        start(store)
    migrate.upgrade(scratch_url, "0032")
    with pytest.raises(StoreUnavailableError, match=f"at revision 0032, {expects}"):
        start(store)
    migrate.upgrade(scratch_url)
    start(store)


def test_the_store_starts_with_today_and_leaves_the_other_days_to_its_maintenance(scratch_url: str) -> None:
    """A start creates today's partition of each partitioned table, what the first writes need;
    yesterday's and the coming days' (five days of 24 tables on a new database, about half a
    second the collectors would wait for) are the background maintenance's. A start on a database
    that has them creates nothing."""
    from monitor.core.clock import FakeClock
    from monitor.core.settings_store import DatabaseConfig
    from monitor.store.service import StoreService

    migrate.upgrade(scratch_url)
    config = DatabaseConfig(partitions_ahead_days=2)
    today = NOW.date()
    days = [today + timedelta(days=offset) for offset in (-1, 0, 1, 2)]
    engine = make_engine(scratch_url)

    def partitions() -> dict[str, set[str]]:
        with engine.connect() as conn:
            return {table: set(existing_partitions(conn, table)) for table in PARTITIONED_TABLES}

    try:
        store = StoreService(scratch_url, config, FakeClock(NOW))
        store.start()
        try:
            assert partitions() == {table: {partition_name(table, today)} for table in PARTITIONED_TABLES}
            store.maintain()
            expected = {table: {partition_name(table, day) for day in days} for table in PARTITIONED_TABLES}
            assert partitions() == expected
        finally:
            store.stop()
        store.start()
        store.stop()
        assert partitions() == expected
    finally:
        engine.dispose()


def _waiting_for_a_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar())


def test_the_maintenance_creating_days_does_not_deadlock_a_reader_of_two_tables(scratch_url: str) -> None:
    """The API reads several tables in one transaction. A maintenance that created every table's
    days in one transaction held the first table while it waited for a reader of the last, and
    the reader then waited for the first: PostgreSQL broke the deadlock by failing one of them
    (the Kafka 3.9.1 end-to-end run logged 'job store:maintenance failed'). Table by table, the
    reader reads the first table (already committed) and the maintenance ends after it."""
    from monitor.store.partitions import maintain_partitions

    migrate.upgrade(scratch_url)
    engine = make_engine(scratch_url)
    tables = list(PARTITIONED_TABLES)
    first, last = tables[0], tables[-1]
    try:
        with engine.begin() as conn:
            ensure_days(conn, {table: {NOW.date()} for table in tables})  # what the start makes
        with engine.connect() as reader, ThreadPoolExecutor(1) as pool:
            reader.execute(text(f'SELECT count(*) FROM "{last}"'))
            maintenance = pool.submit(
                maintain_partitions,
                engine,
                NOW,
                ahead_days=1,
                retention_days=30,
                lock_wait=timedelta(seconds=20),
            )
            wait_for(lambda: _waiting_for_a_lock(engine) or maintenance.done(), 20, "the maintenance to wait")
            reader.execute(text(f'SELECT count(*) FROM "{first}"'))
            reader.rollback()
            result = maintenance.result(timeout=30)
        assert result.postponed == []
        tomorrow = NOW.date() + timedelta(days=1)
        with engine.connect() as conn:
            assert partition_name(first, tomorrow) in existing_partitions(conn, first)
            assert partition_name(last, tomorrow) in existing_partitions(conn, last)
    finally:
        engine.dispose()


def test_a_write_creating_missing_days_does_not_deadlock_a_reader_of_two_tables(scratch_url: str) -> None:
    """A write that finds several tables' day missing (an offsets batch: its partition samples,
    group offsets, group states and commits) created them all in its own transaction: it held the
    first table while it waited for a reader of the second, which then waited for the first, the
    maintenance's deadlock. Each table's days are now created and committed beside the write."""
    migrate.upgrade(scratch_url)
    engine = make_engine(scratch_url)
    first, last = "group_offsets", "partition_offsets"  # the order ensure_days creates them in
    day = NOW.date()

    def write() -> None:
        with engine.begin() as conn:
            ensure_days(conn, {first: {day}, last: {day}})

    try:
        with engine.connect() as reader, ThreadPoolExecutor(1) as pool:
            reader.execute(text(f'SELECT count(*) FROM "{last}"'))
            writing = pool.submit(write)
            wait_for(lambda: _waiting_for_a_lock(engine) or writing.done(), 20, "the write to wait")
            reader.execute(text(f'SELECT count(*) FROM "{first}"'))
            reader.rollback()
            writing.result(timeout=30)
        with engine.connect() as conn:
            assert partition_name(first, day) in existing_partitions(conn, first)
            assert partition_name(last, day) in existing_partitions(conn, last)
    finally:
        engine.dispose()


def test_a_day_the_writes_own_transaction_holds_is_created_in_it(
    scratch_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table the write's own transaction has already read or written cannot be locked beside
    it: after the lock wait, its day is created in the write's transaction, as before."""
    from monitor.store import partitions

    migrate.upgrade(scratch_url)
    monkeypatch.setattr(partitions, "LOCK_WAIT", timedelta(milliseconds=100))
    engine = make_engine(scratch_url)
    table, day = "group_offsets", NOW.date()
    try:
        with engine.begin() as conn:
            conn.execute(text(f'SELECT count(*) FROM "{table}"'))
            ensure_days(conn, {table: {day}})
            assert partition_name(table, day) in existing_partitions(conn, table)
        with engine.connect() as conn:
            assert partition_name(table, day) in existing_partitions(conn, table)
    finally:
        engine.dispose()


def test_a_table_held_past_the_maintenances_wait_is_postponed_to_its_next_pass(scratch_url: str) -> None:
    """A table held longer than the lock wait is left (after three tries) with the others done; a
    pending lock on a table would queue every later reader of it, so the wait is short."""
    from monitor.store.partitions import maintain_partitions

    migrate.upgrade(scratch_url)
    engine = make_engine(scratch_url)
    held = list(PARTITIONED_TABLES)[3]
    tomorrow = NOW.date() + timedelta(days=1)
    try:
        with engine.connect() as reader:
            reader.execute(text(f'SELECT count(*) FROM "{held}"'))
            result = maintain_partitions(
                engine, NOW, ahead_days=1, retention_days=30, lock_wait=timedelta(milliseconds=100)
            )
            reader.rollback()
        assert result.postponed == [held]
        assert partition_name(held, tomorrow) not in result.created
        assert len(result.created) == 3 * (len(PARTITIONED_TABLES) - 1)
        again = maintain_partitions(engine, NOW, ahead_days=1, retention_days=30)
        assert again.postponed == []
        assert sorted(again.created) == sorted(
            partition_name(held, day) for day in (NOW.date() - timedelta(days=1), NOW.date(), tomorrow)
        )
        with engine.connect() as conn:
            assert partition_name(held, tomorrow) in existing_partitions(conn, held)
    finally:
        engine.dispose()


def test_every_revision_has_a_downgrade() -> None:
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    for revision in scripts.walk_revisions():
        assert callable(getattr(revision.module, "downgrade", None)), revision.revision


def test_orm_metadata_equals_migrated_schema(engine: Engine) -> None:
    # Day partitions exist in a live database; they must not count as differences.
    with engine.begin() as conn:
        assert ensure_partitions(conn, NOW, 1)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={"include_name": _not_a_day_partition, "compare_type": True, "compare_server_default": True},
        )
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_migrated_schema_has_partitioned_parents(engine: Engine) -> None:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.relname, pg_get_partkeydef(c.oid) FROM pg_class c "
                "WHERE c.relkind = 'p' AND c.relnamespace = 'public'::regnamespace"
            )
        ).all()
    assert {name: key for name, key in rows} == {
        table: f"RANGE ({column})" for table, column in PARTITIONED_TABLES.items()
    }


def test_the_keys_of_the_sample_tables_every_cycle_fills_lead_with_time(engine: Engine) -> None:
    # group_offsets gets a row per group-partition per cycle: keyed time first, a cycle's rows go
    # to the index's right-hand edge, not to 100,000 places in it (migration 0016).
    with engine.begin() as conn:
        ensure_partitions(conn, NOW, 1)
        keys = dict(
            conn.execute(
                text(
                    "SELECT c.relname, pg_get_constraintdef(k.oid) FROM pg_constraint k "
                    "JOIN pg_class c ON c.oid = k.conrelid WHERE k.contype = 'p' "
                    "AND c.relname LIKE 'group_offsets%'"
                )
            ).all()
        )
        indexes = conn.execute(
            text("SELECT indexname FROM pg_indexes WHERE tablename = 'group_offsets' ORDER BY 1")
        ).scalars()
        assert list(indexes) == ["ix_group_offsets_cluster_topic_partition_sampled_at", "pk_group_offsets"]
    assert len(keys) >= 2, "the parent and its day partitions"
    assert set(keys.values()) == {"PRIMARY KEY (cluster, sampled_at, group_id, topic, partition)"}


def test_current_is_head(db_url: str) -> None:
    assert migrate.current(db_url) == migrate.heads()[0]


def _insert_sample_data(engine: Engine) -> None:
    with engine.begin() as conn:
        ensure_partitions(conn, NOW, 1)
        params = {"now": NOW}
        conn.execute(
            text(
                "INSERT INTO clusters (name, bootstrap, first_seen, last_seen) "
                "VALUES ('c1', 'b:9092', :now, :now)"
            ),
            params,
        )
        conn.execute(
            text(
                "INSERT INTO topics (cluster, topic, partition_count, replication_factor, internal, "
                "first_seen, last_seen) VALUES ('c1', 'orders', 3, 3, false, :now, :now)"
            ),
            params,
        )
        conn.execute(
            text(
                "INSERT INTO partitions (cluster, topic, partition, leader, replicas, isr, updated_at) "
                "VALUES ('c1', 'orders', 0, 1, '{1,2,3}', '{1,2}', :now)"
            ),
            params,
        )
        conn.execute(
            text(
                "INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive, valid_from) "
                "VALUES ('c1', 'orders', 'retention.ms', '604800000', 'DYNAMIC_TOPIC_CONFIG', false, :now)"
            ),
            params,
        )
        conn.execute(
            text(
                "INSERT INTO collection_runs (cluster, job, instance, started_at, status) "
                "VALUES ('c1', 'offsets', 'i1', :now, 'ok')"
            ),
            params,
        )
        conn.execute(
            text(
                "INSERT INTO leases (name, holder, acquired_at, renewed_at, expires_at) "
                "VALUES ('cluster:c1', 'i1', :now, :now, :later)"
            ),
            {"now": NOW, "later": NOW + timedelta(minutes=1)},
        )
        rows = [("c1", "orders", p, NOW - timedelta(days=1, minutes=p), 0, 100 + p) for p in range(3)]
        copy_rows(
            conn,
            "partition_offsets",
            ["cluster", "topic", "partition", "sampled_at", "start_offset", "end_offset"],
            rows,
        )
        # One offsets cycle: rows in the latest tables, group members and data loss events too.
        ms = to_millis(NOW)
        member = GroupMember("m1", "client", "/10.0.0.1", (("orders", 0),))
        write_offsets_batch(
            conn,
            OffsetsBatch(
                "c1",
                NOW,
                partitions=[
                    PartitionSample(PartitionOffsets("orders", 0, 5, 100), ms - 60_000, ms, "CreateTime")
                ],
                groups=[GroupDescription("billing", "Stable", "consumer", "range", 1, (member,))],
                group_offsets=[GroupOffsetSample(CommittedOffset("billing", "orders", 0, 3), 100, 5, 97)],
                commit_observations=[CommitObservation("billing", "orders", 0, 3, 1, ms)],
                record_timestamps=[RecordTimestamp("orders", 0, 5, 5, ms - 60_000, "CreateTime")],
                data_loss=[DataLossEvent("billing", "orders", 0, 3, 5, ms)],
            ),
        )


def _count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_upgrade_downgrade_upgrade_with_data(scratch_url: str) -> None:
    migrate.upgrade(scratch_url)
    engine = make_engine(scratch_url)
    try:
        _insert_sample_data(engine)
        populated = ("clusters", "topics", "partitions", "topic_configs", "collection_runs", "leases")
        assert {table: _count(engine, table) for table in populated} == dict.fromkeys(populated, 1)
        assert _count(engine, "partition_offsets") == 4
        new_in_0002 = (
            "latest_partition_offsets",
            "latest_group_offsets",
            "group_members",
            "data_loss_events",
        )
        assert {table: _count(engine, table) for table in new_in_0002} == dict.fromkeys(new_in_0002, 1)

        # Upgrading an up-to-date database is a no-op that keeps every row.
        migrate.upgrade(scratch_url)
        assert _count(engine, "partition_offsets") == 4
        assert _count(engine, "clusters") == 1

        migrate.downgrade(scratch_url, "base")
        engine.dispose()
        assert _tables(engine) == {"alembic_version"}
        assert inspect(engine).get_table_names() == ["alembic_version"]  # day partitions went too
        assert migrate.current(scratch_url) is None

        migrate.upgrade(scratch_url)
        assert _tables(engine) == {table.name for table in metadata.sorted_tables} | {"alembic_version"}
        assert _count(engine, "clusters") == 0
        # The schema works again from scratch: same rows, same constraints, sequences restarted.
        _insert_sample_data(engine)
        assert _count(engine, "partition_offsets") == 4
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id FROM collection_runs")).scalar_one() == 1
    finally:
        engine.dispose()


def test_each_revision_steps_down_and_up(scratch_url: str) -> None:
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    revisions = [rev.revision for rev in reversed(list(scripts.walk_revisions()))]
    for revision in revisions:
        migrate.upgrade(scratch_url, revision)
        migrate.downgrade(scratch_url, "-1")
        migrate.upgrade(scratch_url, revision)
        assert migrate.current(scratch_url) == revision


def test_0030_marks_every_hour_of_a_day_rolled_up_and_back(scratch_url: str) -> None:
    migrate.upgrade(scratch_url, "0029")
    engine = make_engine(scratch_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO rollup_days (source, day, rolled_at) VALUES ('derived_group', '2032-01-02', :t)"
                ),
                {"t": NOW},
            )
        migrate.upgrade(scratch_url, "0030")
        with engine.connect() as conn:
            hours = conn.execute(text("SELECT hour FROM rollup_hours ORDER BY 1")).scalars().all()
        first = datetime(2032, 1, 2, tzinfo=UTC)
        assert [h.astimezone(UTC) for h in hours] == [first + timedelta(hours=n) for n in range(24)]
        with engine.begin() as conn:  # a day of which one hour is rolled up is not a rolled-up day
            conn.execute(
                text("INSERT INTO rollup_hours (source, hour, rolled_at) VALUES ('derived_group', :h, :t)"),
                {"h": first + timedelta(days=1), "t": NOW},
            )
        migrate.downgrade(scratch_url, "0029")
        with engine.connect() as conn:
            days = conn.execute(text("SELECT source, day FROM rollup_days")).all()
        assert [tuple(d) for d in days] == [("derived_group", first.date())]
    finally:
        engine.dispose()


def test_0039_keeps_every_commit_time_in_latest_commits_and_back(scratch_url: str) -> None:
    migrate.upgrade(scratch_url, "0038")
    engine = make_engine(scratch_url)
    latest = (
        "INSERT INTO latest_group_offsets (cluster, group_id, topic, partition, sampled_at, committed_offset,"
        " last_commit_observed_at) VALUES ('c', :g, 't', 0, :at, :o, :seen)"
    )
    try:
        with engine.begin() as conn:
            for group, offset, seen in [("only-here", 5, NOW), ("older-kept", 9, NOW), ("newer-kept", 4, NOW),
                                        ("never", 1, None)]:  # fmt: skip
                conn.execute(text(latest), {"g": group, "at": NOW, "o": offset, "seen": seen})
            conn.execute(
                text(
                    "INSERT INTO latest_commits (cluster, group_id, topic, partition, committed_offset,"
                    " observed_at) VALUES ('c', 'older-kept', 't', 0, 8, :before), ('c', 'newer-kept', 't', 0,"
                    " 6, :after)"
                ),
                {"before": NOW - timedelta(seconds=5), "after": NOW + timedelta(seconds=5)},
            )
        migrate.upgrade(scratch_url, "0039")
        with engine.connect() as conn:
            kept = conn.execute(
                text("SELECT group_id, committed_offset, observed_at FROM latest_commits ORDER BY 1")
            ).all()
        assert [(g, o, at.astimezone(UTC)) for g, o, at in kept] == [
            ("newer-kept", 6, NOW + timedelta(seconds=5)),  # a newer commit than the copy: kept
            ("older-kept", 9, NOW),
            ("only-here", 5, NOW),
        ]
        migrate.downgrade(scratch_url, "0038")
        with engine.connect() as conn:
            back = conn.execute(
                text("SELECT group_id, last_commit_observed_at FROM latest_group_offsets ORDER BY 1")
            ).all()
        assert [(g, at and at.astimezone(UTC)) for g, at in back] == [
            ("never", None),
            ("newer-kept", NOW + timedelta(seconds=5)),
            ("older-kept", NOW),
            ("only-here", NOW),
        ]
    finally:
        engine.dispose()
