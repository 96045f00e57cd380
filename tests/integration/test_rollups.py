"""The lag history outlives its raw evaluations: maintenance rolls each complete hour up into
15-minute and hourly buckets as the evaluations arrive, and retention drops a raw day only once
its 24 hours are rolled up; the rollups say what the raw rows said,
the history views and reads answer a 90-day window from whatever resolution is kept, and a
rerun changes nothing."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine, text

from monitor.core.clock import FakeClock
from monitor.core.settings import DatabaseConfig
from monitor.expose.read import history as read_history
from monitor.expose.web.app import create_app
from monitor.store.partitions import create_day_partitions, existing_partitions, partition_name
from monitor.store.rollups import ROLLUP_HOURS_PER_PASS
from monitor.store.service import StoreService
from tests.fixtures import rollups

START = datetime(2032, 1, 1, tzinfo=UTC)
DAYS = 10
EVERY = timedelta(minutes=5)
NOW = START + timedelta(days=DAYS, hours=1)
CONFIG = DatabaseConfig(sample_retention_days=3, rollup_15m_retention_days=5, rollup_1h_retention_days=30)
ROWS = rollups.evaluations(START, DAYS, EVERY)
DAY_LIST = [START.date() + timedelta(days=n) for n in range(DAYS)]


def _day(at: datetime) -> date:
    return at.astimezone(UTC).date()


def _marks(engine: Engine) -> list[tuple[str, date]]:
    """The (source, day) whose 24 hours are marked rolled up."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT source, CAST(hour AT TIME ZONE 'UTC' AS date) FROM rollup_hours"
                " GROUP BY 1, 2 HAVING count(*) = 24 ORDER BY 1, 2"
            )
        )
        return [(str(s), d) for s, d in rows]


DAYS_PER_PASS = ROLLUP_HOURS_PER_PASS // 24


FIRST_PASS: dict[str, object] = {}
"""What the store's start left (its marks) and the first maintenance pass (its marks and the raw
partitions)."""


@pytest.fixture(scope="module")
def rolled(engine: Engine, db_url: str) -> StoreService:
    with engine.begin() as conn:
        for table in ("derived_group", "derived_group_partition"):
            create_day_partitions(conn, table, DAY_LIST)
        rollups.write(conn, "r", "g", ROWS)
        rollups.write(conn, "r", "old", [e for e in ROWS if e.at < START + timedelta(days=2)])
        conn.execute(
            text(
                "INSERT INTO clusters (name, bootstrap, controller_id, first_seen, last_seen)"
                " VALUES ('r', 'k:9092', 1, :t, :t)"
            ),
            {"t": START},
        )
    store = StoreService(db_url, CONFIG, FakeClock(NOW))
    store.start()  # today's partitions only: the daemon maintains once its collectors have answered
    FIRST_PASS["started"] = _marks(engine)
    store.maintain()
    FIRST_PASS["marks"] = _marks(engine)
    with engine.connect() as conn:
        FIRST_PASS["raw"] = set(existing_partitions(conn, "derived_group"))
    for _ in range(DAYS):  # the backlog, a bounded number of hours a pass
        before = _marks(engine)
        store.maintain()
        if _marks(engine) == before:
            break
    return store


def _instance_maintains(db_url: str, at: datetime) -> None:
    """A daemon's store, started at `at`, and its maintenance (which the daemon runs after its start)."""
    store = StoreService(db_url, CONFIG, FakeClock(at))
    store.start()
    store.maintain()
    store.stop()


def _rows(conn: Connection, table: str, extra: str = "") -> list[tuple[object, ...]]:
    return [
        tuple(row)
        for row in conn.execute(
            text(
                f"SELECT bucket, evaluated_at, samples, offset_lag, offset_lag_min, offset_lag_last, status{extra} "
                f"FROM {table} WHERE cluster = 'r' AND group_id = 'g' ORDER BY evaluated_at"
            )
        )
    ]


def _expected(width: timedelta, kept_from: date, last: str) -> list[tuple[object, ...]]:
    return [
        (b.start, b.evaluated_at, b.samples, b.offset_lag, b.offset_lag_min, b.offset_lag_last, b.status,
         getattr(b, last))
        for b in rollups.buckets(ROWS, width)
        if _day(b.start) >= kept_from
    ]  # fmt: skip


