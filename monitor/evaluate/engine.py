"""Applying the rules to the entity DataFrames, and rendering a finding's texts.

`evaluate_rules` is a pure DataFrame -> DataFrame function: for each rule, the entity's rows where
the condition holds get the severity of the most severe matching tier (a CASE WHEN over the tiers,
critical first); rows matching no tier give nothing. The rules' results are unioned into one
DataFrame of matches with `FINDINGS_SCHEMA`.

Missing data is not a condition turned false: a row whose `sampled` column is false (a group the
newest offsets run could not sample, whose values are carried from an older sample) gives no
match, and `unsampled_keys` lists it so that what was found on it keeps its state.

Partial-failure policy: a rule whose entity has no frame, or whose SQL Spark cannot analyse, is
skipped and logged; the other rules still run. Errors raised while the job runs (a division by
zero under ANSI mode, for instance) fail the whole evaluation, so rule authors use `try_divide`.

`render` runs on the driver, after `collect()`: it fills the rule's summary and description
templates from a match (see `template_context` for what a template can use).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import jinja2

from monitor.core.annotations import MAX_ANNOTATION_TEXT
from monitor.core.derived import KEYS, columns_of
from monitor.core.templating import MAX_TEMPLATE_TEXT, render_bounded
from monitor.evaluate.rules import Rule, compile_template

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

MATCH_DDL = (
    "rule string, entity string, cluster string, entity_key string, labels map<string,string>, "
    "severity string, value double, for_seconds int, context string"
)
"""A match of a rule on a row of its entity. `context` is the entity's row as JSON (nulls kept):
what `render` fills the templates from."""
FINDINGS_DDL = f"evaluated_at timestamp, {MATCH_DDL}"
"""One row per (rule, entity) that matches."""

KEY_SEPARATOR = "/"
SAMPLED = "sampled"
"""The derived column that says whether an entity was sampled in this evaluation (where it has one)."""


def evaluate_rules(
    frames: Mapping[str, DataFrame], rules: Sequence[Rule], evaluated_at: datetime | Column
) -> DataFrame:
    """The matches of `rules` on the entity `frames` (entity name -> DataFrame of its columns).

    The rules of one entity are applied in one pass over its frame: each row gives an array of
    one match (or null) per rule (`rule_matches`), exploded into the matches. One scan per entity
    instead of one per rule: the group-partition frame has a million rows.
    """
    from pyspark.sql import functions as F

    from monitor.evaluate.transforms.common import local_frame, moment, union_by_name

    parts: list[DataFrame] = []
    for entity, matches in rule_matches(frames, rules).items():
        exploded = frames[entity].select(F.explode(F.array(*matches)).alias("m"))
        exploded = exploded.where(F.col("m").isNotNull())
        at = moment(evaluated_at).alias("evaluated_at")
        parts.append(exploded.select(at, "m.*"))
    if not parts:
        return local_frame(_session(frames), FINDINGS_DDL)
    return union_by_name(parts)


def rule_matches(frames: Mapping[str, DataFrame], rules: Sequence[Rule]) -> dict[str, list[Column]]:
    """entity -> one column per rule of that entity Spark can apply to its frame: a row's match
    (`MATCH_DDL`), or null. Entities with no such rule are left out; a rule whose entity has no
    frame, or that Spark cannot apply, is logged and skipped (the others still run)."""
    by_entity: dict[str, list[Rule]] = {}
    for rule in rules:
        by_entity.setdefault(rule.entity, []).append(rule)
    applied: dict[str, list[Column]] = {}
    for entity, entity_rules in by_entity.items():
        frame = frames.get(entity)
        if frame is None:
            for rule in entity_rules:
                log.warning("rule %s skipped: no %s frame in this evaluation", rule.name, entity)
            continue
        matches = _applicable(frame, entity_rules)
        if matches:
            applied[entity] = matches
    return applied


def _applicable(frame: DataFrame, rules: Sequence[Rule]) -> list[Column]:
    """The matches of the `rules` Spark can apply to `frame`. They are analysed together (one
    analysis of the entity's plan), and only when that fails one by one, so that a rule Spark
    cannot apply is skipped alone."""
    from pyspark.errors import AnalysisException

    try:
        matches = [_match(frame, rule) for rule in rules]
        frame.select(*matches)
        return matches
    except AnalysisException:
        pass
    applicable: list[Column] = []
    for rule in rules:
        try:
            match = _match(frame, rule)
            frame.select(match)
        except AnalysisException as exc:
            log.error("rule %s skipped: Spark cannot apply it: %s", rule.name, exc)
            continue
        applicable.append(match)
    return applicable


def _session(frames: Mapping[str, DataFrame]) -> SparkSession:
    from pyspark.sql import SparkSession

    for frame in frames.values():
        return frame.sparkSession
    return SparkSession.active()


def severity_case(rule: Rule) -> str:
    """CASE WHEN over the tiers, most severe first; NULL when no tier matches."""
    arms = " ".join(
        f"WHEN ({tier.when or 'true'}) THEN '{tier.severity}'" for tier in rule.tiers_by_severity()
    )
    return f"CASE {arms} ELSE NULL END"


def _escaped(column: Column) -> Column:
    """A key part with '%' and '/' escaped, so that the joined key stays unambiguous."""
    from pyspark.sql import functions as F

    text = column.cast("string")
    return F.regexp_replace(F.regexp_replace(text, "%", "%25"), KEY_SEPARATOR, "%2F")


def _entity_key(entity: str) -> Column:
    """The finding's `entity_key` of a row of `entity`: the cluster and the key columns, escaped,
    joined by KEY_SEPARATOR."""
    from pyspark.sql import functions as F

    return F.concat_ws(KEY_SEPARATOR, *(_escaped(F.col(c)) for c in ("cluster", *KEYS[entity])))


def _sampled(frame: DataFrame) -> Column:
    """Whether a row was sampled in this evaluation: its `sampled` column where the entity has
    one (the group entities, monitor.core.derived), else always."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col(SAMPLED), F.lit(False)) if SAMPLED in frame.columns else F.lit(True)


def unsampled_key(entity: str, frame: DataFrame) -> Column | None:
    """A row's `entity_key` where this evaluation did not sample it, else null (see
    `unsampled_keys`); None when `entity` has no `sampled` column."""
    from pyspark.sql import functions as F

    if SAMPLED not in frame.columns:
        return None
    return F.when(~_sampled(frame), _entity_key(entity))


def unsampled_keys(frames: Mapping[str, DataFrame], rules: Sequence[Rule]) -> DataFrame | None:
    """(entity, entity_key) of the rows not sampled in this evaluation, of the entities `rules`
    apply to: the rules said nothing about them (no match, and no "condition false" either), so
    what was found on them before keeps its state (store.findings.merge_findings). None when no
    such entity has a `sampled` column."""
    from pyspark.sql import functions as F

    from monitor.evaluate.transforms.common import union_by_name

    parts = [
        frame.select(F.lit(entity).alias("entity"), key.alias("entity_key")).where(
            F.col("entity_key").isNotNull()
        )
        for entity, frame in frames.items()
        if (key := unsampled_key(entity, frame)) is not None and any(rule.entity == entity for rule in rules)
    ]
    return union_by_name(parts) if parts else None


def with_unsampled(matches: DataFrame, unsampled: DataFrame | None) -> DataFrame:
    """The matches and the unsampled keys (`unsampled_keys`) in one frame, so that one action
    brings both to the driver: an unsampled key is a row whose `rule` is null, with its `entity`
    and `entity_key` only."""
    if unsampled is None:
        return matches
    return matches.unionByName(unsampled, allowMissingColumns=True)


def _match(frame: DataFrame, rule: Rule) -> Column:
    """One row's match of `rule` (a struct of the MATCH_DDL columns), or
    null when the row was not sampled in this evaluation, the condition does not hold or no tier
    does. Only a match computes its key, labels and context."""
    from pyspark.sql import functions as F

    keys = KEYS[rule.entity]
    condition = _sampled(frame) & (F.expr(rule.condition) if rule.condition else F.lit(True))
    severity = F.expr(severity_case(rule))
    label_pairs: list[Column] = [F.lit("cluster"), F.col("cluster")]
    for key in keys:
        label_pairs += [F.lit(key), F.col(key).cast("string")]
    for name, text in sorted(rule.labels.items()):
        label_pairs += [F.lit(name), F.lit(text)]
    entity_columns = [F.col(c) for c in frame.columns]
    found = F.struct(
        F.lit(rule.name).alias("rule"),
        F.lit(rule.entity).alias("entity"),
        F.col("cluster").cast("string").alias("cluster"),
        _entity_key(rule.entity).alias("entity_key"),
        F.create_map(*label_pairs).alias("labels"),
        severity.alias("severity"),
        F.expr(rule.value).cast("double").alias("value"),
        F.lit(rule.for_seconds).cast("int").alias("for_seconds"),
        F.to_json(F.struct(*entity_columns), {"ignoreNullFields": "false"}).alias("context"),
    )
    return F.when(condition & severity.isNotNull(), found)


# ---------------------------------------------------------------------------------------------
# Driver side: the texts of a finding


def template_context(finding_row: Mapping[str, Any], rule: Rule) -> dict[str, Any]:
    """What a rule's templates see: every column of the rule's entity (null when absent), with
    `cluster` and the key columns, plus `value` and `severity` of the match.

    `finding_row` is a row of `evaluate_rules` (its `context` JSON holds the entity's columns) or
    any mapping holding the entity's columns directly.
    """
    columns = columns_of(rule.entity)
    context: dict[str, Any] = dict.fromkeys(columns)
    packed = finding_row.get("context")
    if isinstance(packed, str) and packed:
        context.update((k, v) for k, v in json.loads(packed).items() if k in columns)
    context.update((k, v) for k, v in finding_row.items() if k in columns)
    context["value"] = finding_row.get("value")
    context["severity"] = finding_row.get("severity")
    return context


def render(
    finding_row: Mapping[str, Any], rule: Rule, context: Mapping[str, Any] | None = None
) -> tuple[str, str]:
    """(summary, description) of a match, from `context` when given (its `template_context`). A
    template that fails on this row (a filter given an unexpected type, say) gives a plain
    fallback text rather than losing the finding."""
    if context is None:
        context = template_context(finding_row, rule)
    key, value = finding_row.get("entity_key", "?"), finding_row.get("value")
    fallback = f"{rule.name} on {key}: value {value} ({rule.description})"
    summary = _render(rule.summary, context, rule, finding_row)
    description: str | None = rule.description
    if rule.description_template is not None:
        description = _render(rule.description_template, context, rule, finding_row)
    return (fallback if summary is None else summary), (fallback if description is None else description)


def render_annotations(
    finding_row: Mapping[str, Any], rule: Rule, context: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The rule's annotations rendered for a match (from `context` when given), each cut at
    `MAX_ANNOTATION_TEXT`; one whose template fails on this row, or renders to nothing, is left out."""
    if context is None:
        context = template_context(finding_row, rule)
    annotations = {}
    for name, source in rule.annotations.items():
        text = _render(source, context, rule, finding_row, limit=MAX_ANNOTATION_TEXT)
        if text:
            annotations[name] = text
    return annotations


def _render(
    source: str,
    context: Mapping[str, Any],
    rule: Rule,
    row: Mapping[str, Any],
    limit: int = MAX_TEMPLATE_TEXT,
) -> str | None:
    try:
        return render_bounded(compile_template(source), context, limit=limit, truncate=True).strip()
    except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, RecursionError) as exc:
        log.warning("rule %s: template failed on %s: %s", rule.name, row.get("entity_key"), exc)
        return None
