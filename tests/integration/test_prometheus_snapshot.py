"""The `/metrics` snapshot over a real PostgreSQL: rebuilt when a new evaluation lands and only
then, still served (marked stale) while PostgreSQL is away or a query times out, gzip-encoded for
scrapers that ask, without the partition-level series of the clusters that switch them off, and
kept current by the scrapes themselves when no daemon job checks."""

from __future__ import annotations

import threading
import time
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Connection, Engine, event, text

from monitor.core.settings import MetricsConfig
from monitor.expose.metrics import snapshot as snapshot_module
from monitor.expose.metrics.catalogue import PARTITIONS
from monitor.expose.metrics.snapshot import MetricsSnapshot
from monitor.expose.web.app import create_app
from monitor.store.engine import make_engine
from monitor.store.fresh_lag import FreshLag
from monitor.store.partitions import ensure_partitions
from tests.conditions import wait_for
from tests.fixtures.postgres import table_locked

T1 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
T2 = T1 + timedelta(seconds=30)
LAG = "kafka_consumer_group_lag_in_offsets"
GROUP_LAG = "kafka_consumer_group_max_lag_in_offsets"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _evaluation(conn: Connection, cluster: str, at: datetime, lag: int) -> None:
    """One evaluation of `cluster`: group `billing` lags `lag` on partition 0 of `orders`, and the
    partition has 990 bytes of headroom under retention.bytes."""
    row = {"cluster": cluster, "at": at, "lag": lag}
    conn.execute(
        text("INSERT INTO derived_cluster (cluster, evaluated_at, brokers) VALUES (:cluster, :at, 3)"), row
    )
    conn.execute(
        text(
            "INSERT INTO derived_group_partition (cluster, evaluated_at, group_id, topic, partition, offset_lag)"
            " VALUES (:cluster, :at, 'billing', 'orders', 0, :lag)"
        ),
        row,
    )
    conn.execute(
        text(
            "INSERT INTO derived_group (cluster, evaluated_at, group_id, offset_lag, max_offset_lag)"
            " VALUES (:cluster, :at, 'billing', :lag, :lag)"
        ),
        row,
    )
    conn.execute(
        text(
            "INSERT INTO derived_partition (cluster, evaluated_at, topic, partition, size_bytes, retention_bytes)"
            " VALUES (:cluster, :at, 'orders', 0, 10, 1000)"
        ),
        row,
    )


@pytest.fixture(scope="module")
def filled(engine: Engine) -> Engine:
    with engine.begin() as conn:
        ensure_partitions(conn, T1, ahead_days=1)
        for cluster in ("big", "small"):
            conn.execute(
                text(
                    "INSERT INTO clusters (name, bootstrap, first_seen, last_seen) VALUES (:c, 'k:9092', :t, :t)"
                ),
                {"c": cluster, "t": T1},
            )
            _evaluation(conn, cluster, T1, 100)
    return engine


def parse(body: bytes) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def lag(samples: Samples, cluster: str) -> float:
    labels = {
        "cluster": cluster,
        "clustername": cluster,
        "group": "billing",
        "topic": "orders",
        "partition": "0",
    }
    return samples[LAG, frozenset(labels.items())]


def gauge(samples: Samples, name: str) -> float:
    return samples[name, frozenset()]


def test_a_new_evaluation_rebuilds_the_snapshot_and_nothing_else_does(filled: Engine) -> None:
    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig())
    first = snapshot.check()
    assert first is not None
    assert snapshot.check() is first, "no new evaluation: the same snapshot, not a rebuild"
    client = TestClient(create_app(filled, stale_after=timedelta(minutes=5), snapshot=snapshot))
    assert lag(parse(client.get("/metrics").content), "big") == 100

    with filled.begin() as conn:
        _evaluation(conn, "big", T2, 250)
    rebuilt = snapshot.check()
    assert rebuilt is not None and rebuilt is not first
    samples = parse(client.get("/metrics").content)
    assert lag(samples, "big") == 250
    assert lag(samples, "small") == 100
    assert gauge(samples, "kafka_health_up") == 1
    assert gauge(samples, "kafka_health_snapshot_failed") == 0
    assert 0 <= gauge(samples, "kafka_health_snapshot_age_seconds") < 60


def test_while_postgresql_is_away_the_last_good_snapshot_is_served_marked_stale(filled: Engine) -> None:
    closed = make_engine("postgresql+psycopg://nobody@127.0.0.1:9/none", check=False, connect_timeout=2)
    use = [filled]
    snapshot = MetricsSnapshot(lambda: use[0], MetricsConfig())
    client = TestClient(create_app(filled, stale_after=timedelta(minutes=5), snapshot=snapshot))
    good = parse(client.get("/metrics").content)
    assert gauge(good, "kafka_health_up") == 1
    try:
        use[0] = closed
        snapshot.check()
        response = client.get("/metrics")
    finally:
        closed.dispose()
    assert response.status_code == 200
    stale = parse(response.content)
    assert gauge(stale, "kafka_health_up") == 0
    assert gauge(stale, "kafka_health_snapshot_failed") == 1
    assert {v for (name, _), v in stale.items() if name == "kafka_health_scrape_error"} == {1}
    assert lag(stale, "big") == lag(good, "big"), "the last good snapshot is still served"
    assert gauge(stale, "kafka_health_snapshot_age_seconds") >= gauge(
        good, "kafka_health_snapshot_age_seconds"
    )

    use[0] = filled
    snapshot.check()
    again = parse(client.get("/metrics").content)
    assert gauge(again, "kafka_health_up") == 1
    assert gauge(again, "kafka_health_snapshot_failed") == 0


