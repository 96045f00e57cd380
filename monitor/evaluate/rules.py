"""Alert rules: the YAML model, its validation and loading.

A rule file holds `rules: [...]`; each rule names an entity of the derived-columns contract
(`monitor.core.derived`), a Spark SQL condition over that entity's columns, the value to
report, and severity tiers. Everything an operator can get wrong is checked here, without Spark:
unknown or missing keys, durations, entity names, SQL that does not parse or uses a column the
entity does not have, and templates that do not compile, use an unknown variable, or fail when
rendered once against a sample finding (templates render in jinja2's sandbox, so one that reaches
for Python internals is refused here and never runs). Every problem names the file and the line.

Partial-failure policy: a bad rule never stops the others once the daemon runs (at start it is
refused: `monitor.app.check_operator_files`). `load_rules` returns every valid rule,
and one `ConfigError` per file that has a problem; a file that is not a rule file at all (not
YAML, no `rules:` list) contributes no rule.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2.exceptions import SecurityError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from monitor.core.annotations import MAX_ANNOTATION_TEXT, RUNBOOK, name_problems, rendered_problem
from monitor.core.derived import ENTITIES, KEYS, columns_of
from monitor.core.errors import ConfigError
from monitor.core.formatting import NUMBER_FILTERS
from monitor.core.templating import BoundedSandbox, TemplateLimitError, render_bounded
from monitor.core.vocabulary import SEVERITY_RANK, Severity, parse_duration
from monitor.core.yaml_files import format_validation_error, line_of, read_yaml
from monitor.evaluate.rule_files import default_rule_paths as default_rule_paths
from monitor.evaluate.rule_files import rule_files as rule_files
from monitor.evaluate.rule_files import rule_files_in as rule_files_in
from monitor.evaluate.rule_sql import columns_in, expression_problems, suggest

TEMPLATE_EXTRAS = ("value", "severity")
"""Template variables besides the entity's columns (which include `cluster` and the key columns)."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LINE = re.compile(r"^line (\d+): ")
_RESERVED_LABELS = frozenset({"cluster", "rule", "entity", "severity"})


# ---------------------------------------------------------------------------------------------
# Template filters: the numbers an on-call engineer reads, rounded


TEMPLATE_FILTERS = dict(NUMBER_FILTERS)


