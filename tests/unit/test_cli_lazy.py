"""The command line imports a command's module only when that command runs: `kafka-health --help`
and the daemon's start load no SQLAlchemy, Spark, web framework or Kafka client they do not use,
while the listing still names every command with the first paragraph of its own help."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from monitor.cli.main import Commands, app

HEAVY = ("pyspark", "py4j", "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "psycopg",
         "kafka", "confluent_kafka", "boto3", "pydantic", "jinja2", "sqlglot", "monitor.store",
         "monitor.evaluate", "monitor.expose", "monitor.collect", "monitor.alert", "monitor.act")  # fmt: skip
"""Packages `kafka-health --help` does without (each also stands for its submodules)."""

LOADED = """
import json, sys
from typer.testing import CliRunner
from monitor.cli.main import app
imported = sorted(sys.modules)
listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
print(json.dumps({"imported": imported, "after_help": sorted(sys.modules), "code": listed.exit_code}))
"""


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)]


def test_the_command_line_and_its_help_load_no_heavy_module() -> None:
    # A process of its own: this one has imported everything the other tests needed.
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["code"] == 0
    assert _heavy(found["imported"]) == []
    assert _heavy(found["after_help"]) == []
    commands = [m for m in found["after_help"] if m.startswith("monitor.cli.")]
    assert sorted(commands) == ["monitor.cli.common", "monitor.cli.lazy", "monitor.cli.main"]


def test_the_listing_shows_each_deferred_command_with_its_own_help() -> None:
    for deferred in Commands.deferred:
        loaded = deferred.load()
        assert loaded.name == deferred.name
        first_paragraph = inspect.cleandoc(loaded.help or "").split("\n\n")[0]
        assert deferred.help == first_paragraph, f"{deferred.name}: the listing's help differs from its own"


def test_every_command_is_listed_in_its_place() -> None:
    group = typer.main.get_group(app)
    names = group.list_commands(typer.Context(group))
    assert names == [
        "status", "lag", "topic", "share-groups", "setup", "run", "demo", "config", "dev-cluster",
        "dev-spark", "db", "rules", "routes", "alerts", "retention", "repair",
    ]  # fmt: skip
    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert all(f"│ {name} " in listed.output for name in names), listed.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["db", "--help"], "Start the local PostgreSQL and migrate the schema."),
        (["status", "--help"], "Every cluster at a glance"),
        (["retention", "token", "--help"], "API tokens for scripts"),
    ],
)
def test_a_deferred_command_runs_as_its_module_defines_it(args: list[str], expected: str) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert expected in result.output


def test_a_mistyped_command_is_told_the_deferred_one_it_resembles() -> None:
    result = CliRunner().invoke(app, ["statuz"])
    assert result.exit_code == 2
    assert "Did you mean 'status'?" in result.output


WEB_LOADED = """
import json, sys
import monitor.expose.web.app
print(json.dumps(sorted(sys.modules)))
"""


def test_the_web_server_imports_the_chart_library_and_the_rule_loader_when_first_used() -> None:
    """The daemon builds the web server before its collectors start: pygal (the charts) and the
    rule loader with sqlglot (the pages' colours) wait for the first page that needs them."""
    done = subprocess.run([sys.executable, "-c", WEB_LOADED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    late = ("pygal", "sqlglot", "monitor.evaluate.rules", "monitor.evaluate.rule_sql")
    assert [m for m in imported if any(m == p or m.startswith(f"{p}.") for p in late)] == []
    assert "monitor.expose.web.charts" in imported  # the pages that draw are there, their library not
