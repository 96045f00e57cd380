"""A finding is never dated before the run whose samples showed its condition, whatever the
evaluation's clock falls on: a run writes its samples before its row is finished, and the tables
of latest values (brokers, partitions) are read as they are when the evaluation reads them, after
its clock. Dated from the run before, a `for: 1m` on a broker stopped would elapse an interval
early (a detection benchmark saw BrokerDown fire 52 s after the stop)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from monitor.evaluate.observed import dated
from monitor.store.findings import Match, merge_findings
from monitor.store.metadata import finish_run, insert_finished_run, start_run
from monitor.store.runs import newest_begun
from tests.fixtures.rules import default_ruleset

T = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
DOWN = default_ruleset().by_name()["BrokerDown"]
CLUSTER = "observed"


def _clear(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM collection_runs WHERE cluster = :c"), {"c": CLUSTER})
        conn.execute(text("DELETE FROM findings WHERE cluster = :c"), {"c": CLUSTER})


def _ran(engine: Engine, job: str, started: datetime, seconds: float, status: str = "ok") -> None:
    with engine.begin() as conn:
        insert_finished_run(
            conn, cluster=CLUSTER, job=job, instance="test", started_at=started,
            finished_at=started + timedelta(seconds=seconds), duration_ms=int(seconds * 1000),
            status=status, counts={}, error=None,
        )  # fmt: skip


def _running(engine: Engine, job: str, started: datetime) -> int:
    with engine.begin() as conn:
        return start_run(conn, CLUSTER, job, "test", started)


def _first_seen(engine: Engine, at: datetime, read_by: datetime) -> tuple[datetime, str]:
    """Evaluate a broker found down at `at`, the reads ending at `read_by`: its finding's
    first_seen and state."""
    found = Match(DOWN.name, DOWN.entity, "3", CLUSTER, "critical", 1.0, "s", "d", DOWN.for_seconds)
    with engine.begin() as conn:
        merge_findings(
            conn,
            dated(conn, [found], [DOWN], [CLUSTER], at, WINDOW, read_by=read_by),
            at,
            clusters=[CLUSTER],
            rules=[DOWN.name],
            read_by=read_by,
        )
        row = conn.execute(
            text("SELECT first_seen, state FROM findings WHERE cluster = :c AND state <> 'resolved'"),
            {"c": CLUSTER},
        ).one()
    return row.first_seen, row.state


def test_a_metadata_run_still_going_at_the_clock_dates_what_it_wrote(engine: Engine) -> None:
    """The run before showed the broker up; the run under way at the clock wrote its absence and
    is still waiting on the stopped broker's requests: the finding counts from that run."""
    _clear(engine)
    _ran(engine, "metadata", T - timedelta(seconds=15), 0.1)
    _ran(engine, "log_dirs", T - timedelta(seconds=8), 0.2)  # finished later; not a deciding job
    under_way = T - timedelta(seconds=4)
    _running(engine, "metadata", under_way)

    assert _first_seen(engine, T, T + timedelta(seconds=2)) == (under_way, "pending")


def test_a_run_begun_while_the_evaluation_read_dates_it_to_that_start(engine: Engine) -> None:
    """A run that started after the clock, while the evaluation was still reading (and has since
    finished): its samples may be what showed the condition. The finding is not dated before it,
    though that is after the evaluation's clock; runs begun after the reads ended, and failed
    runs, which wrote nothing, do not count."""
    _clear(engine)
    _ran(engine, "metadata", T - timedelta(seconds=15), 0.1)
    during = T + timedelta(seconds=1)
    _ran(engine, "metadata", during, 0.1)
    _ran(engine, "metadata", T + timedelta(seconds=1.5), 0.1, status="failed")
    _running(engine, "metadata", T + timedelta(seconds=3))

    first_seen, state = _first_seen(engine, T, T + timedelta(seconds=2))

    assert (first_seen, state) == (during, "pending")


def test_the_newest_begun_run_per_job_skips_failed_and_finished_by_the_clock_still_count(
    engine: Engine,
) -> None:
    _clear(engine)
    _ran(engine, "metadata", T - timedelta(seconds=30), 0.1)
    _ran(engine, "metadata", T - timedelta(seconds=15), 0.1, status="partial")
    _ran(engine, "metadata", T - timedelta(seconds=5), 0.1, status="failed")
    _ran(engine, "offsets", T - timedelta(seconds=20), 0.1, status="skipped")
    probe = _running(engine, "probe", T - timedelta(seconds=2))
    _running(engine, "log_dirs", T - WINDOW - timedelta(seconds=1))  # died before the window
    jobs = ("metadata", "offsets", "probe", "log_dirs")

    with engine.begin() as conn:
        begun = newest_begun(conn, [CLUSTER], jobs, T, T - WINDOW)
        finish_run(
            conn, probe, finished_at=T, duration_ms=2000, status="failed", counts={}, error="gone"
        )  # fmt: skip
        after = newest_begun(conn, [CLUSTER], jobs, T, T - WINDOW)

    assert begun == {
        (CLUSTER, "metadata"): T - timedelta(seconds=15),
        (CLUSTER, "probe"): T - timedelta(seconds=2),
    }
    assert after == {(CLUSTER, "metadata"): T - timedelta(seconds=15)}, "failed: it wrote nothing"


def test_without_runs_the_evaluation_time_stands_and_a_later_run_cannot_fire_early(engine: Engine) -> None:
    """A finding seen first at T, dated by a run begun while reading (T + 1 s): the `for` counts
    from there, and a minute of metadata runs after T does not make it fire, one after T + 61 s
    does."""
    _clear(engine)
    _running(engine, "metadata", T + timedelta(seconds=1))
    assert _first_seen(engine, T, T + timedelta(seconds=2)) == (T + timedelta(seconds=1), "pending")
    at = T
    for _ in range(4):
        at += timedelta(seconds=15)
        _ran(engine, "metadata", at, 0.5)
    assert _first_seen(engine, at + timedelta(seconds=0.6), at + timedelta(seconds=1))[1] == "pending"
    _ran(engine, "metadata", at + timedelta(seconds=1.5), 0.1)
    assert _first_seen(engine, at + timedelta(seconds=2), at + timedelta(seconds=3))[1] == "firing"
