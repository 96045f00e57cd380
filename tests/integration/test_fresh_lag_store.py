"""The fresh offset lag of many groups at once (`fresh_lag.groups_lags`), as the `/metrics` snapshot
reads the fleet every few seconds: above PROBED_GROUPS groups its lookups are joins over the
cluster's rows instead of a probe per partition, and the answer is the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from monitor.core.clock import to_millis
from monitor.core.records import CommitObservation
from monitor.store import fresh_lag
from monitor.store.fresh_lag import changed_since, groups_lags
from monitor.store.samples.commits import write_commit_observations

AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
GROUPS = fresh_lag.PROBED_GROUPS + 3

FILL = [
    """INSERT INTO latest_partition_offsets (cluster, topic, partition, sampled_at, start_offset, end_offset,
                                             end_offset_method, end_offset_listed_at)
       SELECT c, 't' || t, p, :at, 0, 1000 + 10 * t + p, 'listed', :at - interval '2 seconds'
       FROM unnest(ARRAY['many', 'other']) c, generate_series(0, 2) t, generate_series(0, 3) p""",
    """INSERT INTO latest_group_offsets (cluster, group_id, topic, partition, sampled_at, committed_offset,
                                         end_offset, start_offset, lag, lag_clamped, timestamp_method, gone_at)
       SELECT c, 'g' || g, 't' || t, p, :at, 900 + g, 1000, 0, 100, false, 'none',
              CASE WHEN g = 1 AND p = 3 THEN :at END
       FROM unnest(ARRAY['many', 'other']) c, generate_series(0, :groups - 1) g, generate_series(0, 2) t,
            generate_series(0, 3) p
       WHERE (g + t) % 3 <> 0""",
    """INSERT INTO latest_commits (cluster, group_id, topic, partition, committed_offset, observed_at)
       SELECT cluster, group_id, topic, partition, committed_offset + 50 + partition,
              sampled_at + make_interval(secs => partition - 2)
       FROM latest_group_offsets WHERE partition <> 1""",
]


def test_the_lag_of_many_groups_read_in_one_pass_is_the_lag_read_group_by_group(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in ("latest_commits", "latest_group_offsets", "latest_partition_offsets"):
            conn.execute(text(f"DELETE FROM {table} WHERE cluster IN ('many', 'other')"))
        for statement in FILL:
            conn.execute(text(statement), {"at": AT, "groups": GROUPS})
    names = [f"g{g}" for g in range(GROUPS)] + ["absent"]
    with engine.connect() as conn:
        together = groups_lags(conn, "many", names)
        one_by_one = {g: lags for name in names for g, lags in groups_lags(conn, "many", [name]).items()}

    assert len(names) > fresh_lag.PROBED_GROUPS, "the joined read"
    assert together == one_by_one
    assert sorted(together) == sorted(names[:-1]), "every group but the one without offsets"
    assert ("t0", 3) not in together["g1"], "a partition gone from the group is left out"
    g2 = together["g2"]
    assert set(g2) == {(t, p) for t in ("t0", "t2") for p in range(4)}
    newer, older = g2[("t0", 3)], g2[("t0", 0)]
    assert (newer.committed_offset, newer.end_offset, newer.offset_lag) == (955, 1003, 48), (
        "the commit, newer"
    )
    assert newer.committed_offset_as_of == AT + timedelta(seconds=1)
    assert newer.offset_lag_as_of == AT - timedelta(seconds=2), "as of the end offset listed"
    assert (older.committed_offset, older.offset_lag) == (902, 98), "the sample, newer than the commit"
    assert older.committed_offset_as_of == AT


REFRESHED = [
    """INSERT INTO refreshed_end_offsets (cluster, topic, partition, end_offset, answered_at, missed)
       SELECT c, 't0', p, 1100 + p, CASE WHEN p = 2 THEN :at - interval '5 seconds' ELSE :at END, p = 2
       FROM unnest(ARRAY['many', 'other']) c, generate_series(0, 3) p""",
    """INSERT INTO end_offset_refreshes (cluster, listed_at, partitions, missed)
       VALUES ('many', :at + interval '3 seconds', 12, 1), ('other', :at + interval '3 seconds', 12, 1)""",
    """INSERT INTO commit_stream_marks (cluster, streaming_since, read_until)
       VALUES ('many', :at - interval '1 second', :at + interval '4 seconds'),
              ('other', :at + interval '1 second', :at + interval '4 seconds')""",
]


def _fill_refreshed(engine: Engine) -> None:
    """FILL, the end offsets job's rows and the commit stream's marks (REFRESHED), alone."""
    with engine.begin() as conn:
        for table in ("latest_commits", "latest_group_offsets", "latest_partition_offsets",
                      "refreshed_end_offsets", "end_offset_refreshes", "commit_stream_marks"):  # fmt: skip
            conn.execute(text(f"DELETE FROM {table} WHERE cluster IN ('many', 'other')"))
        for statement in FILL + REFRESHED:
            conn.execute(text(statement), {"at": AT, "groups": GROUPS})


def test_the_end_offsets_listed_since_and_the_streams_mark_make_the_lag_as_fresh_as_they_are(
    engine: Engine,
) -> None:
    """The end offset of the newer of the offsets job's sample and the end offsets job's listing
    (a partition the listing missed holds as of its last answer), and the committed offset held
    until the commit stream's mark where the stream read every commit since it was sampled."""
    _fill_refreshed(engine)
    names = [f"g{g}" for g in range(GROUPS)]
    with engine.connect() as conn:
        together = groups_lags(conn, "many", names)
        one_by_one = {g: lags for name in names for g, lags in groups_lags(conn, "many", [name]).items()}
        other = groups_lags(conn, "other", ["g2"])["g2"]
    assert together == one_by_one, "the joined read and the probes agree"

    listed, missed = together["g2"][("t0", 0)], together["g2"][("t0", 2)]
    assert (listed.end_offset, listed.end_offset_as_of) == (1100, AT + timedelta(seconds=3)), "the listing"
    assert (listed.committed_offset, listed.committed_offset_as_of) == (902, AT + timedelta(seconds=4)), (
        "the sample, held until the mark: the stream read every commit since before it was sampled"
    )
    assert (listed.offset_lag, listed.offset_lag_as_of) == (198, AT + timedelta(seconds=3))
    assert (missed.end_offset, missed.end_offset_as_of) == (1002, AT - timedelta(seconds=2)), (
        "missed 5 s before: the offsets job's sample, newer"
    )
    unlisted = together["g2"][("t2", 0)]
    assert (unlisted.end_offset, unlisted.end_offset_as_of) == (1020, AT - timedelta(seconds=2))

    # On 'other' the stream was positioned after the sample (AT): a commit observed since is
    # held until the mark, the sample alone is not.
    assert other[("t0", 0)].committed_offset_as_of == AT, "sampled before the stream read every commit"
    assert other[("t0", 3)].committed_offset_as_of == AT + timedelta(seconds=4), "observed at AT + 1 s"


