"""Silences: an active silence mutes every firing alert all of whose labels its matchers match.

A silenced alert is kept and shown, but notifies nobody. A stored silence whose matchers do not
parse mutes nothing and is logged, so that one bad silence never stops the cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from monitor.alert.alerts import AlertRow
from monitor.alert.matchers import MatcherError, matches_all, parse_matchers

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SilenceRow:
    id: int
    matchers: tuple[str, ...]


def apply_silences(alerts: Iterable[AlertRow], silences: Sequence[SilenceRow]) -> None:
    parsed = []
    for silence in silences:
        try:
            parsed.append((silence.id, parse_matchers(silence.matchers)))
        except MatcherError as exc:  # stored before a rule it breaks: it mutes nothing, the cycle goes on
            log.warning("silence %s is ignored: %s; expire it and create it again", silence.id, exc)
    for alert in alerts:
        before = alert.silenced_by
        alert.silenced_by = None
        if alert.state == "firing":
            for silence_id, matchers in parsed:
                if matches_all(matchers, alert.labels):
                    alert.silenced_by = silence_id
                    break
        alert.changed = alert.changed or before != alert.silenced_by
