"""The SQL investigation views (migration 0005): "latest" means the newest evaluation of each
cluster, history keeps every evaluation, retention changes are the changed values only, and the
reader role can read everything and change nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import ProgrammingError

from monitor.store.partitions import ensure_partitions

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=30)


def _evaluation(conn: Connection, cluster: str, at: datetime, lag: int, size: int) -> None:
    params = {"c": cluster, "t": at, "lag": lag, "size": size}
    conn.execute(
        text("INSERT INTO derived_cluster (cluster, evaluated_at, brokers) VALUES (:c, :t, 3)"), params
    )
    conn.execute(
        text(
            "INSERT INTO derived_group_partition (cluster, group_id, topic, partition, evaluated_at,"
            " offset_lag, time_until_data_loss_seconds, data_loss_occurred)"
            " VALUES (:c, 'billing', 'orders', 0, :t, :lag, 3600, false),"
            "        (:c, 'audit', 'orders', 0, :t, 0, NULL, false)"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO derived_partition (cluster, topic, partition, evaluated_at, size_bytes,"
            " retention_bytes, replicas_lost, under_replicated)"
            " VALUES (:c, 'orders', 0, :t, :size, 1000, 1, true)"
        ),
        params,
    )


@pytest.fixture(scope="module")
def filled(engine: Engine) -> Engine:
    with engine.begin() as conn:
        ensure_partitions(conn, T0, ahead_days=1)
        conn.execute(
            text(
                "INSERT INTO clusters (name, bootstrap, controller_id, first_seen, last_seen)"
                " VALUES ('prod', 'k:9092', 1, :t, :t), ('stage', 'k2:9092', 1, :t, :t)"
            ),
            {"t": T0},
        )
        conn.execute(
            text(
                "INSERT INTO partitions (cluster, topic, partition, leader, replicas, isr, updated_at)"
                " VALUES ('prod', 'orders', 0, 2, '{1,2,3}', '{2,3}', :t)"
            ),
            {"t": T1},
        )
        _evaluation(conn, "prod", T0, lag=100, size=400)
        _evaluation(conn, "prod", T1, lag=250, size=900)
        _evaluation(conn, "stage", T0, lag=7, size=10)
        for valid_from, valid_to, value in (
            (T0 - timedelta(days=2), T0 - timedelta(days=1), "604800000"),
            (T0 - timedelta(days=1), T0, "604800000"),  # re-read, same value: not a change
            (T0, None, "1209600000"),
        ):
            conn.execute(
                text(
                    "INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive,"
                    " valid_from, valid_to) VALUES ('prod', 'orders', 'retention.ms', :v, 'topic',"
                    " false, :f, :to)"
                ),
                {"v": value, "f": valid_from, "to": valid_to},
            )
    return engine


def test_latest_views_show_the_newest_evaluation_of_each_cluster(filled: Engine) -> None:
    with filled.connect() as conn:
        lag = conn.execute(
            text("SELECT cluster, offset_lag FROM group_partition_lag WHERE group_id = 'billing' ORDER BY 1")
        ).all()
        history = conn.execute(
            text("SELECT count(*) FROM lag_history WHERE cluster = 'prod' AND group_id = 'billing'")
        ).scalar()
        headroom = conn.execute(
            text(
                "SELECT headroom_bytes, lagging_groups, min_time_until_data_loss_seconds"
                " FROM retention_headroom WHERE cluster = 'prod'"
            )
        ).one()
        replication = conn.execute(
            text(
                "SELECT preferred_leader, isr, replicas_lost, under_replicated FROM replication_state"
                " WHERE cluster = 'prod'"
            )
        ).one()
    assert [tuple(r) for r in lag] == [("prod", 250), ("stage", 7)]
    assert history == 2
    assert tuple(headroom) == (100, 1, 3600.0)
    assert tuple(replication) == (1, [2, 3], 1, True)


def test_retention_changes_lists_changed_values_only(filled: Engine) -> None:
    with filled.connect() as conn:
        rows = conn.execute(
            text("SELECT name, old_value, new_value, changed_at FROM retention_changes")
        ).all()
    assert [tuple(r) for r in rows] == [("retention.ms", "604800000", "1209600000", T0)]


def test_the_reader_role_reads_and_cannot_write(filled: Engine, db_url: str) -> None:
    reader = "kh_view_reader_test"
    with filled.begin() as conn:
        conn.execute(text(f"DROP ROLE IF EXISTS {reader}"))
        conn.execute(text(f"CREATE ROLE {reader} LOGIN IN ROLE kafka_health_reader"))
    url = filled.url.set(username=reader, password=None)
    as_reader = create_engine(url)
    try:
        with as_reader.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM group_partition_lag")).scalar() == 4
            assert conn.execute(text("SELECT count(*) FROM group_offsets")).scalar() == 0
            with pytest.raises(ProgrammingError, match="permission denied"):
                conn.execute(text("DELETE FROM findings"))
        with as_reader.connect() as conn, pytest.raises(ProgrammingError, match="permission denied"):
            conn.execute(text("SELECT token_hash FROM api_tokens"))
    finally:
        as_reader.dispose()
        with filled.begin() as conn:
            conn.execute(text(f"REVOKE kafka_health_reader FROM {reader}"))
            conn.execute(text(f"DROP ROLE {reader}"))


def test_the_evaluation_is_sized_by_every_kind_of_input_row(engine: Engine) -> None:
    """The evaluation sizes its Spark partitions by the rows it reads: the newest sample's
    group-partitions and share-group partitions, and the partitions (an older share-groups
    sample does not count)."""
    from monitor.evaluate.job import _input_rows

    with engine.begin() as conn:
        ensure_partitions(conn, T0 - timedelta(days=1), ahead_days=2)
        for statement in (
            "INSERT INTO share_group_support (cluster, available, sampled_at) VALUES ('sizing', true, :t1)",
            "INSERT INTO share_group_offsets (cluster, sampled_at, group_id, topic, partition, lag_method)"
            " VALUES ('sizing', :t0, 'q', 'work', 0, 'none'), ('sizing', :t1, 'q', 'work', 0, 'none'),"
            "        ('sizing', :t1, 'q', 'work', 1, 'none'), ('sizing', :t1, 'r', 'work', 0, 'none')",
            "INSERT INTO partitions (cluster, topic, partition, leader, replicas, isr, updated_at)"
            " VALUES ('sizing', 'work', 0, 1, '{1}', '{1}', :t1), ('sizing', 'work', 1, 1, '{1}', '{1}', :t1)",
        ):
            conn.execute(text(statement), {"t0": T0, "t1": T1})
    assert _input_rows(engine, ["sizing"]) == 3 + 2
    assert _input_rows(engine, ["elsewhere"]) == 0