def test_a_scraper_that_accepts_gzip_gets_one_gzip_member_of_the_same_metrics(filled: Engine) -> None:
    client = TestClient(create_app(filled, stale_after=timedelta(minutes=5)))
    plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    with client.stream("GET", "/metrics", headers={"Accept-Encoding": "gzip"}) as answer:
        assert answer.headers["content-encoding"] == "gzip"
        raw = b"".join(answer.iter_raw())
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    body = inflate.decompress(raw)
    assert inflate.eof and inflate.unused_data == b"", "one complete gzip member"
    state = {key: v for key, v in parse(body).items() if key[0] in (LAG, GROUP_LAG)}
    assert state == {key: v for key, v in parse(plain.content).items() if key[0] in (LAG, GROUP_LAG)}
    assert state, "the state is in the gzip answer"
    assert b"python_info" in body, "and so are the process metrics"


def test_a_cluster_can_switch_its_partition_series_off(filled: Engine) -> None:
    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig(), partition_series_off=["big"])
    samples = parse(snapshot.body(gzip=False))
    partition_level = {LAG} | {spec.name for spec in PARTITIONS}
    clusters = {dict(labels)["cluster"] for name, labels in samples if name in partition_level}
    assert clusters == {"small"}
    group = {dict(labels)["cluster"]: v for (name, labels), v in samples.items() if name == GROUP_LAG}
    assert set(group) == {"big", "small"}, "the group series of both clusters stay"
    # small: one group-partition lag and one partition's headroom (and nothing of big)
    assert gauge(samples, "kafka_health_partition_series") == 2
    assert gauge(samples, "kafka_health_partition_series_dropped") == 0
    assert gauge(samples, "kafka_health_up") == 1


def test_a_build_where_a_query_times_out_keeps_the_complete_snapshot(
    filled: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_module, "PACED_FROM_SECONDS", 60.0)  # no rest after the 1 s timeout
    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig(build_timeout_seconds=1))
    before = parse(snapshot.body(gzip=False))
    with filled.begin() as conn:
        _evaluation(conn, "small", T2 + timedelta(seconds=30), 300)
    with table_locked(filled, "derived_group_partition"):
        snapshot.check()
        during = parse(snapshot.body(gzip=False))
    assert lag(during, "small") == lag(before, "small") == 100, "the complete snapshot is kept"
    assert gauge(during, "kafka_health_up") == 0
    assert gauge(during, "kafka_health_snapshot_failed") == 1
    assert during["kafka_health_scrape_error", frozenset({("query", "group_partition")})] == 1

    snapshot.check()
    after = parse(snapshot.body(gzip=False))
    assert lag(after, "small") == 300
    assert gauge(after, "kafka_health_up") == 1
    assert {v for (name, _), v in after.items() if name == "kafka_health_scrape_error"} == {0}


def test_a_first_scrape_waits_for_a_slow_build_only_so_long_and_the_build_goes_on(filled: Engine) -> None:
    """A build may take longer than a scrape may wait (a large fleet on a busy machine): the first
    scrape is answered after `scrape_timeout_seconds` without the state, and the build, bounded by
    `build_timeout_seconds` instead, ends and is served to a later scrape."""
    snapshot = MetricsSnapshot(
        lambda: filled, MetricsConfig(scrape_timeout_seconds=0.5, build_timeout_seconds=30)
    )
    with table_locked(filled, "derived_group_partition"):
        started = time.monotonic()
        first = parse(snapshot.body(gzip=False))
        waited = time.monotonic() - started
        building = snapshot._checker
        assert building is not None and building.is_alive(), "the build goes on after the scrape"
    assert waited < 5, f"the first scrape waited {waited:.1f} s"
    assert gauge(first, "kafka_health_up") == 0
    assert {v for (name, _), v in first.items() if name == "kafka_health_scrape_error"} == {1}
    assert not any(name == LAG for name, _ in first), "no state before the first snapshot"
    building.join(30)
    after = parse(snapshot.body(gzip=False))
    assert gauge(after, "kafka_health_up") == 1, "the slow build completed: nothing timed out"
    assert lag(after, "big") >= 100


