"""Templates an operator writes (rule summaries and descriptions, notification templates) render
in jinja2's sandbox: one that reaches for Python internals never runs, and `rules check` renders
every rule's templates once against a sample finding so that it is refused with its file, rule
and line before it is ever deployed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from jinja2.exceptions import SecurityError
from typer.testing import CliRunner

from monitor.alert.render import Templates, default_template_dir
from monitor.cli.main import app
from monitor.evaluate.engine import render
from monitor.evaluate.rules import Rule, compile_template, load_rules, sample_context
from tests.fixtures.receivers import EXTERNAL_URL, sample_notification

runner = CliRunner()


def escape_to_shell(marker: Path) -> str:
    return f"{{{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}}}"


def rule_file(tmp_path: Path, summary: str, description: str = "") -> Path:
    path = tmp_path / "rules.yaml"
    extra = f"    description_template: {description!r}\n" if description else ""
    path.write_text(
        textwrap.dedent(
            f"""\
            rules:
              - name: Fine
                description: fine
                entity: group
                condition: offset_lag > 0
                value: offset_lag
                severities: [{{severity: warning}}]
                summary: "{{{{ group_id }}}} is {{{{ value | number }}}} behind"
              - name: Escape
                description: escape
                entity: group
                condition: offset_lag > 0
                value: offset_lag
                severities: [{{severity: warning}}]
                summary: {summary!r}
            """
        )
        + extra
    )
    return path


def test_rules_check_refuses_a_template_that_escapes_the_sandbox_and_never_runs_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = rule_file(tmp_path, escape_to_shell(marker))
    result = runner.invoke(app, ["rules", "check", str(path)])
    assert result.exit_code == 2, result.output
    assert (
        "line 15: rules.1.summary: the template of rule 'Escape' is refused: access to attribute "
        "'__init__' of 'type' object is unsafe; use only the columns, value, severity and filters"
    ) in result.output
    assert "Fine" not in result.output
    assert not marker.exists()

    ruleset = load_rules([path])
    assert [rule.name for rule in ruleset.rules] == ["Fine"]
    assert not marker.exists()


def test_attributes_of_the_columns_are_out_of_reach_too(tmp_path: Path) -> None:
    path = rule_file(tmp_path, "x", "{{ group_id.__class__.__mro__[1].__subclasses__() }}")
    [error] = load_rules([path]).errors
    [problem] = error.problems
    assert problem.startswith(
        "line 16: rules.1.description_template: the template of rule 'Escape' is refused: "
        "access to attribute '__class__' of 'str' object is unsafe"
    )


def test_a_template_that_fails_on_a_sample_finding_is_refused(tmp_path: Path) -> None:
    path = rule_file(tmp_path, "{{ offset_lag / 0 }}")
    [problem] = load_rules([path]).problems
    assert (
        "rules.1.summary: the template of rule 'Escape' fails on a sample finding: ZeroDivisionError"
        in problem
    )


def test_a_rule_that_skipped_the_check_still_cannot_escape_when_evaluated(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(SecurityError):
        compile_template(escape_to_shell(marker)).render(sample_context("group"))
    rule = Rule.model_validate(
        {
            "name": "Escape",
            "description": "escape",
            "entity": "group",
            "condition": "offset_lag > 0",
            "value": "offset_lag",
            "severities": [{"severity": "warning"}],
            "summary": escape_to_shell(marker),
        }
    )
    summary, _ = render({"entity_key": "c/g", "value": 5.0, "offset_lag": 5}, rule)
    assert summary == "Escape on c/g: value 5.0 (escape)"
    assert not marker.exists()


def test_a_normal_template_renders_against_the_sample() -> None:
    text = compile_template("{{ group_id }}: {{ value | number }} ({{ severity }}), {{ offset_lag }}").render(
        sample_context("group")
    )
    assert text == "sample-group_id: 1 (warning), 1200"


def test_notification_templates_render_sandboxed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    directory = tmp_path / "notifications"
    directory.mkdir()
    for source in default_template_dir().iterdir():
        (directory / source.name).write_text(source.read_text())
    (directory / "slack.txt").write_text(escape_to_shell(marker))
    with pytest.raises(SecurityError):
        Templates(EXTERNAL_URL, directory).render("slack.txt", sample_notification("single_critical"))
    assert not marker.exists()
    (directory / "slack.txt").write_text("{{ notification.alerts[0].__class__ }}")
    with pytest.raises(SecurityError):
        Templates(EXTERNAL_URL, directory).render("slack.txt", sample_notification("single_critical"))
