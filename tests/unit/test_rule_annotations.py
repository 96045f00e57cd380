"""A rule's `annotations:` map: each value a template checked like the summary, bounded in count,
name and rendered size, a top-level `runbook:` read as `annotations.runbook`, and every mistake
named by `kafka-health rules check` with the rule, the key and the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.core.annotations import MAX_ANNOTATION_TEXT, MAX_ANNOTATIONS, is_link
from monitor.evaluate.engine import render_annotations
from monitor.evaluate.rules import load_rules
from tests.fixtures.rules import LAG_RULE

runner = CliRunner()


def rule_file(directory: Path, extra: str) -> Path:
    """LAG_RULE with `extra` (YAML at the rule's indentation) added to its end."""
    path = directory / "rules.yaml"
    path.write_text(LAG_RULE + textwrap.indent(textwrap.dedent(extra), "    "))
    return path


def problems(path: Path) -> list[str]:
    ruleset = load_rules([path])
    assert ruleset.rules == ()
    [error] = ruleset.errors
    return error.problems


def test_annotations_are_templates_rendered_per_finding(tmp_path: Path) -> None:
    path = rule_file(
        tmp_path,
        """\
        annotations:
          dashboard: "https://grafana.example/d/lag?var-group={{ group_id }}"
          hint: "restart {{ group_id }} if {{ value | number }} keeps growing"
        """,
    )
    [rule] = load_rules([path]).rules
    row = {"cluster": "prod", "group_id": "billing", "topic": "orders", "value": 1200.0}
    assert render_annotations(row, rule) == {
        "dashboard": "https://grafana.example/d/lag?var-group=billing",
        "hint": "restart billing if 1,200 keeps growing",
    }


def test_a_top_level_runbook_is_the_runbook_annotation(tmp_path: Path) -> None:
    path = rule_file(tmp_path, "runbook: https://wiki.example.com/lag\n")
    [rule] = load_rules([path]).rules
    assert rule.annotations == {"runbook": "https://wiki.example.com/lag"}
    assert render_annotations({"group_id": "g", "topic": "t"}, rule) == {
        "runbook": "https://wiki.example.com/lag"
    }


def test_an_annotation_failing_on_a_row_is_left_out(tmp_path: Path) -> None:
    path = rule_file(tmp_path, 'annotations: {loud: "{{ group_id.upper() }}", team: payments}\n')
    [rule] = load_rules([path]).rules
    assert render_annotations({"group_id": None, "topic": "t"}, rule) == {"team": "payments"}


many = "annotations: {" + ", ".join(f"a{i}: x" for i in range(MAX_ANNOTATIONS + 1)) + "}\n"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        # 1 a template that names an unknown column
        ('annotations: {dashboard: "https://g.example/d/{{ grup_id }}"}\n',
         "line 12: rules.0.annotations.dashboard: annotation dashboard: unknown template variable 'grup_id'"),
        # 2 a template that does not parse
        ('annotations: {hint: "{{ group_id"}\n', "rules.0.annotations.hint: annotation hint: template does not parse"),
        # 3 a runbook annotation that is not a URL
        ("annotations: {runbook: wiki/lag}\n",
         "rules.0.annotations.runbook: runbook renders to 'wiki/lag', which is not an http(s) URL"),
        # 4 a runbook given twice
        ("runbook: https://a.example\nannotations: {runbook: https://b.example}\n", "runbook is given twice"),
        # 5 a name that is not snake_case
        ("annotations: {Dash-Board: x}\n", "annotation name 'Dash-Board' must be lowercase letters"),
        # 6 a name the rule has its own key for
        ("annotations: {summary: x}\n", "annotation 'summary' is a key of the rule itself; give it as `summary:`"),
        # 7 a value that is not text
        ("annotations: {hint: [a, b]}\n", "rules.0.annotations"),
        # 8 an empty value
        ('annotations: {hint: ""}\n', "annotation hint: give a non-empty text"),
        # 9 too many
        (many, f"{MAX_ANNOTATIONS + 1} annotations; a rule may carry at most {MAX_ANNOTATIONS}"),
        # 10 rendered too long
        ("annotations: {hint: \"{{ 'x' * 5000 }}\"}\n",
         f"annotation hint renders to more than {MAX_ANNOTATION_TEXT:,} characters"),
        # 11 a template the sandbox refuses
        ('annotations: {hint: "{{ cycler.__init__.__globals__ }}"}\n', "rules.0.annotations.hint: annotation hint:"),
    ],
)  # fmt: skip
def test_each_mistake_names_the_rule_and_the_key(tmp_path: Path, extra: str, expected: str) -> None:
    found = problems(rule_file(tmp_path, extra))
    assert any(expected in p for p in found), found


def test_rules_check_names_the_file_the_line_and_the_key(tmp_path: Path) -> None:
    path = rule_file(tmp_path, 'annotations:\n  dashboard: "{{ nope }}"\n')
    result = runner.invoke(app, ["rules", "check", str(path)])
    assert result.exit_code == 2
    assert (
        f"{path}: line 13: rules.0.annotations.dashboard: annotation dashboard: unknown template"
        in result.stderr
    )


@pytest.mark.parametrize(
    ("text", "link"),
    [
        ("https://grafana.example/d/x?a=1&b=2", True),
        ("http://wiki/lag", True),
        ("javascript:alert(1)", False),
        ("https://a.example/ and more", False),
        ('https://a.example/"onmouseover="x', False),
        ("see https://a.example/", False),
    ],
)
def test_only_a_whole_http_url_is_a_link(text: str, link: bool) -> None:
    assert is_link(text) is link