def test_rollups_hold_the_worst_least_newest_lag_and_worst_status_of_their_bucket(
    rolled: StoreService, engine: Engine
) -> None:
    with engine.connect() as conn:
        fine_group = _rows(conn, "derived_group_15m", ", members")
        hour_group = _rows(conn, "derived_group_1h", ", members")
        fine_partition = _rows(conn, "derived_group_partition_15m", ", committed_offset")
        hour_partition = _rows(conn, "derived_group_partition_1h", ", committed_offset")
    # 15-minute rollups are kept 5 days (NOW is day 10, 01:00: days 5 .. 9), hourly ones 30.
    fine_from = DAY_LIST[5]
    assert fine_group == _expected(timedelta(minutes=15), fine_from, "members")
    assert fine_partition == _expected(timedelta(minutes=15), fine_from, "committed_offset")
    assert hour_group == _expected(timedelta(hours=1), DAY_LIST[0], "members")
    assert hour_partition == _expected(timedelta(hours=1), DAY_LIST[0], "committed_offset")
    assert len(hour_group) == DAYS * 24 and all(row[2] == 12 for row in hour_group)


def test_a_pass_rolls_up_the_oldest_days_first_and_no_raw_day_goes_before_its_rollup(
    rolled: StoreService,
) -> None:
    sources = ("derived_group", "derived_group_partition")
    assert FIRST_PASS["started"] == [], "the store's start rolls nothing up: the maintenance does"
    assert FIRST_PASS["marks"] == [(s, day) for s in sources for day in DAY_LIST[:DAYS_PER_PASS]]
    raw = FIRST_PASS["raw"]
    assert isinstance(raw, set)
    assert {partition_name("derived_group", day) for day in DAY_LIST[:DAYS_PER_PASS]}.isdisjoint(raw)
    assert {partition_name("derived_group", day) for day in DAY_LIST[DAYS_PER_PASS:]} <= raw


def test_raw_days_past_retention_are_dropped_and_rolled_up_days_marked(
    rolled: StoreService, engine: Engine
) -> None:
    with engine.connect() as conn:
        raw = set(existing_partitions(conn, "derived_group"))
        fine = set(existing_partitions(conn, "derived_group_15m"))
    assert {partition_name("derived_group", day) for day in DAY_LIST[7:]} <= raw
    assert not {partition_name("derived_group", day) for day in DAY_LIST[:7]} & raw
    assert not {partition_name("derived_group_15m", day) for day in DAY_LIST[:5]} & fine
    sources = ("derived_group", "derived_group_partition")
    assert _marks(engine) == [(source, day) for source in sources for day in DAY_LIST]


def test_history_views_read_raw_then_15_minutes_then_hours(rolled: StoreService, engine: Engine) -> None:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT evaluated_at, offset_lag, resolution FROM group_lag_history "
                "WHERE cluster = 'r' AND group_id = 'g' ORDER BY evaluated_at"
            )
        ).all()
        partition_rows = conn.execute(
            text("SELECT count(*) FROM lag_history WHERE cluster = 'r' AND group_id = 'g'")
        ).scalar_one()
    by_day = {(_day(at), resolution) for at, _, resolution in rows}
    assert by_day == (
        {(day, "1h") for day in DAY_LIST[:5]}
        | {(day, "15m") for day in DAY_LIST[5:7]}
        | {(day, "raw") for day in DAY_LIST[7:]}
    )
    per_day = 24 * 60 // 5
    assert len(rows) == 5 * 24 + 2 * 96 + 3 * per_day == partition_rows
    assert max(lag for _, lag, _ in rows) == max(e.offset_lag for e in ROWS)


def test_a_90_day_history_read_answers_from_the_rollups_with_the_raw_values(
    rolled: StoreService, engine: Engine
) -> None:
    with engine.connect() as conn:
        group = read_history.group_history(conn, "r", "g", NOW - timedelta(days=90), NOW, max_points=500)
        partition = read_history.partition_history(
            conn, "r", "g", "orders", 0, NOW - timedelta(days=90), NOW, max_points=500
        )
    assert group.points[0].evaluated_at.date() == DAY_LIST[0]
    assert group.points[-1].evaluated_at == ROWS[-1].at
    assert max(p.offset_lag or 0 for p in group.points) == max(e.offset_lag for e in ROWS)
    assert partition.points[-1].committed_offset == ROWS[-1].committed_offset
    # The oldest day, from hourly rows only, read in hours: each hour's raw worst lag.
    with engine.connect() as conn:
        hours = read_history.group_history(conn, "r", "g", NOW - timedelta(days=90), NOW, max_points=90 * 24)
    assert hours.step_seconds == 3600
    first_day = [
        (p.evaluated_at, p.offset_lag, p.status) for p in hours.points if p.evaluated_at.date() == DAY_LIST[0]
    ]
    expected = [b for b in rollups.buckets(ROWS, timedelta(hours=1)) if b.start.date() == DAY_LIST[0]]
    assert first_day == [(b.evaluated_at, b.offset_lag, b.status) for b in expected]


