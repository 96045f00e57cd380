"""Lag objectives: the file's checking (each mistake named with its line and fix) and the
arithmetic of error budgets and burn rates (DOMAIN.md section 8)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from monitor.app import check_operator_files
from monitor.cli.main import app
from monitor.core.derived import ENTITIES, LAG_OBJECTIVE
from monitor.core.errors import ConfigError
from monitor.core.objectives import (
    BURN_ALERTS,
    BURN_WINDOWS,
    Objective,
    budget_fraction,
    budget_remaining,
    burn_rate,
    default_objectives_path,
    load_objectives,
    matching_groups,
)
from monitor.core.settings import load_settings

pytestmark = pytest.mark.unit


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "objectives.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_file_is_valid_and_names_an_example_group() -> None:
    (example,) = load_objectives(default_objectives_path())
    assert example.group.startswith("example-")
    assert (example.lag_seconds, example.target, example.window_days) == (60, 99.5, 28)


def test_an_objective_defaults_to_every_cluster_and_28_days(tmp_path: Path) -> None:
    (objective,) = load_objectives(
        _file(tmp_path, "objectives:\n  - {name: ledger, group: ledger, lag_seconds: 30, target: 99}\n")
    )
    assert (objective.cluster, objective.window_days, objective.window.days) == (".*", 28, 28)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("objectives:\n  - {name: 'a b', group: g, lag_seconds: 1, target: 99}\n", "line 2: objectives.0.name"),
        ("objectives:\n  - {name: a, group: '(x', lag_seconds: 1, target: 99}\n", "invalid regular expression"),
        ("objectives:\n  - {name: a, group: '(a)\\1', lag_seconds: 1, target: 99}\n", "RE2"),
        (f"objectives:\n  - {{name: a, group: '{'x' * 201}', lag_seconds: 1, target: 99}}\n", "at most 200"),
        ("objectives:\n  - {name: a, group: g, lag_seconds: 0, target: 99}\n", "lag_seconds: Input should be greater than 0"),
        ("objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 100}\n", "target: Input should be less than 100"),
        ("objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 0}\n", "target: Input should be greater than 0"),
        ("objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 99, window_days: 0}\n", "window_days"),
        ("objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 99, windows: 3}\n", "unknown key"),
        ("objectives:\n  - {name: a, lag_seconds: 1, target: 99}\n", "objectives.0.group"),
        (
            "objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 99}\n"
            "  - {name: a, group: h, lag_seconds: 1, target: 99}\n",
            "line 3: objectives.1.name: duplicate objective 'a', already defined on line 2",
        ),
        ("- a\n", "must hold a mapping with an `objectives:` list"),
    ],
)  # fmt: skip
def test_each_mistake_is_named_with_its_line_and_fix(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_objectives(_file(tmp_path, text))
    assert any(expected in problem for problem in raised.value.problems), raised.value.problems


def test_rules_objectives_checks_a_file_from_the_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(app, ["rules", "objectives", str(default_objectives_path())])
    assert good.exit_code == 0, good.output
    assert "OK (1 objective(s))" in good.output
    bad = _file(tmp_path, "objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 101}\n")
    failed = runner.invoke(app, ["rules", "objectives", str(bad)])
    assert failed.exit_code == 2
    assert "line 2: objectives.0.target" in failed.output


def test_the_budget_is_the_complement_of_the_target() -> None:
    assert budget_fraction(99.5) == pytest.approx(0.005)
    # 28 days of minutes at 99.5 %: 201.6 bad minutes allowed; 100.8 spent leaves half.
    assert budget_remaining(100, 28 * 1440, 99.5) == pytest.approx(1 - 100 / 201.6)
    assert budget_remaining(0, 28 * 1440, 99.5) == 1.0
    assert budget_remaining(403, 28 * 1440, 99.5) < -0.99


@pytest.mark.parametrize(
    ("bad", "minutes", "target", "expected"),
    [
        (0, 60, 99.5, 0.0),
        (60, 60, 99.5, 200.0),
        (3, 60, 99.5, 10.0),  # 5 % bad against a 0.5 % budget
        (1, 5, 99.0, 20.0),
        (0, 0, 99.5, None),  # nothing recorded: unknown, not zero
    ],
)
def test_the_burn_rate_is_the_bad_fraction_over_the_budget(
    bad: int, minutes: int, target: float, expected: float | None
) -> None:
    rate = burn_rate(bad, minutes, target)
    assert rate == (pytest.approx(expected) if expected is not None else None)


def test_the_alerts_pair_the_windows_of_the_common_practice() -> None:
    windows = {w.column: w.length.total_seconds() for w in BURN_WINDOWS}
    pairs = {(a.rule, windows[a.long], windows[a.short], a.factor) for a in BURN_ALERTS}
    assert pairs == {
        ("LagObjectiveFastBurn", 3600, 300, 14.4),
        ("LagObjectiveFastBurn", 6 * 3600, 1800, 6.0),
        ("LagObjectiveSlowBurn", 3 * 86400, 6 * 3600, 1.0),
    }


def test_the_shipped_rules_spell_the_windows_and_factors_of_the_alerts() -> None:
    shipped = yaml.safe_load((default_objectives_path().parent / "lag_objectives.yaml").read_text())
    rules = {rule["name"]: rule for rule in shipped["rules"]}
    for alert in BURN_ALERTS:
        rule = rules[alert.rule]
        assert f"{alert.long} >= {alert.factor:g}" in rule["condition"], (alert, rule["condition"])
        assert f"{alert.short} >= {alert.factor:g}" in rule["condition"], (alert, rule["condition"])
        assert [tier["severity"] for tier in rule["severities"]] == [alert.severity]
    assert rules["LagObjectiveFastBurn"]["labels"]["page"] == "true"
    assert rules["LagObjectiveSlowBurn"]["labels"]["page"] == "false"


def test_every_burn_window_is_a_column_of_the_entity() -> None:
    names = [c.name for c in LAG_OBJECTIVE]
    assert [w.column for w in BURN_WINDOWS] == [n for n in names if n.startswith("burn_rate_")]


def test_the_cluster_entity_stays_the_last_one_written() -> None:
    # An evaluation publishes its derived_cluster row after every other entity's rows
    # (monitor.store.versions): the objectives come before it.
    assert list(ENTITIES)[-1] == "cluster"
    assert list(ENTITIES).index("lag_objective") < list(ENTITIES).index("cluster")


def test_the_daemon_refuses_a_bad_objectives_file_before_it_starts(tmp_path: Path) -> None:
    objectives = _file(tmp_path, "objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 100}\n")
    config = tmp_path / "monitor.yaml"
    config.write_text(
        "clusters:\n  - name: c\n    bootstrap_servers: ['127.0.0.1:9']\n"
        f"evaluate:\n  objectives_file: {objectives}\n"
    )
    with pytest.raises(ConfigError) as caught:
        check_operator_files(load_settings(config))
    assert f"{objectives}: line 2: objectives.0.target: Input should be less than 100" in caught.value.lines()
    objectives.write_text("objectives:\n  - {name: a, group: g, lag_seconds: 1, target: 99.9}\n")
    check_operator_files(load_settings(config))


def test_an_objective_applies_to_the_groups_its_patterns_match_whole() -> None:
    objectives = [
        Objective("billing", "billing-.*", "prod-.*", 60, 99.5, 28),
        Objective("one", "orders", ".*", 30, 99, 7),
    ]
    groups = [("prod-eu", "billing-eu"), ("prod-eu", "billing"), ("dev", "billing-x"), ("dev", "orders"),
              ("prod-us", "orders-replay"), ("prod-us", "billing-\nline")]  # fmt: skip
    assert matching_groups(objectives, groups) == [
        ("billing", "prod-eu", "billing-eu"),
        ("one", "dev", "orders"),
        ("billing", "prod-us", "billing-\nline"),
    ]


@pytest.mark.timeout(10)
def test_a_pattern_that_backtracks_in_other_engines_is_matched_at_once() -> None:
    """`(a+)+b` against a run of n `a`s takes a backtracking engine (Java's, which Spark's RLIKE
    uses) about 2**n steps: with 100 of them, for ever. RE2 takes one pass."""
    hostile = Objective("hostile", "(a+)+b", ".*", 60, 99, 28)
    groups = [("c", "a" * 100), ("c", "a" * 99 + "b")]
    assert matching_groups([hostile], groups) == [("hostile", "c", "a" * 99 + "b")]
