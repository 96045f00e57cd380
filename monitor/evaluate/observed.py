"""When a rule's match was observed: the span of collection runs a finding's `for` counts over.

A finding's `first_seen` is the start of the run whose samples showed the condition, not the
evaluation's time, and its `for` counts to the end of the newest run that still shows it: an
evaluation that comes some seconds after the collection adds nothing to a rule's `for`, and
takes nothing from it either.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import cache

from sqlalchemy import Connection

from monitor.core.derived import SOURCES, sources_of
from monitor.evaluate.rules import Rule, match_columns
from monitor.store.findings import Match
from monitor.store.runs import Reached, newest_begun, newest_reached


def dated(
    conn: Connection,
    matches: Sequence[Match],
    rules: Sequence[Rule],
    clusters: Sequence[str],
    evaluated_at: datetime,
    window: timedelta,
    *,
    read_by: datetime,
) -> list[Match]:
    """`matches` dated by the runs of the jobs their rules' deciding columns come from
    (`observed_at`), for an evaluation at `evaluated_at` whose reads of the store ended by
    `read_by`."""
    jobs = sorted({job for entity_jobs in SOURCES.values() for job in entity_jobs})
    since = evaluated_at - window
    newest = newest_reached(conn, clusters, jobs, evaluated_at, since)
    return observed_at(matches, rules, newest, newest_begun(conn, clusters, jobs, read_by, since))


def observed_at(
    matches: Sequence[Match],
    rules: Sequence[Rule],
    newest: Mapping[tuple[str, str], Reached],
    begun: Mapping[tuple[str, str], datetime] | None = None,
) -> list[Match]:
    """`matches` with the span their rule's `for` counts over, from the newest runs of `newest`
    ((cluster, job) -> the newest run that reached it by the evaluation's clock) and `begun`
    ((cluster, job) -> the start of the newest run begun, not failed, by the end of its reads).

    `observed_at`: when the newest run of the jobs its rule's deciding columns come from
    (core.derived.sources_of of rules.match_columns) started, of those that reached the cluster
    or may have written what the evaluation read (`begun`: a run still going has written its
    samples before its row is finished, and the tables of latest values are read as they are
    when the evaluation reads them); a new finding's `first_seen`. None when none of those jobs
    ran (the evaluation time then). Never earlier than the run whose samples showed the
    condition: at worst one run later, so a `for` can take a run longer, never less. `held_at`:
    when the newest run of any of the entity's jobs (core.derived.SOURCES) finished by the
    clock: the condition, as the newest deciding sample shows it, still holds then, and its
    `for` counts to there.

    Counted from the start of the run that first showed the condition to the end of the newest:
    each run read its samples between the two, the starts keep their schedule to the millisecond,
    and the ends vary with how long each run took. Counted from end to end, a `for` of four
    15-second intervals would elapse at the fourth run or the fifth, by milliseconds of chance, and
    a page wait 15 s more half the time."""
    sources = {rule.name: sources_of(rule.entity, match_columns(rule)) for rule in rules}
    begun = begun or {}

    def newest_of(cluster: str, jobs: Collection[str]) -> Reached | None:
        runs = [newest[key] for job in jobs if (key := (cluster, job)) in newest]
        return max(runs, key=lambda run: run.finished_at, default=None)

    @cache
    def span(cluster: str, rule: str, entity: str) -> tuple[datetime | None, datetime | None]:
        jobs = sources.get(rule, SOURCES[entity])
        deciding = newest_of(cluster, jobs)
        starts = [start for job in jobs if (start := begun.get((cluster, job))) is not None]
        if deciding is not None:
            starts.append(deciding.started_at)
        held = newest_of(cluster, SOURCES[entity])
        return max(starts, default=None), (held.finished_at if held else None)

    def spanned(match: Match) -> Match:
        observed, held = span(match.cluster, match.rule, match.entity)
        return replace(match, observed_at=observed, held_at=held)

    return [spanned(match) for match in matches]