def test_the_groups_changed_since_a_time_include_those_reading_a_partition_whose_end_moved(
    engine: Engine,
) -> None:
    """What the `/metrics` snapshot re-reads between builds: with no commit at all, the groups
    reading a partition the end offsets job found moved since, not those whose partitions stood
    still nor those of a partition it missed."""
    _fill_refreshed(engine)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM commit_observations WHERE cluster IN ('many', 'other')"))
        readers = {
            r.group_id
            for r in conn.execute(
                text(
                    "SELECT DISTINCT group_id FROM latest_group_offsets WHERE cluster = 'many' AND topic = 't0' "
                    "AND partition <> 2 AND gone_at IS NULL"
                )
            )
        }
        before = changed_since(conn, AT - timedelta(seconds=1))
        after = changed_since(conn, AT + timedelta(seconds=1))

    assert readers and sorted(readers) == before["many"], (
        "t0's partitions moved at AT; partition 2 was missed"
    )
    assert sorted(before) == ["many", "other"]
    assert after == {}, "nothing moved after AT"


def test_the_groups_committed_since_are_the_same_from_the_observations_and_from_the_newest(
    engine: Engine,
) -> None:
    """The first read after a build looks back minutes, and takes each group-partition's newest
    commit (`latest_commits`) instead of the observations since then: the same groups whatever
    the time, as the commits job writes both."""
    cluster = "commits-since"
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO clusters (name, bootstrap, first_seen, last_seen)"
                " VALUES (:c, '127.0.0.1:9092', :t, :t) ON CONFLICT DO NOTHING"
            ),
            {"c": cluster, "t": AT},
        )
        for table in ("commit_observations", "latest_commits"):
            conn.execute(text(f"DELETE FROM {table} WHERE cluster = :c"), {"c": cluster})
        # group g commits g + 1 times, 7 s apart from AT + g s: its newest commit at AT + 8g s
        write_commit_observations(
            conn,
            cluster,
            [
                CommitObservation(
                    f"g{g}", "t", p, 10 * n + p, None, to_millis(AT + timedelta(seconds=7 * n + g))
                )
                for g in range(6)
                for n in range(g + 1)
                for p in range(3)
            ],
        )
    with engine.connect() as conn:
        for seconds in (-60, 0, 5, 14, 20, 33, 40, 60):
            since = AT + timedelta(seconds=seconds)
            assert changed_since(conn, since, long_look_back=True).get(cluster) == changed_since(
                conn, since
            ).get(cluster), f"since AT + {seconds} s"
        assert changed_since(conn, AT + timedelta(seconds=20), long_look_back=True)[cluster] == [
            "g3",
            "g4",
            "g5",
        ]
        assert cluster not in changed_since(conn, AT + timedelta(seconds=40), long_look_back=True)


def test_a_fleet_read_raises_work_mem_for_its_block_only_and_never_lowers_it(engine: Engine) -> None:
    def work_mem(conn: Connection) -> str:
        return str(conn.execute(text("SHOW work_mem")).scalar_one())

    with engine.begin() as conn:
        conn.execute(text("SET LOCAL work_mem = '4MB'"))
        with fresh_lag.fleet_read(conn):
            assert work_mem(conn) == fresh_lag.FLEET_READ_WORK_MEM
            with fresh_lag.fleet_read(conn):  # nested: the outer block's setting stays
                assert work_mem(conn) == fresh_lag.FLEET_READ_WORK_MEM
            assert work_mem(conn) == fresh_lag.FLEET_READ_WORK_MEM
        assert work_mem(conn) == "4MB", "as it was after the block"
        conn.execute(text("SET LOCAL work_mem = '1GB'"))
        with fresh_lag.fleet_read(conn):
            assert work_mem(conn) == "1GB", "a larger setting is kept"
        assert work_mem(conn) == "1GB"
    with engine.connect() as conn:
        default = work_mem(conn)
        conn.rollback()
        with pytest.raises(DBAPIError), fresh_lag.fleet_read(conn):
            conn.execute(text("SELECT 1 / 0"))
        conn.rollback()
        assert work_mem(conn) == default, "a block that failed leaves nothing set once rolled back"
