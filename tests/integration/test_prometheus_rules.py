"""The exported rule pack in Debian's real Prometheus: `kafka-health rules export --format
prometheus` (every `for` capped at 0s with `--max-for`, so an alert fires at the first rule
evaluation that sees it) is loaded through `rule_files`, Prometheus scrapes the real app's
/metrics over the populated database (real collection, Spark evaluation and alert cycle), every
exported rule evaluates without error, ConsumerAppendLag fires for the lagging group with the
rule's tier, labels and rendered summary, and does not fire where the rule would not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.devtools.servers import PrometheusServer
from tests.conditions import wait_for
from tests.fixtures.populated import Populated

APPEND_LAG_SECONDS = 40 * 24
"""The lagging group committed 10 of `orders`' 50 records, appended 24 s apart."""


def _export(path: Path) -> set[str]:
    result = CliRunner().invoke(
        app, ["rules", "export", "--format", "prometheus", "--max-for", "0s", "--out", str(path)]
    )
    assert result.exit_code == 0, result.output
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return {rule.get("alert") or rule["record"] for group in groups for rule in group["rules"]}


def _of(alerts: list[dict[str, Any]], rule: str, group: str) -> list[dict[str, Any]]:
    return [a for a in alerts if a["labels"]["alertname"] == rule and a["labels"].get("group") == group]


@pytest.mark.timeout(1200)  # the populated database's Spark evaluation, when it is built here
def test_an_exported_rule_fires_in_prometheus_and_one_that_should_not_does_not(
    populated: Populated,
    prometheus_with_rules: Callable[[Sequence[Path]], PrometheusServer],
    tmp_path: Path,
) -> None:
    rules_file = tmp_path / "kafka-health.rules.yaml"
    exported = _export(rules_file)
    assert "ConsumerAppendLag" in exported
    prometheus = prometheus_with_rules([rules_file])

    # Every exported rule (recording, and alerting: one per tier) is loaded and evaluates over
    # the real series.
    def evaluated() -> list[tuple[str, str, str]]:
        health = prometheus.rule_health()
        return health if health and all(state != "unknown" for _, state, _ in health) else []

    health = wait_for(evaluated, timeout=60, what="Prometheus to evaluate every exported rule")
    assert {name for name, _, _ in health} == exported
    assert [h for h in health if h[1] != "ok"] == []

    lagging, caught_up = populated.groups["lagging"], populated.groups["caught_up"]
    firing = wait_for(
        lambda: [
            a for a in _of(prometheus.alerts(), "ConsumerAppendLag", lagging.name) if a["state"] == "firing"
        ],
        timeout=60,
        what=f"ConsumerAppendLag firing for {lagging.name}",
    )
    (alert,) = firing
    assert alert["labels"] | {"alertname": "ConsumerAppendLag"} == {
        "alertname": "ConsumerAppendLag",
        "severity": "warning",
        "page": "true",
        "cluster": populated.cluster,
        "group": lagging.name,
        "topic": lagging.topic,
    }
    assert float(alert["value"]) == pytest.approx(APPEND_LAG_SECONDS, abs=30)
    summary = alert["annotations"]["summary"]
    assert summary.startswith(f"Group {lagging.name} is 1") and f"behind on {lagging.topic}" in summary
    assert summary.endswith(f"({lagging.lag} messages)"), summary

    # What should not fire does not: the critical tier (>= 30 min) for the lagging group, and the
    # rule for the group that is caught up, in the same evaluations.
    alerts = prometheus.alerts()
    assert [a["labels"]["severity"] for a in _of(alerts, "ConsumerAppendLag", lagging.name)] == ["warning"]
    assert _of(alerts, "ConsumerAppendLag", caught_up.name) == []
    assert [a for a in alerts if a["labels"]["alertname"] == "PartitionOffline"] == []