def test_without_the_daemon_job_scrapes_start_the_checks_and_never_wait_for_them(filled: Engine) -> None:
    """A web app on its own (no scheduler): a scrape after `snapshot_check_seconds` starts a check
    in the background and is answered from the snapshot it has; a later scrape shows the build."""
    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig(snapshot_check_seconds=0.2))
    client = TestClient(create_app(filled, stale_after=timedelta(minutes=5), snapshot=snapshot))
    assert snapshot.current is None
    built = parse(client.get("/metrics").content)
    assert gauge(built, "kafka_health_up") == 1
    with filled.begin() as conn:
        _evaluation(conn, "big", T2 + timedelta(minutes=5), 777)
    wait_for(lambda: lag(parse(client.get("/metrics").content), "big") == 777, timeout=20,
             what="a scrape to start the rebuild and a later one to serve it")  # fmt: skip


def test_the_offset_lag_is_read_fresh_when_a_scrape_asks_and_not_on_the_timer(
    filled: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's checks read no fresh offset lag (nothing may scrape); a scrape reads it, and
    the scrapes of the next `FRESH_FOR_SECONDS` (a minute here) are served that read, until a
    build."""
    monkeypatch.setattr(snapshot_module, "FRESH_FOR_SECONDS", 60.0)
    fresh_reads: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        # the commits since: in the observations, or each group-partition's newest after a build
        if (
            "SELECT DISTINCT c.name AS cluster, o.group_id" in statement
            or "FROM latest_commits l" in statement
        ):
            fresh_reads.append(statement)

    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig())
    event.listen(filled, "before_cursor_execute", count)
    try:
        for _ in range(3):
            assert snapshot.check() is not None
        assert fresh_reads == [], "a check reads the evaluations, not the commits"
        client = TestClient(create_app(filled, stale_after=timedelta(minutes=5), snapshot=snapshot))
        for _ in range(3):
            assert lag(parse(client.get("/metrics").content), "big") >= 100
        assert len(fresh_reads) == 1, "one fresh read serves the scrapes after it"
        assert snapshot.families() is not None
        with filled.begin() as conn:
            _evaluation(conn, "small", T2 + timedelta(minutes=9), 120)
        assert snapshot.check() is not None
        assert lag(parse(client.get("/metrics").content), "small") == 120
        assert len(fresh_reads) == 2, "after a build, the next scrape reads again"
    finally:
        event.remove(filled, "before_cursor_execute", count)


def test_a_scrape_waits_for_a_slow_fresh_read_only_so_long_and_the_next_one_gets_it(
    filled: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh read that takes longer than `FRESH_WAIT_SECONDS` (a large fleet's commits) does not
    hold the scrape: it is served the lag it had, and a later scrape the read's."""
    monkeypatch.setattr(snapshot_module, "FRESH_WAIT_SECONDS", 0.2)
    release = threading.Event()
    at = datetime.now(UTC)

    def slow_lags(
        _conn: Connection, cluster: str, groups: list[str]
    ) -> dict[str, dict[tuple[str, int], FreshLag]]:
        assert release.wait(60), "the test let the read end"
        return {"billing": {("orders", 0): FreshLag(3, 10, 7, at, at, at)}} if cluster == "big" else {}

    monkeypatch.setattr(snapshot_module, "changed_since", lambda _conn, _since, **_: {"big": ["billing"]})
    monkeypatch.setattr(snapshot_module, "groups_lags", slow_lags)
    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig())
    client = TestClient(create_app(filled, stale_after=timedelta(minutes=5), snapshot=snapshot))
    try:
        served = lag(parse(client.get("/metrics").content), "big")
        reader = snapshot._fresh_reader
        assert reader is not None and reader.is_alive(), "answered while the read goes on"
        assert served != 7, "the read had not ended: the evaluation's lag is served"
        assert lag(parse(client.get("/metrics").content), "big") == served, "still reading"
    finally:
        release.set()
    wait_for(lambda: lag(parse(client.get("/metrics").content), "big") == 7, timeout=20,
             what="a later scrape to be served the read's lag")  # fmt: skip


class _Shifted:
    """`time` as the snapshot module reads it, `shift` seconds ahead."""

    def __init__(self) -> None:
        self.shift = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.shift


def test_after_a_long_build_a_new_snapshot_waits_for_the_rest(
    filled: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that takes long (about 10 s at 100,000 group-partitions) is followed by a rest of
    `BUILD_REST` times as long before the next one, however often the state changes (before its
    first evaluation, each offsets run of a cluster is a new snapshot); quick builds are not
    (the other tests). Last in this module: the evaluation it adds is the newest."""
    monkeypatch.setattr(snapshot_module, "BUILD_REST", 100_000.0)
    monkeypatch.setattr(snapshot_module, "PACED_FROM_SECONDS", 0.0)  # (a build of milliseconds here)
    clock = _Shifted()
    monkeypatch.setattr(snapshot_module, "time", clock)
    snapshot = MetricsSnapshot(lambda: filled, MetricsConfig())
    first = snapshot.check()
    assert first is not None, "no snapshot yet: built at once"
    with filled.begin() as conn:
        _evaluation(conn, "small", T2 + timedelta(minutes=20), 555)
    assert snapshot.check() is first, "resting: the build took 100,000 times less than the rest"
    clock.shift = 100_000 * 100.0  # (the check and build took less than 100 s)
    rebuilt = snapshot.check()
    assert rebuilt is not None and rebuilt is not first
    assert lag(parse(rebuilt.text), "small") == 555
