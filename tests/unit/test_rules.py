"""Alert rules without Spark: the default pack is valid, every kind of mistake is reported with
its file and line, a bad file never stops the others, and `kafka-health rules` says so."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.core.vocabulary import format_duration, parse_duration
from monitor.evaluate.engine import render
from monitor.evaluate.rules import TEMPLATE_FILTERS, Rule, default_rule_paths, load_rules
from tests.fixtures.rules import LAG_RULE

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

GOOD = LAG_RULE


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def rule_file(directory: Path, file_name: str, /, **changes: str) -> Path:
    """GOOD with some lines replaced: {key: new text of the line holding `key:`}."""
    lines = GOOD.splitlines()
    for key, new in changes.items():
        index = next(
            i for i, line in enumerate(lines) if line.strip().removeprefix("- ").startswith(f"{key}:")
        )
        lines[index] = new
    return write(directory, file_name, "\n".join(lines) + "\n")


def problems(path: Path) -> list[str]:
    ruleset = load_rules([path])
    assert len(ruleset.errors) == 1, ruleset.errors
    assert ruleset.errors[0].source == str(path)
    return ruleset.errors[0].problems


# ---------------------------------------------------------------------------------------------
# The default pack


def test_default_pack_is_valid_and_covers_day_one() -> None:
    paths = default_rule_paths(ROOT)
    assert [p.name for p in paths] == [
        "cluster.yaml", "lag.yaml", "lag_objectives.yaml", "probe.yaml", "replication.yaml", "retention.yaml",
        "share.yaml",
    ]  # fmt: skip
    ruleset = load_rules(paths)
    assert ruleset.ok, [e.problems for e in ruleset.errors]
    names = set(ruleset.by_name())
    assert {
        "ConsumerAppendLag", "ConsumerLagSeconds", "ConsumerCommitLag", "ConsumerGroupStatus",
        "ConsumerGroupNoMembers", "TimeUntilDataLoss", "DataLossOccurred", "RetentionShortfall",
        "PartitionNearRetentionBytes", "BrokerDiskHeadroom", "PartitionReplicaLost",
        "PartitionReplicasLost", "PartitionUnderMinIsr", "PartitionOffline", "LeaderImbalance",
        "NonPreferredLeaders", "ReplicasSharingRack", "BrokerDown", "ClusterUnreachable",
        "ProbeFailing", "ProbeSlow", "ShareGroupLag", "ShareGroupNoMembers", "ShareGroupStalled",
        "LagObjectiveFastBurn", "LagObjectiveSlowBurn",
    } <= names  # fmt: skip
    rules = ruleset.by_name()
    assert [t.severity for t in rules["ProbeFailing"].severities] == ["critical"]
    assert [t.severity for t in rules["ProbeSlow"].severities] == ["warning"]
    assert rules["PartitionReplicaLost"].labels["page"] == "false"
    for name in ("PartitionReplicasLost", "PartitionUnderMinIsr", "PartitionOffline"):
        assert rules[name].labels["page"] == "true"
        assert [t.severity for t in rules[name].severities] == ["critical"]


def test_routing_owner_and_policy_files_are_not_rule_files(tmp_path: Path) -> None:
    (tmp_path / "alert_rules").mkdir()
    for name in ("routing.yaml", "owners.yaml", "retention-policy.yaml", "objectives.yaml"):
        write(tmp_path / "alert_rules", name, "route: {}\n")
    rule_file(tmp_path / "alert_rules", "lag.yaml")
    assert [p.name for p in default_rule_paths(tmp_path)] == ["lag.yaml"]
    assert load_rules([tmp_path / "alert_rules"]).ok


# ---------------------------------------------------------------------------------------------
# Each kind of mistake, with its file and line


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # 1 unknown column, with the close ones
        ({"condition": "    condition: ofset_lag > 0"},
         "line 5: rules.0.condition: unknown column 'ofset_lag' for entity group_topic; did you mean offset_lag?"),
        # 2 a column of another entity
        ({"when": "        when: size_ratio > 0.9"},
         "line 10: rules.0.severities.0.when: unknown column 'size_ratio' for entity group_topic"),
        # 3 SQL that does not parse
        ({"condition": "    condition: offset_lag >"}, "line 5: rules.0.condition: not valid Spark SQL at column"),
        # 4 two words without an operator
        ({"when": "        when: append_lag_seconds > 300 critical"},
         "line 10: rules.0.severities.0.when: unexpected word after an expression"),
        # 5 a statement, not an expression
        ({"value": "    value: offset_lag; DROP TABLE findings"}, "line 6: rules.0.value: must be exactly one"),
        # 6 an aggregate
        ({"value": "    value: max(offset_lag)"}, "line 6: rules.0.value: aggregate and window functions"),
        # 7 a condition that is not true/false
        ({"condition": "    condition: offset_lag"}, "line 5: rules.0.condition: must be true or false"),
        # 8 a value that is not a number
        ({"value": "    value: status"}, "line 6: rules.0.value: must be a number"),
        # 9 unknown key
        ({"for": "    fro: 5m"}, "line 7: rules.0.fro: unknown key under rules.0"),
        # 10 bad duration
        ({"for": "    for: 5 minutes"}, "line 7: rules.0.for: bad duration '5 minutes'"),
        # 11 a number without a unit
        ({"for": "    for: 300"}, "line 7: rules.0.for: bad duration 300: add a unit, e.g. 300s or 300m"),
        # 12 unknown entity
        ({"entity": "    entity: groups"}, "line 4: rules.0.entity: unknown entity 'groups'; did you mean 'group'?"),
        # 13 unknown severity
        ({"severity": "      - severity: page"}, "line 9: rules.0.severities.0.severity: Input should be"),
        # 14 template variable that is not a column, value, severity or cluster
        ({"summary": '    summary: "{{ group_id }} lags {{ lag }}"'},
         "line 11: rules.0.summary: unknown template variable 'lag'; did you mean"),
        # 15 template that does not parse
        ({"summary": '    summary: "{{ group_id "'}, "line 11: rules.0.summary: template does not parse"),
        # 16 unknown filter
        ({"summary": '    summary: "{{ value | minutes }}"'}, "No filter named 'minutes'"),
        # 17 bad name
        ({"name": "  - name: lag high"}, "line 2: rules.0.name: rule name 'lag high' must be CamelCase or snake_case"),
        # 18 a label that is not text
        ({"summary": '    summary: "x"\n    labels: {page: true}'},
         'line 12: rules.0.labels: label page: true is not text; quote it: page: "true"'),
        # 19 a label the engine sets
        ({"summary": '    summary: "x"\n    labels: {topic: orders}'},
         "rules.0.labels: labels topic are key columns of group_topic"),
        # 20 runbook not a URL
        ({"summary": '    summary: "x"\n    runbook: wiki/lag'}, "rules.0.runbook: runbook renders to 'wiki/lag', which is not an http(s) URL"),
    ],
)  # fmt: skip
def test_each_mistake_names_the_line(tmp_path: Path, change: dict[str, str], expected: str) -> None:
    path = rule_file(tmp_path, "rules.yaml", **change)
    found = problems(path)
    assert any(expected in p for p in found), found
    assert load_rules([path]).rules == ()


def test_missing_key_points_at_the_rule(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yaml", GOOD.replace("    description: lag is high\n", ""))
    assert problems(path) == ["line 2: rules.0.description: required key is missing; add it"]


def test_all_problems_of_a_rule_at_once_in_line_order(tmp_path: Path) -> None:
    path = rule_file(tmp_path, "r.yaml", condition="    condition: ofset_lag > 0", **{"for": "    for: soon"})
    found = problems(path)
    assert [p.split(":")[0] for p in found] == ["line 5", "line 7"]


def test_duplicate_names_across_two_files_name_both_places(tmp_path: Path) -> None:
    first = rule_file(tmp_path, "a.yaml")
    second = write(tmp_path, "b.yaml", "# another team's copy\n" + GOOD)
    ruleset = load_rules([first, second])
    assert [r.name for r in ruleset.rules] == ["LagHigh"]
    [error] = ruleset.errors
    assert error.source == str(second)
    assert error.problems == [
        f"line 3: rules.0.name: duplicate rule name 'LagHigh', already defined in {first} line 2; rename one"
    ]


def test_not_a_rule_file(tmp_path: Path) -> None:
    assert problems(write(tmp_path, "a.yaml", "rules: 3\n"))[0].startswith("a rule file must hold")
    assert problems(write(tmp_path, "b.yaml", "rules: [\n"))[0].startswith("not valid YAML")
    assert "appears twice" in problems(write(tmp_path, "c.yaml", GOOD + "rules: []\n"))[0]
    assert "cannot read" in problems(tmp_path / "missing.yaml")[0]


def test_a_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    bad = write(tmp_path, "a.yaml", "rules: [\n")
    mixed = write(
        tmp_path,
        "b.yaml",
        GOOD + GOOD.removeprefix("rules:\n").replace("LagHigh", "LagBroken").replace("for: 5m", "for: 5"),
    )
    good = write(tmp_path, "c.yaml", GOOD.replace("LagHigh", "LagOther"))
    ruleset = load_rules([bad, mixed, good])
    # the valid rules of every file are loaded, including the valid rule of a file with a bad one
    assert [r.name for r in ruleset.rules] == ["LagHigh", "LagOther"]
    assert [e.source for e in ruleset.errors] == [str(bad), str(mixed)]
    assert not ruleset.ok
    assert ruleset.problems[-1] == f"{mixed}: line 17: rules.1.for: bad duration 5: add a unit, e.g. 5s or 5m"


# ---------------------------------------------------------------------------------------------
# Durations, filters and rendering without Spark


@pytest.mark.parametrize(
    ("text", "seconds", "canonical"),
    [("0", 0, "0s"), ("30s", 30, "30s"), ("5m", 300, "5m"), ("2h", 7200, "2h"), ("1h30m", 5400, "1h30m"),
     ("1d", 86400, "1d")],
)  # fmt: skip
def test_durations(text: str, seconds: int, canonical: str) -> None:
    assert parse_duration(text) == seconds
    assert format_duration(seconds) == canonical


@pytest.mark.parametrize("text", ["5", "5 m", "m", "", "-5m", "5min", "1.5h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [("duration", 2520, "42 min"), ("duration", 45.4, "45 s"), ("duration", 7500, "2 h 5 min"),
     ("duration", 3600, "1 h"), ("duration", 273600, "3 d 4 h"), ("duration", None, "unknown"),
     ("percent", 0.913, "91%"), ("bytes", 1288490188, "1.2 GiB"), ("bytes", 512, "512 B"),
     ("number", 1234567, "1,234,567")],
)  # fmt: skip
def test_filters_round_for_humans(name: str, value: float | None, text: str) -> None:
    assert TEMPLATE_FILTERS[name](value) == text


def _rule(**changes: object) -> Rule:
    data: dict[str, object] = {
        "name": "Lag",
        "description": "the group lags",
        "entity": "group_partition",
        "value": "lag_seconds",
        "severities": [{"severity": "warning"}],
        "summary": "Group {{ group_id }} is {{ value | duration }} behind on {{ topic }} (partition {{ partition }})",
        **changes,
    }
    return Rule.model_validate(data)


def test_render_from_plain_columns_and_the_static_description() -> None:
    row = {"cluster": "prod", "group_id": "billing", "topic": "orders", "partition": 3, "value": 2520.0}
    assert render(row, _rule()) == (
        "Group billing is 42 min behind on orders (partition 3)",
        "the group lags",
    )


def test_a_template_failing_on_a_row_gives_a_fallback_text() -> None:
    rule = _rule(summary="{{ (offset_lag / 0) | round }}")
    summary, _ = render({"entity_key": "prod/billing/orders/3", "value": 1.0, "offset_lag": 5}, rule)
    assert summary == "Lag on prod/billing/orders/3: value 1.0 (the group lags)"


# ---------------------------------------------------------------------------------------------
# The command line


def test_cli_check_default_pack_passes() -> None:
    result = runner.invoke(app, ["rules", "check"])
    assert result.exit_code == 0, result.output
    for name in ("cluster.yaml", "lag.yaml", "replication.yaml", "retention.yaml"):
        assert f"{name}: OK" in result.output


def test_cli_check_names_file_and_line_and_fails(tmp_path: Path) -> None:
    unknown = rule_file(tmp_path, "unknown.yaml", condition="    condition: ofset_lag > 0")
    invalid = rule_file(
        tmp_path, "invalid.yaml", name="  - name: Other", condition="    condition: (offset_lag > 0"
    )
    good = rule_file(tmp_path, "good.yaml", name="  - name: Third")
    result = runner.invoke(app, ["rules", "check", str(unknown), str(invalid), str(good)])
    assert result.exit_code == 2
    assert f"{unknown}: line 5: rules.0.condition: unknown column 'ofset_lag'" in result.stderr
    assert "did you mean offset_lag?" in result.stderr
    assert f"{invalid}: line 5: rules.0.condition: not valid Spark SQL" in result.stderr
    assert f"{good}: OK (1 rule(s))" in result.stdout
    assert "2 of 3 file(s) have problems" in result.stderr


def test_cli_list_and_columns(tmp_path: Path) -> None:
    result = runner.invoke(app, ["rules", "list", str(rule_file(tmp_path, "a.yaml"))])
    assert result.exit_code == 0, result.output
    assert "LagHigh" in result.stdout and "group_topic" in result.stdout and "5m" in result.stdout
    result = runner.invoke(app, ["rules", "columns", "partition"])
    assert result.exit_code == 0 and "replicas_sharing_rack" in result.stdout
    assert runner.invoke(app, ["rules", "columns", "partitions"]).exit_code == 2
    assert runner.invoke(app, ["rules", "--help"]).exit_code == 0


def test_an_unknown_top_level_key_is_reported_but_keeps_the_rules(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", GOOD + "groups: []\n")
    ruleset = load_rules([path])
    assert [r.name for r in ruleset.rules] == ["LagHigh"]
    assert ruleset.errors[0].problems == [
        "line 12: groups: unknown key under the top level; remove it or check its spelling"
    ]