def template_environment() -> jinja2.Environment:
    """The environment summaries and descriptions are compiled in: sandboxed and bounded (a rule
    file is whatever an operator typed; its templates reach no Python internals, change nothing
    and cost little: `monitor.core.templating`), strict undefined, our filters."""
    env = BoundedSandbox(undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters.update(TEMPLATE_FILTERS)
    return env


@lru_cache(maxsize=512)
def compile_template(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


_ENV = template_environment()


# ---------------------------------------------------------------------------------------------
# The model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SeverityTier(_Strict):
    """One tier: `severity` applies where `when` holds (always, when `when` is omitted)."""

    severity: Severity
    when: str | None = None

    @field_validator("when")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty; leave `when` out for a tier that always applies")
        return value


class Rule(_Strict):
    """One alert rule over one entity. See alert_rules/README.md for the operator's guide."""

    name: str
    description: str
    entity: str
    condition: str | None = None
    value: str
    for_seconds: int = Field(default=0, alias="for")
    severities: tuple[SeverityTier, ...]
    labels: dict[str, str] = Field(default_factory=dict)
    summary: str
    description_template: str | None = None
    annotations: dict[str, str] = Field(default_factory=dict)
    """Name -> template of the other texts its findings carry (`monitor.core.annotations`)."""

    @model_validator(mode="before")
    @classmethod
    def _runbook_is_an_annotation(cls, data: Any) -> Any:
        """A top-level `runbook:` (rule files written before annotations) is `annotations.runbook`."""
        if isinstance(data, Mapping) and RUNBOOK in data:
            data = dict(data)
            runbook = data.pop(RUNBOOK)
            given = data.get("annotations")
            if isinstance(given, Mapping) and RUNBOOK in given:
                raise ValueError("runbook is given twice, at the top and in annotations; keep the annotation")
            data["annotations"] = {**(given if isinstance(given, Mapping) else {}), RUNBOOK: runbook}
        return data

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"rule name {value!r} must be CamelCase or snake_case: a letter, then letters, digits or '_'"
            )
        return value

    @field_validator("entity")
    @classmethod
    def _known_entity(cls, value: str) -> str:
        if value not in ENTITIES:
            close = difflib.get_close_matches(value, ENTITIES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"unknown entity {value!r}; {hint}use one of {', '.join(ENTITIES)}")
        return value

    @field_validator("for_seconds", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration(value)

    @field_validator("condition", "value", "summary")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("severities")
    @classmethod
    def _one_tier_per_severity(cls, tiers: tuple[SeverityTier, ...]) -> tuple[SeverityTier, ...]:
        if not tiers:
            raise ValueError("give at least one tier, e.g. [{severity: warning, when: offset_lag > 0}]")
        seen = [tier.severity for tier in tiers]
        twice = sorted({s for s in seen if seen.count(s) > 1})
        if twice:
            raise ValueError(f"severity {', '.join(twice)} appears in more than one tier; merge them with OR")
        return tiers

    @field_validator("labels", mode="before")
    @classmethod
    def _label_values_are_text(cls, labels: Any) -> Any:
        if isinstance(labels, dict):
            for key, value in labels.items():
                if not isinstance(value, str):
                    shown = str(value).lower() if isinstance(value, bool) else str(value)
                    raise ValueError(f'label {key}: {shown} is not text; quote it: {key}: "{shown}"')
        return labels

    @field_validator("labels")
    @classmethod
    def _label_names(cls, labels: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        clash = sorted(set(labels) & set(KEYS.get(info.data.get("entity", ""), ())))
        if clash:
            raise ValueError(
                f"labels {', '.join(clash)} are key columns of {info.data['entity']}, set by the engine"
            )
        for key in labels:
            if not _LABEL.match(key):
                raise ValueError(
                    f"label name {key!r} must be letters, digits and '_', not starting with a digit"
                )
            if key in _RESERVED_LABELS:
                raise ValueError(f"label {key!r} is set by the engine; remove it")
        return labels

    @field_validator("annotations", mode="before")
    @classmethod
    def _annotation_names(cls, annotations: Any) -> Any:
        if isinstance(annotations, Mapping):
            problems = name_problems(annotations)
            if problems:
                raise ValueError("; ".join(problems))
        return annotations

    def tiers_by_severity(self) -> list[SeverityTier]:
        """The tiers, most severe first: the order they are tried in."""
        return sorted(self.severities, key=lambda tier: -SEVERITY_RANK[tier.severity])


class _RuleFile(_Strict):
    rules: list[Rule]


# ---------------------------------------------------------------------------------------------
# Checks the model cannot do alone: SQL and templates against the entity's columns


def match_columns(rule: Rule) -> frozenset[str]:
    """The columns whose values decide whether `rule` matches a row: those its condition and its
    tiers' `when` read (not its value, which only reports). A rule's expressions were checked
    when it was loaded; one that does not parse reads every column of its entity."""
    texts = [rule.condition, *(tier.when for tier in rule.severities)]
    columns: set[str] = set()
    for text in texts:
        if text is not None:
            columns |= columns_in(text) or set(columns_of(rule.entity))
    return frozenset(columns)


_SAMPLE_BY_TYPE: dict[str, Any] = {
    "int": 3,
    "bigint": 1200,
    "double": 0.5,
    "boolean": True,
    "timestamp": "2026-01-01T00:00:00+00:00",
}


def sample_context(entity: str) -> dict[str, Any]:
    """A finding's template context (`monitor.evaluate.engine.template_context`) with a sample
    value of the right type in every column, to render a rule's templates once when checking."""
    context = {
        name: f"sample-{name}" if column.type == "string" else _SAMPLE_BY_TYPE.get(column.type)
        for name, column in columns_of(entity).items()
    }
    return {**context, "value": 1.0, "severity": "warning"}


def template_problems(source: str, entity: str, rule: str = "") -> list[str]:
    """Why `source` is not a valid template for a rule on `entity` (empty when fine): it does not
    parse, names an unknown variable, or fails when rendered once against `sample_context` (the
    sandbox refused it, say). `rule` is the rule's name, for the message."""
    try:
        ast = _ENV.parse(source)
        template = compile_template(source)  # (kept for the evaluations: compiled once)
    except jinja2.TemplateSyntaxError as exc:
        return [f"template does not parse (template line {exc.lineno}): {exc.message}"]
    except (ValueError, ArithmeticError, RecursionError) as exc:  # a number of 5,000 digits, say
        return [f"template does not parse: {type(exc).__name__}: {str(exc)[:200]}"]
    allowed = set(columns_of(entity)) | set(TEMPLATE_EXTRAS)
    unknown = sorted(jinja2.meta.find_undeclared_variables(ast) - allowed)
    if unknown:
        return [
            f"unknown template variable {name!r}; {suggest(name, allowed, entity)} "
            f"(variables: the {entity} columns, value, severity)"
            for name in unknown
        ]
    of_rule = f" of rule {rule!r}" if rule else ""
    try:
        render_bounded(template, sample_context(entity))
    except TemplateLimitError as exc:
        return [f"the template{of_rule} is refused on a sample finding: {exc}"]
    except SecurityError as exc:
        reason = str(exc).rstrip(".")
        return [
            f"the template{of_rule} is refused: {reason}; use only the columns, value, severity and filters"
        ]
    except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        return [
            f"the template{of_rule} fails on a sample finding: {type(exc).__name__}: {exc}; "
            "see `kafka-health rules columns` for what each column holds"
        ]
    return []


def rule_problems(rule: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems of a rule's SQL and templates, each with its location inside the rule.

    Works on the raw mapping from the file, so that a rule with a structural problem (a bad
    duration, say) still gets its SQL checked; fields of the wrong type are left to the model.
    """
    entity = rule.get("entity")
    if not isinstance(entity, str) or entity not in ENTITIES:
        return []
    found: list[tuple[tuple[str | int, ...], str]] = []

    def sql(loc: tuple[str | int, ...], text: Any, *, boolean: bool) -> None:
        if isinstance(text, str) and text.strip():
            found.extend((loc, p) for p in expression_problems(text, entity, boolean=boolean))

    name = rule.get("name")
    named = name if isinstance(name, str) else ""

    def template(loc: tuple[str | int, ...], text: Any) -> None:
        if isinstance(text, str):
            found.extend((loc, p) for p in template_problems(text, entity, named))

    sql(("condition",), rule.get("condition"), boolean=True)
    sql(("value",), rule.get("value"), boolean=False)
    tiers = rule.get("severities")
    for index, tier in enumerate(tiers if isinstance(tiers, list | tuple) else []):
        if isinstance(tier, Mapping):
            sql(("severities", index, "when"), tier.get("when"), boolean=True)
    template(("summary",), rule.get("summary"))
    template(("description_template",), rule.get("description_template"))
    annotations = rule.get("annotations")
    given: list[tuple[tuple[str | int, ...], Any, Any]] = []
    if isinstance(annotations, Mapping):
        given = [(("annotations", k), k, v) for k, v in annotations.items()]
    if RUNBOOK in rule:
        given.append(((RUNBOOK,), RUNBOOK, rule[RUNBOOK]))
    for loc, key, text in given:
        if isinstance(key, str) and isinstance(text, str) and text.strip():
            found.extend((loc, p) for p in annotation_problems(key, text, entity, named))
    return found


def annotation_problems(name: str, source: str, entity: str, rule: str = "") -> list[str]:
    """Why `source` is not a valid template for annotation `name` of a rule on `entity`: those
    of any template, and a runbook that does not render to an http(s) URL on a sample finding."""
    problems = template_problems(source, entity, rule)
    if problems:
        return [f"annotation {name}: {p}" for p in problems]
    try:
        rendered = render_bounded(compile_template(source), sample_context(entity), limit=MAX_ANNOTATION_TEXT)
    except TemplateLimitError:
        return [
            f"annotation {name} renders to more than {MAX_ANNOTATION_TEXT:,} characters on a sample finding"
        ]
    problem = rendered_problem(name, rendered.strip())
    return [problem] if problem else []


# ---------------------------------------------------------------------------------------------
# Loading


@dataclass(frozen=True, slots=True)
class FileReport:
    """One rule file: the valid rules it gave, and its problems (None when it is clean)."""

    path: Path
    rules: tuple[Rule, ...]
    error: ConfigError | None


@dataclass(frozen=True, slots=True)
class RuleSet:
    files: tuple[FileReport, ...]

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(rule for report in self.files for rule in report.rules)

    @property
    def errors(self) -> tuple[ConfigError, ...]:
        return tuple(report.error for report in self.files if report.error is not None)

    @property
    def problems(self) -> tuple[str, ...]:
        """Every problem of every file, as `file: line N: key.path: message`."""
        return tuple(f"{error.source}: {problem}" for error in self.errors for problem in error.problems)

    @property
    def ok(self) -> bool:
        return not self.errors

    def by_name(self) -> dict[str, Rule]:
        return {rule.name: rule for rule in self.rules}


def load_rules(paths: Iterable[Path]) -> RuleSet:
    """Load and validate rule files (a directory stands for its `*.yaml`). Never raises for a bad
    file: its problems are in the result's `errors`, its valid rules in `rules`.

    Rule names are unique across all files; the first definition (in the order given) wins and
    each later one is a problem naming both places.
    """
    expanded: list[Path] = []
    for path in paths:
        expanded.extend(rule_files_in(path) if path.is_dir() else [path])
    seen: dict[str, tuple[Path, int | None]] = {}
    return RuleSet(tuple(_load_file(path, seen) for path in expanded))


def _load_file(path: Path, seen: dict[str, tuple[Path, int | None]]) -> FileReport:
    source = str(path)
    try:
        data, lines = read_yaml(path)
    except ConfigError as exc:
        return FileReport(path, (), ConfigError(exc.problems, source))
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        problem = "a rule file must hold a mapping with a `rules:` list (rules: [- name: ...])"
        return FileReport(path, (), ConfigError([problem], source))

    problems: list[str] = []
    bad: set[int] = set()
    try:
        _RuleFile.model_validate(data)
    except ValidationError as exc:
        problems += format_validation_error(exc, data, lines)
        # An unknown top-level key is reported but does not discard the file's valid rules.
        bad |= {e["loc"][1] for e in exc.errors() if len(e["loc"]) > 1 and isinstance(e["loc"][1], int)}

    rules: list[Rule] = []
    for index, item in enumerate(data["rules"]):
        here = ("rules", index)
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str):
            name_line = line_of(data, lines, (*here, "name"))
            if name in seen:
                first_path, first_line = seen[name]
                problems.append(
                    f"{_at(name_line)}rules.{index}.name: duplicate rule name {name!r}, already defined "
                    f"in {first_path}{_on(first_line)}; rename one"
                )
                bad.add(index)
            else:
                seen[name] = (path, name_line)
        found = rule_problems(item) if isinstance(item, dict) else []
        for loc, message in found:
            where = line_of(data, lines, (*here, *loc))
            problems.append(f"{_at(where)}rules.{index}.{'.'.join(map(str, loc))}: {message}")
        if index not in bad and not found:
            rules.append(Rule.model_validate(item))
    problems.sort(key=lambda text: int(m.group(1)) if (m := _LINE.match(text)) else 0)
    return FileReport(path, tuple(rules), ConfigError(problems, source) if problems else None)


def _at(line: int | None) -> str:
    return f"line {line}: " if line else ""


def _on(line: int | None) -> str:
    return f" line {line}" if line else ""


def describe_tiers(rule: Rule) -> str:
    """`critical: x > 1; warning: x > 0` — the tiers as a table cell."""
    return "; ".join(f"{t.severity}: {t.when or 'always'}" for t in rule.tiers_by_severity())
