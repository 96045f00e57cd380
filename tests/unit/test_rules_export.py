"""`kafka-health rules export --format prometheus`: the default pack becomes a rule file Debian's
`promtool check rules` accepts, every default rule is exported or listed with its reason, a user
pack's inexpressible rule is reported, rule expressions translate to PromQL with SQL's NULL
semantics, and bad arguments exit 2 with a clear error."""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.expose.metrics.rules_export.export import export_rules
from monitor.expose.metrics.rules_export.promql import Inexpressible, Translator
from tests.fixtures.rules import default_ruleset
from tests.fixtures.scrapes import promtool_check

runner = CliRunner()

NOT_EXPORTED: dict[str, str] = {
    "BrokerDown": "column 'down' of entity broker",
    "ConsumerGroupStatus": "column 'lag_growing' of entity group",
    "ConsumerGroupNoMembers": "column 'lag_growing' of entity group",
    "ConsumerCommittedBeyondEnd": "column 'partitions_beyond_end' of entity group_topic",
    "ReplicasSharingRack": "column 'replicas_sharing_rack' of entity partition",
    "TimeUntilDataLoss": "column 'data_loss_margin_seconds' of entity group_partition",
    "DataLossOccurred": "column 'data_loss_occurred' of entity group_partition",
    "RetentionShortfall": "column 'retention_ms' of entity topic",
    "PartitionNearRetentionBytes": "column 'size_ratio' of entity partition",
    "ShareGroupLag": "no series of entity share_group_topic",
    "ShareGroupNoMembers": "column 'produce_rate' of entity share_group",
    "ShareGroupStalled": "no series of entity share_group_topic",
    "LagObjectiveFastBurn": "no series of entity lag_objective",
    "LagObjectiveSlowBurn": "no series of entity lag_objective",
}
"""Default rules that need what /metrics does not serve, and the reason's words."""

EXPORTED: dict[str, tuple[str, ...]] = {
    "ClusterUnreachable": ("critical",),
    "CollectionStale": ("warning",),
    "BrokerDiskHeadroom": ("critical", "warning"),
    "ConsumerAppendLag": ("critical", "warning"),
    "ConsumerLagSeconds": ("critical", "warning"),
    "ConsumerCommitLag": ("warning", "info"),
    "ProbeFailing": ("critical",),
    "ProbeSlow": ("warning",),
    "PartitionOffline": ("critical",),
    "PartitionUnderMinIsr": ("critical",),
    "PartitionReplicasLost": ("critical",),
    "PartitionReplicaLost": ("warning",),
    "LeaderImbalance": ("warning", "info"),
    "NonPreferredLeaders": ("warning", "info"),
}
"""Default rules exported, with the severities of their alerting rules, most severe first."""


