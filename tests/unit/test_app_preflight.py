"""The daemon checks every operator file before it starts anything: a routing file that names a
missing receiver, a bad rule or a bad retention policy stops `kafka-health run` at once, with
the file and the line, before PostgreSQL, Kafka or Spark is touched."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.app import build_app, check_operator_files
from monitor.cli.main import app
from monitor.core.errors import ConfigError
from monitor.core.settings import load_settings
from monitor.devtools import stack
from monitor.devtools.demo import demo_settings

runner = CliRunner()

ROUTING_WITH_A_MISSING_RECEIVER = """\
receivers:
  - name: console
    console: {}
route:
  receiver: console
  routes:
    - matchers: [severity="critical"]
      receiver: pager-that-does-not-exist
"""


def settings_file(tmp_path: Path, **files: str) -> Path:
    """A monitor.yaml whose operator files are those given (routing, rules, policy), written
    beside it; unreachable Kafka and PostgreSQL, so that anything that connects would fail."""
    lines = [
        "clusters:\n  - name: c\n    bootstrap_servers: ['127.0.0.1:9']\n",
        "database:\n  url: postgresql+psycopg://nobody@127.0.0.1:9/none\n",
    ]
    if "routing" in files:
        (tmp_path / "routing.yaml").write_text(files["routing"])
        (tmp_path / "owners.yaml").write_text("teams: []\n")
        lines.append(f"alert:\n  routing_file: {tmp_path / 'routing.yaml'}\n")
    if "rules" in files:
        (tmp_path / "rules").mkdir()
        (tmp_path / "rules" / "lag.yaml").write_text(files["rules"])
        lines.append(f"evaluate:\n  rules_dir: {tmp_path / 'rules'}\n")
    if "policy" in files:
        (tmp_path / "policy.yaml").write_text(files["policy"])
        lines.append(f"retention:\n  policy_file: {tmp_path / 'policy.yaml'}\n")
    path = tmp_path / "monitor.yaml"
    path.write_text("".join(lines))
    return path


def test_the_shipped_files_pass(tmp_path: Path) -> None:
    check_operator_files(load_settings(settings_file(tmp_path)))
    check_operator_files(demo_settings(load_settings(None)))


def test_the_end_to_end_probe_is_off_by_default_and_on_in_the_demo() -> None:
    assert load_settings(None).collect.probe.enabled is False
    assert demo_settings(load_settings(None)).collect.probe.enabled is True


def test_run_with_a_routing_file_naming_a_missing_receiver_stops_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("local services started before the operator files were checked")

    monkeypatch.setattr(stack, "local_services", must_not_start)
    spark_loaded = "pyspark.sql" in sys.modules
    config = settings_file(tmp_path, routing=ROUTING_WITH_A_MISSING_RECEIVER)
    result = runner.invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'routing.yaml'}: line 8: route.routes.0.receiver:" in result.output
    assert "pager-that-does-not-exist" in result.output
    assert "Traceback" not in result.output
    assert ("pyspark.sql" in sys.modules) == spark_loaded


def test_build_app_refuses_a_bad_rule_before_wiring_anything(tmp_path: Path) -> None:
    rules = "rules:\n  - name: Broken\n    entity: no_such_entity\n    condition: lag > 0\n"
    settings = load_settings(settings_file(tmp_path, rules=rules))
    with pytest.raises(ConfigError) as caught:
        build_app(settings, "postgresql+psycopg://nobody@127.0.0.1:9/none")
    assert f"{tmp_path / 'rules' / 'lag.yaml'}: line 3: rules.0.entity: unknown entity 'no_such_entity'" in (
        " ".join(caught.value.problems)
    )


def test_every_bad_file_is_named_at_once(tmp_path: Path) -> None:
    config = settings_file(
        tmp_path,
        routing=ROUTING_WITH_A_MISSING_RECEIVER,
        rules="rules: [\n",
        policy="tiers: {not: valid}\nnonsense: 1\n",
    )
    with pytest.raises(ConfigError) as caught:
        check_operator_files(load_settings(config))
    sources = {problem.split(": ", 1)[0] for problem in caught.value.problems}
    assert sources == {
        str(tmp_path / "routing.yaml"),
        str(tmp_path / "rules" / "lag.yaml"),
        str(tmp_path / "policy.yaml"),
    }


def test_a_stage_that_is_off_does_not_need_its_file(tmp_path: Path) -> None:
    config = settings_file(tmp_path, routing=ROUTING_WITH_A_MISSING_RECEIVER)
    with config.open("a") as handle:
        handle.write("  enabled: false\n")  # under `alert:`, the last section written
    check_operator_files(load_settings(config))
