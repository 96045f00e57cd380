"""Templates an operator writes cost little, whatever they say: every way to make a huge number or
text is refused before it is made, a render is stopped past its time and its text capped.
`rules check` refuses such a template on its sample finding, with the file, the rule and the
line; the evaluation falls back to its plain text at once; a notification template that runs
away is an error the receiver gives up on."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.alert.render import Templates, default_template_dir
from monitor.cli.main import app
from monitor.core.templating import (
    MAX_TEMPLATE_TEXT,
    RUNS_ONCE,
    TemplateLimitError,
    render_bounded,
)
from monitor.evaluate.engine import render
from monitor.evaluate.rules import (
    Rule,
    compile_template,
    sample_context,
    template_environment,
    template_problems,
)
from tests.fixtures.receivers import EXTERNAL_URL, sample_notification

runner = CliRunner()
PROMPT = 10.0
"""Seconds within which each is refused on a busy machine; unbounded, some take minutes or GBs."""

# (id, template, what the problem says)
COSTLY: list[tuple[str, str, str]] = [
    ("huge power", "{{ 10**5000 }}", "10 ** 5000 is beyond 2**256"),
    ("power of a column", "{{ offset_lag ** 100000 }}", "1200 ** 100000 is beyond 2**256"),
    ("repeated text", "{{ 'a' * 10**8 }}", "a repeated text or list would be longer than 65,536"),
    ("repeated list", "{{ ['a'] * 10**8 }}", "a repeated text or list would be longer than 65,536"),
    ("huge product", "{{ (2**200) * (2**200) }}", "a product beyond 2**256"),
    ("joined text", "{% set s = 'a' * 60000 %}{{ s + s }}", "a joined text or list would be longer"),
    ("tilde", "{% set s = 'a' * 60000 %}{{ s ~ s }}", "a text joined with ~ would be longer"),
    ("join filter", "{{ (['a' * 60000] * 60000) | join }}", "a joined text would be longer"),
    ("center filter", "{{ 'a' | center(10**8) }}", "a size of 100000000 passed to a filter or method"),
    ("indent filter", "{{ 'a\nb' | indent(10**8) }}", "a size of 100000000 passed"),
    ("ljust method", "{{ 'a'.ljust(10**8) }}", "a size of 100000000 passed"),
    ("zfill method", "{{ group_id.zfill(99999999) }}", "a size of 99999999 passed"),
    ("percent width", "{{ '%099999999d' % 1 }}", "a field formatted as '%099999999' would be longer"),
    ("percent star", "{{ '%*d' % (10**8, 1) }}", "taken from an argument (%*d) is not allowed"),
    ("format filter", "{{ '%.99999999f' | format(1.5) }}", "a field formatted as '%.99999999' would be"),
    ("str.format width", "{{ '{:>99999999}'.format(1) }}", "a field formatted as '>99999999' would be"),
    ("str.format nested", "{{ '{:{w}}'.format(1, w=10**8) }}", "({:{w}}) is not allowed"),
    (
        "long output",
        "{% for i in range(60000) %}{{ 'x' * 1000 }}{% endfor %}",
        "the text is longer than 65,536",
    ),
    (
        "nested loops",
        "{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}",
        "rendering took longer than 1 s",
    ),
    (
        "macro calling itself",
        "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(40) }}",
        "rendering took longer than 1 s",
    ),
    (
        "loop filter",
        "{% for i in range(60000) if (range(60000) | list | length) > 60000 %}{% endfor %}",
        "rendering took longer than 1 s",
    ),
    ("literal of 5,000 digits", "{{ " + "9" * 5000 + " }}", "template does not parse: ValueError"),
]

FINE: list[tuple[str, str]] = [
    ("{{ group_id }} is {{ value | number }} behind", "sample-group_id is 1 behind"),
    ("{{ '{:,}'.format(offset_lag * 1000000) }}", "1,200,000,000"),
    ("{{ 2 ** 10 }} {{ 'ab' * 3 }} {{ '%5.1f' % 2.25 }}", "1024 ababab   2.2"),
    ("{{ 'x' | center(5) }}|{{ 2**200 > 0 }}", "  x  |True"),
    ("{% for i in range(3) %}{{ i }}{% endfor %}", "012"),
    ("{% macro m(n) %}{{ n }}{% endmacro %}{{ m(offset_lag * 1000000) }}", "1200000000"),
]


@pytest.mark.parametrize(("source", "expected"), [(s, e) for _, s, e in COSTLY], ids=[i for i, *_ in COSTLY])
def test_a_costly_template_is_refused_on_the_sample_finding_at_once(source: str, expected: str) -> None:
    started = time.monotonic()
    problems = template_problems(source, "group", "Costly")
    assert time.monotonic() - started < PROMPT
    [problem] = problems
    assert expected in problem


@pytest.mark.parametrize(("source", "expected"), FINE)
def test_ordinary_templates_render_as_before(source: str, expected: str) -> None:
    assert template_problems(source, "group", "Fine") == []
    assert render_bounded(compile_template(source), sample_context("group")) == expected


@pytest.mark.parametrize(
    ("source", "watched"),
    [
        ("{{ group_id | probe }} is {{ value | number }} behind", False),
        ("{% if value %}{% set v = value %}{{ v | probe }}{% else %}none{% endif %}", False),
        ("{% filter upper %}{{ group_id | probe }}{% endfilter %}", False),
        ("{% for i in [1] %}{{ i | probe }}{% endfor %}", True),
        ("{% macro m() %}{{ group_id | probe }}{% endmacro %}{{ m() }}", True),
        (
            "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}{{ group_id | probe }}{% endcall %}",
            True,
        ),
        ("{% block b %}{{ group_id | probe }}{% endblock %}", True),
    ],
)
def test_only_a_template_that_can_repeat_its_lines_is_timed(source: str, watched: bool) -> None:
    """Timing a render watches every call it makes (three times the cost of a summary); a
    template without a loop, macro or block runs each of its lines once, its time bounded by its
    length, and renders unwatched."""
    environment = template_environment()
    outside = sys.gettrace()  # a coverage tool's, or None
    traced: list[bool] = []
    environment.filters["probe"] = lambda value: traced.append(sys.gettrace() is not outside) or value
    template = environment.from_string(source)

    render_bounded(template, sample_context("group"))

    assert template.root_render_func.__globals__[RUNS_ONCE] is not watched
    assert traced == [watched]


def costly_rule(summary: str) -> Rule:
    return Rule.model_validate(
        {
            "name": "Costly",
            "description": "costly",
            "entity": "group",
            "condition": "offset_lag > 0",
            "value": "offset_lag",
            "severities": [{"severity": "warning"}],
            "summary": summary,
        }
    )


@pytest.mark.parametrize(
    "source",
    [s for i, s, _ in COSTLY if i != "long output"],
    ids=[i for i, *_ in COSTLY if i != "long output"],
)
def test_the_evaluation_falls_back_to_the_plain_text_at_once(source: str) -> None:
    started = time.monotonic()
    summary, _ = render({"entity_key": "c/g", "value": 5.0, "offset_lag": 5}, costly_rule(source))
    assert time.monotonic() - started < PROMPT
    assert summary == "Costly on c/g: value 5.0 (costly)"


def test_a_summary_too_long_is_cut_and_says_so() -> None:
    source = "{% for i in range(60000) %}{{ 'x' * 1000 }}{% endfor %}"
    summary, _ = render({"entity_key": "c/g", "value": 5.0}, costly_rule(source))
    assert summary == "x" * MAX_TEMPLATE_TEXT + " [truncated: longer than 65,536 characters]"


def test_rules_check_names_the_file_rule_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            rules:
              - name: Power
                description: power
                entity: group
                value: offset_lag
                severities: [{severity: warning}]
                summary: "{{ 10**5000 }}"
              - name: Repeat
                description: repeat
                entity: group
                value: offset_lag
                severities: [{severity: warning}]
                summary: "{{ 'a' * 10**8 }}"
            """
        )
    )
    started = time.monotonic()
    result = runner.invoke(app, ["rules", "check", str(path)])
    assert time.monotonic() - started < PROMPT
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert (
        f"{path}: line 7: rules.0.summary: the template of rule 'Power' is refused on a sample finding: "
        "10 ** 5000 is beyond 2**256; numbers in a template stay smaller"
    ) in result.output
    assert (
        f"{path}: line 13: rules.1.summary: the template of rule 'Repeat' is refused on a sample finding: "
        "a repeated text or list would be longer than 65,536 characters or items; build shorter text"
    ) in result.output


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a' * 10**8 }}",
        "{% for a in alerts %}{% for i in range(60000) %}{{ 'x' * 60000 }}{% endfor %}{% endfor %}",
    ],
    ids=["repeated text", "long output"],
)
def test_a_notification_template_that_runs_away_is_an_error(tmp_path: Path, source: str) -> None:
    directory = tmp_path / "notifications"
    directory.mkdir()
    for shipped in default_template_dir().iterdir():
        (directory / shipped.name).write_text(shipped.read_text())
    (directory / "slack.txt").write_text(source)
    started = time.monotonic()
    with pytest.raises(TemplateLimitError):
        Templates(EXTERNAL_URL, directory).render("slack.txt", sample_notification("single_critical"))
    assert time.monotonic() - started < PROMPT
