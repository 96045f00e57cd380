"""`kafka-health status | lag | topic | alerts`: readable tables with the numbers that matter, JSON
for scripts, and errors that say what to type instead."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from sqlalchemy import Engine
from typer.testing import CliRunner

from monitor.cli import reports as cli_reports
from monitor.cli.main import app
from tests.fixtures.read_model import T0, T1, fill, insert


@pytest.fixture(scope="module")
def filled(engine: Engine) -> Engine:
    with engine.begin() as conn:
        fill(conn)
        # billing's lag objective in both evaluations: the report shows the newest's.
        insert(conn, "derived_lag_objective", [
            {"cluster": "prod", "objective": "ledger-fresh", "group_id": "billing", "evaluated_at": at,
             "lag_threshold_seconds": 60.0, "target": 99.5, "window_days": 28, "minute_bad": True,
             "burn_rate_5m": 12.5, "burn_rate_30m": 3.0, "burn_rate_1h": 2.25, "burn_rate_6h": 0.5,
             "burn_rate_3d": None, "bad_minutes": bad, "recorded_minutes": 1200, "budget_remaining": left,
             "compliance": 99.0}
            for at, bad, left in ((T0, 150, 0.25), (T1, 12, 0.9405))
        ])  # fmt: skip
    return engine


@pytest.fixture
def run(filled: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setattr(cli_reports, "out", Console(width=250, soft_wrap=True, no_color=True))
    return CliRunner()


def test_status_shows_each_cluster_worst_first(run: CliRunner) -> None:
    result = run.invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    prod = next(line for line in result.output.splitlines() if "prod" in line)
    assert "2 up, down: 3" in prod, "broker 3 is down"
    assert "1 critical, 2 warning" in prod, "open (pending or firing) findings, most severe first"
    assert "1 OK" in prod and "1 WARN" in prod, "groups per status"
    idle = next(line for line in result.output.splitlines() if "idle" in line)
    assert "not evaluated yet" in idle


def test_status_json_is_the_read_layers_records(run: CliRunner) -> None:
    result = run.invoke(app, ["status", "--json", "--cluster", "prod"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    [prod] = data["clusters"]
    assert prod["cluster"] == "prod" and prod["under_replicated_partitions"] == 2
    assert [b["broker_id"] for b in data["brokers"]["prod"] if not b["up"]] == [3]


def test_lag_of_a_group_per_partition(run: CliRunner) -> None:
    result = run.invoke(app, ["lag", "billing", "--lagging"])
    assert result.exit_code == 0, result.output
    assert "billing on prod: status WARN" in result.output
    assert (
        "lag 50 messages, 10 min" in result.output
        and "time until data loss 30 min (margin 29 min)" in result.output
    )
    rows = [line for line in result.output.splitlines() if line.startswith("│ orders")]
    assert len(rows) == 1 and "│ 150 " in rows[0] and "│ 200 " in rows[0], "only the lagging partition"
    assert "/10.0.0.1" in rows[0], "the member that owns orders/0"


def test_lag_shows_the_groups_objectives_with_budget_and_burn_rates(run: CliRunner) -> None:
    result = run.invoke(app, ["lag", "billing"])
    assert result.exit_code == 0, result.output
    assert "Lag objectives" in result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("│ ledger-fresh")]
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells == [
        "ledger-fresh (bad this minute)", "1 min", "99.5 %", "28 d", "12.5x", "3.0x", "2.2x", "0.5x", "-",
        "12 of 1,200", "99.00 %", "94.0 %",
    ], cells  # fmt: skip

    data = json.loads(run.invoke(app, ["lag", "billing", "--json"]).output)
    (objective,) = data["objectives"]
    assert objective["objective"] == "ledger-fresh" and objective["budget_remaining"] == 0.9405
    assert objective["burn_rate_1h"] == 2.25 and objective["burn_rate_3d"] is None
    others = json.loads(run.invoke(app, ["lag", "audit", "--json"]).output)
    assert others["objectives"] == [], "a group no objective matches has none"


def test_lag_json_and_unknown_group(run: CliRunner) -> None:
    data = json.loads(run.invoke(app, ["lag", "billing", "--json"]).output)
    assert data["group"]["offset_lag"] == 50 and len(data["partitions"]) == 4
    assert {m["member_id"] for m in data["members"]} == {"m1", "m2"}

    missing = run.invoke(app, ["lag", "nobody"])
    assert missing.exit_code == 2 and "no consumer group 'nobody' in any cluster" in missing.output
    wrong = run.invoke(app, ["lag", "billing", "--cluster", "staging"])
    assert wrong.exit_code == 2 and "no cluster 'staging'; known: " in wrong.output


def test_topic_report(run: CliRunner) -> None:
    result = run.invoke(app, ["topic", "orders"])
    assert result.exit_code == 0, result.output
    assert "orders on prod: 3 partition(s), RF 3" in result.output
    assert "retention.ms 7 d" in result.output
    partition0 = next(line for line in result.output.splitlines() if line.startswith("│ 0 "))
    assert "1,2,3" in partition0 and "│ 1,2 " in partition0, "replicas and the shrunk ISR"
    assert "30 min" in partition0, "time until data loss of the lagging group"
    assert "billing" in result.output and "WARN" in result.output

    data = json.loads(run.invoke(app, ["topic", "orders", "--json"]).output)
    assert data["topic"]["retention_bytes"] == 1_000_000
    assert [p["partition"] for p in data["partitions"]["items"]] == [0, 1, 2]


def test_alerts_alone_lists_open_alerts_as_json(run: CliRunner) -> None:
    result = run.invoke(app, ["alerts", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [], "no alert cycle has run on this database"
