"""Step 1 of a cycle, alerts from findings: each open finding is an alert keyed by a stable
fingerprint (rule + entity key, which includes the cluster).

`pending` until the rule's `for` holds (the finding says so), then `firing`; a severity change
updates the same alert (and re-routes it); an alert whose finding is gone is `resolved`, with the
finding's reason (`gone`: the cluster no longer has the entity) where it has one. A finding
is gone only when its entity was evaluated and the rule no longer matched (or it went unsampled
past the staleness bound): the finding of an entity a partial collection run could not sample
stays open (store.findings), so its alert keeps its state and `pending_since`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.alert.model import AlertView, Impact, PartitionDetail
from monitor.core.annotations import annotations_of


def fingerprint(rule: str, entity_key: str) -> str:
    """Stable id of an alert: the same rule on the same entity is the same alert."""
    return hashlib.sha256(f"{rule}\x1f{entity_key}".encode()).hexdigest()[:20]


@dataclass(slots=True)
class AlertRow:
    id: int | None
    fingerprint: str
    rule: str
    cluster: str
    entity: str
    entity_key: str
    labels: dict[str, str]
    severity: str
    state: str
    summary: str
    description: str
    value: float | None
    annotations: dict[str, str]
    pending_since: datetime
    starts_at: datetime | None
    resolved_at: datetime | None = None
    silenced_by: int | None = None
    inhibited_by: str | None = None
    resolved_reason: str | None = None
    """Why it resolved, from its finding (`gone`); None otherwise."""
    changed: bool = False
    impact: Impact | None = None
    """What this alert covers as an inhibition source, this cycle (not stored)."""

    def view(
        self,
        state: str | None = None,
        ends_at: datetime | None = None,
        partitions: tuple[PartitionDetail, ...] = (),
        partitions_total: int = 0,
    ) -> AlertView:
        return AlertView(
            fingerprint=self.fingerprint,
            rule=self.rule,
            severity=self.severity,
            state="resolved" if (state or self.state) == "resolved" else "firing",
            cluster=self.cluster,
            entity=self.entity,
            entity_key=self.entity_key,
            labels=dict(self.labels),
            summary=self.summary,
            description=self.description,
            value=self.value,
            annotations=dict(self.annotations),
            starts_at=self.starts_at or self.pending_since,
            ends_at=ends_at or self.resolved_at,
            owner=self.labels.get("team") or None,
            partitions=partitions,
            partitions_total=partitions_total,
            impact=self.impact,
            resolved_reason=self.resolved_reason if (state or self.state) == "resolved" else None,
        )


def merge_alerts(
    open_alerts: Mapping[str, AlertRow],
    findings: Sequence[Mapping[str, Any]],
    team_for: Callable[[Mapping[str, str]], str | None],
    now: datetime,
    resolved_reasons: Mapping[tuple[str, str], str] | None = None,
) -> tuple[dict[str, AlertRow], list[AlertRow]]:
    """The open alerts after this cycle's findings, and the alerts resolved now. `team_for` gives
    the owning team of an alert's labels (`Routing.team_for`); `resolved_reasons` the reason
    ((rule, entity_key) -> `gone`) of findings that resolved with one, which their alerts take."""
    current: dict[str, AlertRow] = {}
    for finding in findings:
        rule, entity_key, entity = str(finding["rule"]), str(finding["entity_key"]), str(finding["entity"])
        cluster, severity = str(finding["cluster"]), str(finding["severity"])
        fp = fingerprint(rule, entity_key)
        labels = {str(k): str(v) for k, v in (finding["labels"] or {}).items()}
        labels.update(rule=rule, cluster=cluster, entity=entity, severity=severity)
        team = team_for(labels)
        if team:
            labels["team"] = team
        state = "firing" if finding["state"] == "firing" else "pending"
        summary, description, value = str(finding["summary"]), str(finding["description"]), finding["value"]
        annotations = annotations_of(finding["annotations"])
        row = open_alerts.get(fp)
        if row is None:
            row = AlertRow(
                None, fp, rule, cluster, entity, entity_key, labels, severity, state, summary, description,
                value, annotations, pending_since=now, starts_at=now if state == "firing" else None,
                changed=True,
            )  # fmt: skip
        else:
            new = (labels, severity, state, summary, value, description, annotations)
            old = (
                row.labels,
                row.severity,
                row.state,
                row.summary,
                row.value,
                row.description,
                row.annotations,
            )
            row.changed = new != old
            row.labels, row.severity, row.summary, row.value = labels, severity, summary, value
            row.description, row.annotations = description, annotations
            if state == "firing" and row.starts_at is None:
                row.starts_at = now
            row.state = state
        current[fp] = row
    resolved = []
    reasons = resolved_reasons or {}
    for fp, row in open_alerts.items():
        if fp not in current:
            row.state, row.resolved_at, row.changed = "resolved", now, True
            row.resolved_reason = reasons.get((row.rule, row.entity_key))
            resolved.append(row)
    return current, resolved