@functools.cache
def _default_export() -> tuple[str, dict[str, list[dict[str, object]]], dict[str, str]]:
    """The shipped pack's export, made once for the module; the tests only read it."""
    ruleset = default_ruleset()
    exported = export_rules([(report.path, report.rules) for report in ruleset.files])
    alerts: dict[str, list[dict[str, object]]] = {}
    for group in yaml.safe_load(exported.text())["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                alerts.setdefault(rule["alert"], []).append(rule)
    return exported.text(), alerts, {s.rule: s.reason for s in exported.skipped}


def test_the_default_pack_passes_promtool(tmp_path: Path) -> None:
    text, alerts, _ = _default_export()
    path = tmp_path / "kafka-health.rules.yaml"
    path.write_text(text, encoding="utf-8")
    checked = promtool_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = sum(len(group["rules"]) for group in yaml.safe_load(text)["groups"])
    assert rules > sum(len(a) for a in alerts.values())  # the recording rules besides
    assert f"SUCCESS: {rules} rules found" in checked.stdout


def test_every_default_rule_is_exported_or_listed_with_its_reason() -> None:
    text, alerts, skipped = _default_export()
    names = {rule.name for rule in default_ruleset().rules}
    assert names == set(NOT_EXPORTED) | set(EXPORTED), "a default rule is new: add it to a table"
    assert set(skipped) == set(NOT_EXPORTED)
    assert set(alerts) == set(EXPORTED)
    for name, words in NOT_EXPORTED.items():
        assert words in skipped[name], skipped[name]
        assert f"# {name} (" in text and "not exported" in text
    for name, severities in EXPORTED.items():
        assert tuple(a["labels"]["severity"] for a in alerts[name]) == severities  # type: ignore[index]


@pytest.mark.parametrize(
    ("rule", "severity", "expected"),
    [
        ("ClusterUnreachable", "critical", {"for": "2m", "team": "kafka-platform", "page": "true"}),
        ("ConsumerAppendLag", "warning", {"for": "2m", "page": "true"}),
        ("PartitionReplicaLost", "warning", {"for": "5m", "team": "kafka-platform", "page": "false"}),
        ("LeaderImbalance", "info", {"for": "15m", "runbook_url": "https://kafka.apache.org/"}),
    ],
)
def test_for_labels_and_annotations_come_from_the_rule(
    rule: str, severity: str, expected: dict[str, str]
) -> None:
    _, alerts, _ = _default_export()
    (alert,) = [a for a in alerts[rule] if a["labels"]["severity"] == severity]  # type: ignore[index]
    assert alert["for"] == expected["for"]
    labels, annotations = alert["labels"], alert["annotations"]
    for key in ("team", "page"):
        if key in expected:
            assert labels[key] == expected[key]  # type: ignore[index]
    if "runbook_url" in expected:
        assert annotations["runbook_url"].startswith(expected["runbook_url"])  # type: ignore[index]
    assert annotations["summary"] and annotations["description"]  # type: ignore[index]


def test_every_series_is_recorded_once_with_its_key_labels_and_read_recorded() -> None:
    text, alerts, _ = _default_export()
    first, *others = yaml.safe_load(text)["groups"]
    assert first["name"] == "kafka-health-series"
    recorded = {rule["record"]: rule["expr"] for rule in first["rules"]}
    assert recorded.items() >= {
        "cluster_group_topic:kafka_consumer_group_topic_max_lag_in_seconds:max":
            "max by (cluster, group, topic) (kafka_consumer_group_topic_max_lag_in_seconds)",
        "cluster_group_topic:kafka_consumer_group_topic_sum_lag_in_offsets:max":
            "max by (cluster, group, topic) (kafka_consumer_group_topic_sum_lag_in_offsets)",
    }.items()  # fmt: skip
    exprs = [rule["expr"] for group in others for rule in group["rules"]]
    assert all("record" not in rule for group in others for rule in group["rules"])
    assert not any("clustername" in e or "max by" in e for e in exprs)
    bare = re.compile(r"(?<![:\w])(kafka|kminion)_\w+(?![:\w])")
    assert [e for e in exprs if bare.search(e)] == [], "a scraped series read without its recording rule"
    assert all(rule["expr"].startswith("max by (cluster") for rule in first["rules"])
    assert all(any(name in e for e in exprs) for name in recorded)
    lag = alerts["ConsumerLagSeconds"][1]["expr"]
    assert lag.startswith("(cluster_group_topic:kafka_consumer_group_topic_max_lag_in_seconds:max) and ")


def test_a_summary_keeps_its_labels_value_and_filters() -> None:
    _, alerts, _ = _default_export()
    summary = alerts["ConsumerAppendLag"][0]["annotations"]["summary"]  # type: ignore[index]
    assert "{{ $labels.group }}" in summary and "{{ $labels.topic }}" in summary
    assert "{{ $value | humanizeDuration }}" in summary
    assert 'printf "max by (cluster, group, topic) (kafka_consumer_group_topic_sum_lag_in_offsets' in summary


USER_PACK = """\
rules:
  - name: OrdersLagging
    description: The orders consumers fall behind.
    entity: group_topic
    condition: offset_lag > 1000 AND topic = 'orders'
    value: max_lag_seconds
    for: 10m
    severities:
      - severity: warning
    labels: {team: payments}
    summary: "{{ group_id }} is {{ value | duration }} behind on {{ topic }}"
    runbook: https://wiki.example.com/orders-lag
    annotations: {dashboard: "https://grafana.example/d/lag?var-group={{ group_id }}"}
  - name: OrdersGrowing
    description: The orders consumers' lag grows over the window.
    entity: group
    condition: lag_growing
    value: offset_lag
    severities:
      - severity: warning
    summary: "{{ group_id }} lags more and more"
"""


def test_a_user_pack_s_inexpressible_rule_is_reported(tmp_path: Path) -> None:
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "orders.yaml").write_text(USER_PACK, encoding="utf-8")
    out = tmp_path / "orders.rules.yaml"
    result = runner.invoke(
        app,
        [
            "rules",
            "export",
            "--format",
            "prometheus",
            "--rules-dir",
            str(tmp_path / "pack"),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    line = "OrdersGrowing (orders.yaml): not exported: /metrics does not serve column 'lag_growing' of entity group"
    assert line in result.stderr
    text = out.read_text(encoding="utf-8")
    assert f"# {line}" in text
    recording, group = yaml.safe_load(text)["groups"]
    assert [r["record"] for r in recording["rules"]] == [
        "cluster_group_topic:kafka_consumer_group_topic_max_lag_in_seconds:max",
        "cluster_group_topic:kafka_consumer_group_topic_sum_lag_in_offsets:max",
    ]
    assert group["name"] == "kafka-health-orders"
    (alert,) = group["rules"]
    assert alert["alert"] == "OrdersLagging" and alert["for"] == "10m"
    assert alert["labels"] == {"severity": "warning", "team": "payments"}
    assert alert["annotations"]["runbook_url"] == "https://wiki.example.com/orders-lag"
    assert alert["annotations"]["dashboard"] == "https://grafana.example/d/lag?var-group={{ $labels.group }}"
    assert '> 1000) and on(topic) (label_replace(vector(1), "topic", "orders", "", ""))' in alert["expr"]
    checked = promtool_check(out)
    assert checked.returncode == 0, checked.stdout + checked.stderr


TRANSLATIONS = [
        ("partition", "offline", "cluster_topic_partition:kafka_health_partition_offline:max == 1"),
        ("partition", "NOT offline", "cluster_topic_partition:kafka_health_partition_offline:max == 0"),
        ("partition", "under_min_isr AND NOT coalesce(offline, false)",
         "(cluster_topic_partition:kafka_health_partition_under_min_isr:max == 1) unless (cluster_topic_partition:kafka_health_partition_offline:max == 1)"),
        ("broker", "NOT coalesce(probe_failing, true)", "cluster_broker:kafka_health_broker_probe_failing:max == 0"),
        ("cluster", "NOT (collection_age_seconds > 300)", "cluster:kafka_health_cluster_collection_age_seconds:max <= 300"),
        ("group", "status IN ('ERR', 'WARN')", 'max by (cluster, group) (kafka_health_group_status{status=~"ERR|WARN"})'),
        ("group", "status NOT IN ('OK')", 'max by (cluster, group) (kafka_health_group_status{status!~"OK"})'),
        ("group", "status = 'a\"b\\\\c'", 'max by (cluster, group) (kafka_health_group_status{status="a\\"b\\\\c"})'),
        ("group", "status IN ('.*', 'a|b')", 'max by (cluster, group) (kafka_health_group_status{status=~"\\\\.\\\\*|a\\\\|b"})'),
        ("broker", "try_divide(leaders, fair_share_leaders) > 2",
         "(cluster_broker:kafka_health_broker_leaders:max / (cluster_broker:kafka_health_broker_fair_share_leaders:max != 0)) > 2"),
        ("broker", "disk_used_ratio BETWEEN 0.5 AND 0.9",
         "(cluster_broker:kafka_health_broker_disk_used_ratio:max >= 0.5) and (cluster_broker:kafka_health_broker_disk_used_ratio:max <= 0.9)"),
        ("broker", "disk_used_ratio IS NOT NULL", "cluster_broker:kafka_health_broker_disk_used_ratio:max"),
        ("group_topic", "offset_lag > 0 AND group_id IN ('a', 'b\"')",
         '(cluster_group_topic:kafka_consumer_group_topic_sum_lag_in_offsets:max > 0) and on(group) '
         '(label_replace(vector(1), "group", "a", "", "") or label_replace(vector(1), "group", "b\\"", "", ""))'),
        ("broker", "up AND broker_id <> 2",
         '(cluster_broker:kafka_health_broker_up:max == 1) unless on(broker) (label_replace(vector(1), "broker", "2", "", ""))'),
]  # fmt: skip
"""(entity, Spark SQL condition, its PromQL): names and texts with quotes, backslashes and regex
characters are data."""


@pytest.mark.parametrize(("entity", "condition", "expected"), TRANSLATIONS)
def test_conditions_translate_with_sql_null_semantics(entity: str, condition: str, expected: str) -> None:
    assert Translator(entity).condition([condition]).promql() == expected


def test_every_translation_is_promql_promtool_accepts(tmp_path: Path) -> None:
    rules = [{"alert": f"A{i}", "expr": expected} for i, (_, _, expected) in enumerate(TRANSLATIONS)]
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "t", "rules": rules}]}), encoding="utf-8")
    checked = promtool_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("entity", "condition", "reason"),
    [
        ("partition", "NOT coalesce(offline, false)", "holds where values are missing"),
        ("broker", "disk_used_ratio IS NULL", "holds where values are missing"),
        ("broker", "rack = 'a'", "does not serve column 'rack'"),
        ("broker", "1 > 0", "compares two constants"),
        ("group", "status LIKE 'E%'", "no PromQL form"),
        ("group", "status > 'A'", "only as = or <> a text"),
        ("share_group_topic", "lag > 0", "no series of entity share_group_topic"),
        ("group_topic", "offset_lag > (", "does not parse"),
        ("partition", "coalesce(replicas_lost, 0) > 1", "has no PromQL form here"),
        ("topic", "topic = 'orders'", "names only key labels"),
        ("topic", "topic = partitions", "only compared with a constant"),
    ],
)
def test_what_has_no_promql_form_says_why(entity: str, condition: str, reason: str) -> None:
    with pytest.raises(Inexpressible, match=None) as raised:
        Translator(entity).condition([condition]).promql()
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "nagios"], "unknown --format 'nagios'; use one of: prometheus"),
        ([], "Missing option '--format'"),
        (["--format", "prometheus", "--rules-dir", "{tmp}/none"], "is not a directory"),
        (["--format", "prometheus", "--rules-dir", "{tmp}/empty"], "holds no *.yaml rule file"),
        (["--format", "prometheus", "--rules-dir", "{tmp}/bad"], "the rule files have problems"),
        (["--format", "prometheus", "--max-for", "5x"], "--max-for: bad duration '5x'"),
        (["--format", "prometheus", "--out", "{tmp}"], "is a directory; give a file name"),
        (["--format", "prometheus", "--out", "{tmp}/no/such/x.yaml"], "does not exist; create it first"),
        (
            ["--format", "prometheus", "--out", "/proc/kafka-health.rules.yaml"],
            "cannot write /proc/kafka-health",
        ),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_error(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.yaml").write_text(
        textwrap.dedent(USER_PACK).replace("offset_lag > 1000", "ofset_lag > 1")
    )
    result = runner.invoke(app, ["rules", "export", *(a.replace("{tmp}", str(tmp_path)) for a in args)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_max_for_caps_every_for(tmp_path: Path) -> None:
    out = tmp_path / "r.yaml"
    result = runner.invoke(
        app, ["rules", "export", "--format", "prometheus", "--max-for", "30s", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    groups = yaml.safe_load(out.read_text())["groups"]
    fors = [rule.get("for") for group in groups for rule in group["rules"] if "alert" in rule]
    assert set(fors) == {"30s"}
    result = runner.invoke(app, ["rules", "export", "--format", "prometheus", "--max-for", "0s"])
    assert all("for" not in r for g in yaml.safe_load(result.stdout)["groups"] for r in g["rules"])