def test_maintenance_again_changes_nothing(rolled: StoreService, engine: Engine, db_url: str) -> None:
    tables = (
        "derived_group_15m",
        "derived_group_1h",
        "derived_group_partition_15m",
        "derived_group_partition_1h",
    )

    def counts() -> dict[str, int]:
        with engine.connect() as conn:
            return {
                t: conn.execute(text(f"SELECT count(*) FROM {t} WHERE cluster = 'r'")).scalar_one()
                for t in tables
            }

    before = counts()
    rolled.maintain()
    _instance_maintains(db_url, NOW + timedelta(hours=2))  # a second instance, later
    assert counts() == before


def test_the_api_and_the_group_page_show_90_days_even_of_a_group_only_rollups_remember(
    rolled: StoreService, engine: Engine
) -> None:
    app = create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(NOW))
    with TestClient(app) as client:
        answer = client.get("/api/v1/clusters/r/groups/g/history?window=90d")
        assert answer.status_code == 200, answer.text
        points = answer.json()["points"]
        assert points[0]["evaluated_at"].startswith(DAY_LIST[0].isoformat())
        assert max(p["offset_lag"] for p in points) == max(e.offset_lag for e in ROWS)
        old = client.get("/api/v1/clusters/r/groups/old/history?window=90d&max_points=2160")
        assert old.status_code == 200, old.text
        old_rows = [e for e in ROWS if e.at < START + timedelta(days=2)]
        assert [p["evaluated_at"][:13] for p in old.json()["points"]] == sorted(
            {e.at.isoformat()[:13] for e in old_rows}
        )
        page = client.get("/clusters/r/groups/g?window=90d")
        assert page.status_code == 200, page.text
        assert "90d" in page.text


def test_the_hours_of_today_are_rolled_up_as_they_complete_and_their_day_is_kept_raw(
    rolled: StoreService, engine: Engine, db_url: str
) -> None:
    today = NOW.date()  # day 10: its raw partitions exist (maintenance creates today's)
    midnight = datetime.combine(today, datetime.min.time(), tzinfo=UTC)
    first = midnight + timedelta(hours=4)  # after the hours the other tests' passes marked
    evaluations = rollups.evaluations(first, 1, EVERY)[: 4 * 12]  # 04:00 .. 07:55
    with engine.begin() as conn:
        rollups.write(conn, "h", "g", evaluations)

    def hours_of_h() -> list[datetime]:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT bucket FROM derived_group_1h WHERE cluster = 'h' ORDER BY 1"))
            return [b.astimezone(UTC) for b in rows.scalars()]

    _instance_maintains(db_url, first + timedelta(hours=2, minutes=5))
    assert hours_of_h() == [first]  # 05:00-06:00 is complete only 10 minutes after its end
    _instance_maintains(db_url, first + timedelta(hours=3, minutes=15))
    assert hours_of_h() == [first + timedelta(hours=n) for n in range(3)]
    with engine.connect() as conn:
        fine = [
            (b.astimezone(UTC), n)
            for b, n in conn.execute(
                text("SELECT bucket, samples FROM derived_group_15m WHERE cluster = 'h' ORDER BY 1")
            )
        ]
        raw = set(existing_partitions(conn, "derived_group"))
    assert fine == [(first + timedelta(minutes=15 * n), 3) for n in range(12)]
    assert partition_name("derived_group", today) in raw
    assert ("derived_group", today) not in _marks(engine)
    expected = [
        b for b in rollups.buckets(evaluations, timedelta(hours=1)) if b.start < first + timedelta(hours=3)
    ]
    with engine.connect() as conn:
        got = list(
            conn.execute(
                text(
                    "SELECT evaluated_at, samples, offset_lag, offset_lag_min, offset_lag_last, status"
                    " FROM derived_group_1h WHERE cluster = 'h' ORDER BY bucket"
                )
            )
        )
    assert [tuple(row) for row in got] == [
        (b.evaluated_at, b.samples, b.offset_lag, b.offset_lag_min, b.offset_lag_last, b.status)
        for b in expected
    ]
