"""docs/keda.md: its ScaledObject is YAML KEDA reads, scaling on kafka_health_group_consumers_needed
by the labels `/metrics` serves it with, in a query Prometheus parses."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from monitor.expose.metrics.catalogue import STATE
from tests.fixtures.scrapes import promtool_check

ROOT = Path(__file__).resolve().parents[2]
METRIC = "kafka_health_group_consumers_needed"
_YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.DOTALL)
_SELECTOR = re.compile(r"(kafka_health_\w+)\{([^}]*)\}")


def _scaled_object() -> dict[str, object]:
    blocks = _YAML_BLOCK.findall((ROOT / "docs" / "keda.md").read_text(encoding="utf-8"))
    assert len(blocks) == 1, "docs/keda.md shows one ScaledObject"
    document = yaml.safe_load(blocks[0])
    assert isinstance(document, dict)
    return document


def _trigger() -> dict[str, str]:
    document = _scaled_object()
    assert (document["apiVersion"], document["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    triggers = document["spec"]["triggers"]  # type: ignore[index]
    assert [t["type"] for t in triggers] == ["prometheus"]
    metadata: dict[str, str] = triggers[0]["metadata"]
    return metadata


def test_the_query_reads_the_advice_by_its_labels() -> None:
    trigger = _trigger()
    assert trigger["threshold"] == "1"  # a replica per unit: the value is a consumer count
    selectors = dict(_SELECTOR.findall(trigger["query"]))
    assert METRIC in selectors
    labels = {pair.split("=")[0].strip() for pair in selectors[METRIC].split(",")}
    spec = next(spec for spec in STATE if spec.name == METRIC)
    assert labels == set(spec.labels)
    served = {spec.name for spec in STATE}
    assert set(selectors) <= served, set(selectors) - served


def test_promtool_parses_the_query(tmp_path: Path) -> None:
    rules = {
        "groups": [{"name": "keda", "rules": [{"record": "keda:consumers", "expr": _trigger()["query"]}]}]
    }
    path = tmp_path / "keda.rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    checked = promtool_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_would_refuse_a_broken_query(tmp_path: Path) -> None:
    # The check above can fail: a query with an unclosed selector does not pass.
    rules = {
        "groups": [{"name": "keda", "rules": [{"record": "keda:consumers", "expr": f"max({METRIC}{{group="}]}]
    }
    path = tmp_path / "broken.rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    assert promtool_check(path).returncode != 0
