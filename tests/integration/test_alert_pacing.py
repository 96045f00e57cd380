"""The alert stage's cycles rest after a long one (twice as long as it took) unless an evaluation
changed the findings meanwhile: at 100,000 open findings a cycle took longer than the interval,
and cycles ran back to back on a core (monitor.alert.stage.CYCLE_REST)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from monitor.alert import stage as stage_module
from monitor.alert.cycle import run_cycle
from monitor.alert.stage import AlertStage
from monitor.core.clock import FakeClock
from monitor.core.scheduler import Scheduler
from monitor.core.settings import AlertConfig, WebConfig
from monitor.store.findings import Match, merge_findings

NOW = datetime(2031, 5, 1, 12, tzinfo=UTC)
CYCLE_SECONDS = 10.0


@pytest.fixture
def stage(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[AlertStage, FakeClock]]:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM collection_runs WHERE job = 'alert'"))
        conn.execute(  # the cluster as its collector registers it
            text(
                "INSERT INTO clusters (name, bootstrap, first_seen, last_seen)"
                " VALUES ('c1', '127.0.0.1:9092', :t, :t) ON CONFLICT DO NOTHING"
            ),
            {"t": NOW},
        )
    routing = tmp_path / "routing.yaml"
    routing.write_text(
        f"receivers:\n  - name: file\n    console:\n      path: {tmp_path / 'alerts.jsonl'}\n"
        "route:\n  receiver: file\n"
    )
    clock = FakeClock(NOW)

    def slow_cycle(conn: Connection, *args: Any) -> Any:
        clock.advance(CYCLE_SECONDS)  # a cycle over a hundred thousand alerts
        return run_cycle(conn, *args)

    monkeypatch.setattr(stage_module, "run_cycle", slow_cycle)
    scheduler = Scheduler(max_workers=1)  # not started: the test runs the cycles
    alert = AlertStage(
        AlertConfig(routing_file=routing, owners_file=None), WebConfig(), lambda: engine, clock, scheduler
    )
    alert.start()
    try:
        yield alert, clock
    finally:
        alert.stop()


def cycles(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(text("SELECT count(*) FROM collection_runs WHERE job = 'alert'")).scalar_one()
        )


def evaluate(engine: Engine, at: datetime) -> None:
    match = Match(
        "R", "partition", "c1/t/0", "c1", "warning", 1.0, "s", "d", 60, {"topic": "t", "partition": "0"}
    )
    with engine.begin() as conn:
        merge_findings(conn, [match], at, clusters=["c1"], rules=["R"])


def test_a_long_cycle_rests_twice_its_time_unless_the_findings_changed(
    engine: Engine, stage: tuple[AlertStage, FakeClock]
) -> None:
    alert, clock = stage
    alert.cycle()
    assert cycles(engine) == 1

    clock.advance(5)
    alert.cycle()  # 5 s after a 10 s cycle: resting
    assert cycles(engine) == 1

    evaluate(engine, clock.now())
    alert.cycle()  # new findings are never held back
    assert cycles(engine) == 2

    clock.advance(2 * CYCLE_SECONDS - 1)
    alert.cycle()
    assert cycles(engine) == 2
    clock.advance(1)
    alert.cycle()
    assert cycles(engine) == 3


def test_quick_cycles_run_at_every_tick(
    engine: Engine, stage: tuple[AlertStage, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    alert, clock = stage
    monkeypatch.setattr(stage_module, "run_cycle", run_cycle)  # milliseconds, as with few alerts
    for tick in range(3):
        alert.cycle()
        clock.advance(10)
        assert cycles(engine) == tick + 1
