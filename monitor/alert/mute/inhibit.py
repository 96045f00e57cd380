"""Inhibition: while a source alert fires, the alerts it covers are muted (Alertmanager's
`inhibit/`), and the source carries them as its `impact` (`monitor.alert.mute.impact`), so its
notice tells the consequences it stands for.

A firing alert matched as a target of a rule while a firing source alert (not itself) with the
same `equal` labels exists is covered by that source (with `only_after_source`, only when it went
pending after it) and inhibited, unless it matches the rule's `still_notify` (its consequence is
worse than the source's notice says: it is told). Muted alerts are kept and shown, but notify
nobody.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from monitor.alert.alerts import AlertRow
from monitor.alert.matchers import Matcher, matches_all
from monitor.alert.mute.impact import impact_of


@dataclass(frozen=True, slots=True)
class InhibitRule:
    """While an alert matching `source_matchers` fires, alerts matching `target_matchers` that
    share the `equal` labels with it are covered by it (an alert never covers itself): they are
    muted, and the source's notice carries them as its impact. With `only_after_source`, only
    targets that went pending after the source did: what was already wrong before the cause
    appeared is not its effect, and is still told. A covered target matching every
    `still_notify` matcher (when there are any) is told anyway: its consequence is worse than
    the source's notice says (writes failing behind a broker that is down)."""

    source_matchers: tuple[Matcher, ...]
    target_matchers: tuple[Matcher, ...]
    equal: tuple[str, ...]
    only_after_source: bool = False
    still_notify: tuple[Matcher, ...] = ()

    def covers(self, source_labels: Mapping[str, str], target_labels: Mapping[str, str]) -> bool:
        """Whether the target counts in the source's impact (muted or still told)."""
        if dict(source_labels) == dict(target_labels):
            return False
        return (
            matches_all(self.source_matchers, source_labels)
            and matches_all(self.target_matchers, target_labels)
            and all(source_labels.get(n, "") == target_labels.get(n, "") for n in self.equal)
        )

    def still_told(self, target_labels: Mapping[str, str]) -> bool:
        return bool(self.still_notify) and matches_all(self.still_notify, target_labels)

    def inhibits(self, source_labels: Mapping[str, str], target_labels: Mapping[str, str]) -> bool:
        """Whether the target is muted: covered and not told anyway."""
        return self.covers(source_labels, target_labels) and not self.still_told(target_labels)


def _matching(matchers: Sequence[Matcher], alerts: Sequence[AlertRow]) -> list[AlertRow]:
    """The alerts all of `matchers` hold for, in order: decided once per distinct value of the
    labels the matchers read (thousands of alerts share a few rules and clusters)."""
    names = tuple({m.name: None for m in matchers})
    verdicts: dict[tuple[str, ...], bool] = {}
    chosen = []
    for alert in alerts:
        values = tuple([alert.labels.get(n, "") for n in names])
        verdict = verdicts.get(values)
        if verdict is None:
            verdict = verdicts[values] = matches_all(matchers, alert.labels)
        if verdict:
            chosen.append(alert)
    return chosen


def apply_inhibition(alerts: Sequence[AlertRow], rules: Sequence[InhibitRule]) -> None:
    """Set `inhibited_by` (the source muting each alert, or None) and each source's `impact`."""
    firing = [a for a in alerts if a.state == "firing"]
    verdict: dict[str, str | None] = {a.fingerprint: None for a in alerts}
    covered: dict[str, dict[str, AlertRow]] = defaultdict(dict)
    earliest_first = sorted(firing, key=lambda a: a.pending_since)
    for rule in rules:
        # Per `equal` key, the source that went pending first: the earliest possible cause.
        sources: dict[tuple[str, ...], AlertRow] = {}
        for alert in _matching(rule.source_matchers, earliest_first):
            sources.setdefault(tuple(alert.labels.get(n, "") for n in rule.equal), alert)
        if not sources:
            continue
        for alert in _matching(rule.target_matchers, firing):
            source = sources.get(tuple(alert.labels.get(n, "") for n in rule.equal))
            if source is None or source.fingerprint == alert.fingerprint:
                continue
            if rule.only_after_source and alert.pending_since < source.pending_since:
                continue
            covered[source.fingerprint].setdefault(alert.fingerprint, alert)
            if verdict[alert.fingerprint] is None and not rule.still_told(alert.labels):
                verdict[alert.fingerprint] = source.fingerprint
    for alert in alerts:
        if alert.inhibited_by != verdict[alert.fingerprint]:
            alert.inhibited_by = verdict[alert.fingerprint]
            alert.changed = True
        alert.impact = (
            impact_of(covered[alert.fingerprint].values()) if alert.fingerprint in covered else None
        )
