"""The rule pack as a Prometheus rule file (`kafka-health rules export --format prometheus`).

A first group records each series the alerting rules read as one series per entity with only its
key labels (`served.py` says why), so the alerting rules read them plainly. Each rule becomes one
alerting rule per severity tier, most severe first, named like the rule: a
tier holds where the rule's condition and its `when` hold and no more severe tier's `when` does
(the engine's "most severe matching tier wins"). Its expression keeps the rule's value (`$value`)
where `/metrics` serves it; its labels are the tier's severity and the rule's labels; `for:` is
the rule's; the summary (translated, `templates.py`), the description and the rule's annotations
(translated likewise; a runbook as `runbook_url`, Prometheus' name for it) are annotations; an
annotation with no Go template form is left out, with a note. A rule with any part that has no
PromQL form over `/metrics` is not exported and is listed with the reason (`Skipped`); nothing is
left out silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from monitor.core.annotations import RUNBOOK
from monitor.core.vocabulary import format_duration
from monitor.evaluate.rules import Rule, SeverityTier
from monitor.expose.metrics.rules_export.promql import Inexpressible, Translator, Value, parse
from monitor.expose.metrics.rules_export.served import recording_rules
from monitor.expose.metrics.rules_export.templates import go_template

GROUP_PREFIX = "kafka-health-"
RECORDING_GROUP = f"{GROUP_PREFIX}series"
"""The recording rules: each series the alerting rules read, one per entity with only its key
labels."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A rule left out of the export, and why."""

    rule: str
    source: str
    reason: str

    def line(self) -> str:
        return f"{self.rule} ({self.source}): not exported: {self.reason}"


@dataclass(slots=True)
class Export:
    groups: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What an exported rule keeps differently (a value, a summary), one line each."""

    @property
    def exported(self) -> list[str]:
        """The alerting rules' names."""
        return sorted({rule["alert"] for group in self.groups for rule in group["rules"] if "alert" in rule})

    def text(self) -> str:
        """The rule file: a comment saying what was left out and why, then the groups."""
        header = [
            "# Prometheus alerting rules from the kafka-health rule pack, over the series of its /metrics",
            "# (`kafka-health rules export --format prometheus`). Check: promtool check rules FILE.",
        ]
        header += [f"# {line}" for line in [*(s.line() for s in self.skipped), *self.notes]]
        body = yaml.safe_dump({"groups": self.groups}, sort_keys=False, allow_unicode=True, width=100)
        return "\n".join(header) + "\n" + body


def export_rules(
    rules_by_file: Iterable[tuple[Path, Iterable[Rule]]], *, max_for: int | None = None
) -> Export:
    """The rule file for `rules_by_file` (one group per rule file); `max_for` caps every `for:`
    (seconds), for trying the pack out."""
    result = Export()
    for path, rules in rules_by_file:
        exported: list[dict[str, Any]] = []
        for rule in rules:
            try:
                alerts, notes = _alerts(rule, max_for)
            except Inexpressible as exc:
                result.skipped.append(Skipped(rule.name, path.name, str(exc)))
                continue
            exported += alerts
            result.notes += notes
        if exported:
            result.groups.append({"name": f"{GROUP_PREFIX}{path.stem}", "rules": exported})
    recorded = recording_rules("\n".join(r["expr"] for g in result.groups for r in g["rules"]))
    if recorded:
        result.groups.insert(0, {"name": RECORDING_GROUP, "rules": recorded})
    return result


def _alerts(rule: Rule, max_for: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    translator = Translator(rule.entity)
    notes: list[str] = []
    try:
        value: Value | None = translator.value(parse(rule.value))
    except Inexpressible as exc:
        value = None
        notes.append(f"{rule.name}: its alerts' value is the condition's, not the rule's: {exc}")
    kept = value is not None and not value.scalar
    seconds = rule.for_seconds if max_for is None else min(rule.for_seconds, max_for)
    alerts: list[dict[str, Any]] = []
    more_severe: list[str] = []
    for tier in rule.tiers_by_severity():
        where = _condition(translator, rule, tier, more_severe)
        summary, summary_note = _summary(rule, tier, kept=kept)
        alert: dict[str, Any] = {"alert": rule.name}
        alert["expr"] = f"({value.promql}) and ({where})" if value is not None and kept else where
        if seconds:
            alert["for"] = format_duration(seconds)
        alert["labels"] = {"severity": tier.severity, **rule.labels}
        alert["annotations"], annotation_notes = _annotations(rule, tier, summary, kept=kept)
        alerts.append(alert)
        for note in (summary_note, *annotation_notes):
            if note and note not in notes:
                notes.append(note)
        if tier.when is None:
            break  # a tier that always applies leaves nothing to the less severe ones
        more_severe.append(tier.when)
    return alerts, notes


def _condition(translator: Translator, rule: Rule, tier: SeverityTier, more_severe: list[str]) -> str:
    texts = [t for t in (rule.condition, tier.when) if t is not None]
    if not texts:
        raise Inexpressible(
            "a tier holds for every entity (no condition, no `when`): PromQL lists only series"
        )
    return translator.condition(texts, tuple(more_severe)).promql()


def _summary(rule: Rule, tier: SeverityTier, *, kept: bool) -> tuple[str, str | None]:
    try:
        return go_template(rule.summary, rule.entity, severity=tier.severity, value_kept=kept), None
    except Inexpressible as exc:
        note = f"{rule.name}: its summary is the rule's description: {exc}"
        return " ".join(rule.description.split()), note


def _annotations(
    rule: Rule, tier: SeverityTier, summary: str, *, kept: bool
) -> tuple[dict[str, str], list[str]]:
    annotations = {"summary": summary, "description": " ".join(rule.description.split())}
    notes = []
    for name, source in rule.annotations.items():
        try:
            text = go_template(source, rule.entity, severity=tier.severity, value_kept=kept)
        except Inexpressible as exc:
            notes.append(f"{rule.name}: its annotation {name} is left out: {exc}")
            continue
        annotations["runbook_url" if name == RUNBOOK else name] = text
    return annotations, notes
