"""Findings: merging one evaluation's rule matches into the open findings.

Lifecycle of a finding, keyed by (rule, entity_key):
- first match: inserted, `pending` (or `firing` at once when the rule's `for` is 0), with
  `first_seen` the time of the sample that showed the condition (`Match.observed_at`), not the
  evaluation's: an evaluation that comes some seconds after the collection does not add them to
  the rule's `for`;
- matched again: `last_seen`, severity, value and texts updated; `firing` once the condition has
  held for `for_seconds`, from `first_seen` to the newest sample that still shows it (a severity
  change keeps the same finding; a firing finding stays firing while matched);
- not matched by an evaluation of its rule on its cluster: `resolved` (kept as history), unless
  that evaluation did not sample its entity (a partial collection run: missing data is not a
  condition turned false). Then it keeps its state, `first_seen` (the `for` timer) and all, until
  an evaluation samples the entity again (matched: it goes on; not matched: resolved) or it has
  not been seen for longer than the staleness bound the caller gives (`stale_before`: the
  evaluation window, past which nothing the evaluation reads says anything about it): then it is
  resolved. A whole collection that stops is told by the cluster's CollectionStale rule, which
  fires before that bound with the default window;
- its entity gone from the cluster (a consumer group or its offsets deleted, a share group
  deleted, a topic deleted, a broker unregistered: `GONE`): resolved at the next evaluation with
  `resolved_reason` `gone`, however it was sampled, and the entity matches nothing any more.

Idempotent per evaluation time: merging the same matches at the same `evaluated_at` twice changes
nothing the second time; an evaluation older than a finding's `last_seen` does not move it back.
Data-access functions: the caller owns the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.derived import SOURCES
from monitor.core.scheduler import Due
from monitor.core.vocabulary import RESOLVED_GONE
from monitor.store.changes import findings_of, raise_versions
from monitor.store.ingest import copy_rows
from monitor.store.local_settings import local_settings


@dataclass(frozen=True, slots=True)
class Match:
    rule: str
    entity: str
    entity_key: str
    cluster: str
    severity: str
    value: float | None
    summary: str
    description: str
    for_seconds: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    observed_at: datetime | None = None
    """When the newest run of the jobs of the columns deciding the match started (None: the
    evaluation time; never later than the end of the evaluation's reads, `read_by`): a new
    finding's `first_seen`, the run that first showed the condition
    (monitor.evaluate.observed.observed_at)."""
    held_at: datetime | None = None
    """Until when the condition is known to hold: the end of the newest run of any of the entity's jobs,
    the match being derived from the newest of the deciding ones (None: `observed_at`; never later
    than the evaluation). The `for` counts from `first_seen` to here, so a rule whose deciding job
    runs once a minute does not wait for that job's next run to fire."""


_STAGE = """
CREATE TEMP TABLE IF NOT EXISTS _matches (
    rule text, entity text, entity_key text, cluster text, labels jsonb, severity text,
    value double precision, summary text, description text, annotations jsonb, for_seconds int,
    observed_at timestamptz, held_at timestamptz
) ON COMMIT DROP
"""

_UPDATE = """
UPDATE findings f SET
    last_seen = :t, evaluated_at = :t, severity = m.severity, value = m.value, labels = m.labels,
    summary = m.summary, description = m.description, annotations = m.annotations,
    for_seconds = m.for_seconds,
    state = CASE WHEN f.state = 'firing'
                      OR m.held_at - f.first_seen >= make_interval(secs => m.for_seconds)
                 THEN 'firing' ELSE 'pending' END
FROM _matches m
WHERE f.rule = m.rule AND f.entity_key = m.entity_key AND f.state <> 'resolved' AND f.last_seen <= :t
"""

_INSERT = """
INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary, description,
                      annotations, for_seconds, state, first_seen, last_seen, evaluated_at)
SELECT m.rule, m.entity, m.entity_key, m.cluster, m.labels, m.severity, m.value, m.summary, m.description,
       m.annotations, m.for_seconds, CASE WHEN m.for_seconds <= 0 THEN 'firing' ELSE 'pending' END,
       m.observed_at, :t, :t
FROM _matches m
WHERE NOT EXISTS (
    SELECT 1 FROM findings f WHERE f.rule = m.rule AND f.entity_key = m.entity_key AND f.state <> 'resolved'
)
"""

_STAGE_UNSAMPLED = """
CREATE TEMP TABLE IF NOT EXISTS _unsampled (entity text, entity_key text) ON COMMIT DROP
"""

_RESOLVE = """
UPDATE findings f SET state = 'resolved', resolved_at = :t, evaluated_at = :t
WHERE f.state <> 'resolved' AND f.last_seen < :t
  AND f.cluster = ANY(:clusters) AND f.rule = ANY(:rules)
  AND NOT EXISTS (SELECT 1 FROM _matches m WHERE m.rule = f.rule AND m.entity_key = f.entity_key)
  AND (f.last_seen < CAST(:stale_before AS timestamptz) OR NOT EXISTS (
      SELECT 1 FROM _unsampled u WHERE u.entity = f.entity AND u.entity_key = f.entity_key))
"""

GONE = """(
    (x.entity = 'group' AND NOT EXISTS (
        SELECT 1 FROM latest_group_offsets l
        WHERE l.cluster = x.cluster AND l.group_id = x.labels->>'group_id' AND l.gone_at IS NULL))
    OR (x.entity = 'group_topic' AND NOT EXISTS (
        SELECT 1 FROM latest_group_offsets l
        WHERE l.cluster = x.cluster AND l.group_id = x.labels->>'group_id' AND l.topic = x.labels->>'topic'
          AND l.gone_at IS NULL))
    OR (x.entity = 'group_partition' AND NOT EXISTS (
        SELECT 1 FROM latest_group_offsets l
        WHERE l.cluster = x.cluster AND l.group_id = x.labels->>'group_id' AND l.topic = x.labels->>'topic'
          AND l.partition::text = x.labels->>'partition' AND l.gone_at IS NULL))
    OR (x.entity IN ('share_group', 'share_group_topic') AND EXISTS (
        SELECT 1 FROM share_group_support s
        WHERE s.cluster = x.cluster AND s.available AND s.listed IS NOT NULL
          AND NOT (x.labels->>'group_id' = ANY(s.listed))))
    OR (x.entity IN ('group_partition', 'group_topic', 'share_group_topic', 'partition', 'topic')
        AND EXISTS (
        SELECT 1 FROM topics t
        WHERE t.cluster = x.cluster AND t.topic = x.labels->>'topic' AND t.deleted_at IS NOT NULL))
    OR (x.entity = 'broker' AND EXISTS (
        SELECT 1 FROM brokers b
        WHERE b.cluster = x.cluster AND b.broker_id::text = x.labels->>'broker_id'
          AND b.unregistered_at IS NOT NULL))
)"""
"""Whether the cluster no longer has the entity of a row `x` (a finding, or a match: its cluster,
entity and labels, which hold the entity's key columns): a consumer group, group-topic or
group-partition none of whose committed offsets it still has (`latest_group_offsets.gone_at`,
set by the offsets job), a share group its newest listing did not name (`share_group_support.listed`,
by the share-groups job; a cluster without share groups, or a listing not known, makes none gone),
a topic deleted (`topics.deleted_at`, by the metadata job; its
partitions and the group offsets on it with it), a broker unregistered from the controller
(`brokers.unregistered_at`, by the metadata job; a broker that is down is still registered).

One branch per kind of group entity, each naming the key columns it has: PostgreSQL then checks
the group and group-topic branches against one hashed set of the offsets still held, and a
group-partition by its primary key. Written as one branch whose topic and partition were
optional, every row scanned its group's offsets (119,000 open findings of a fleet of 100,000
group-partitions: 10 s for each of the two statements that ask, instead of 0.3)."""

MERGE_SETTINGS = {"jit": "off"}
"""What `merge_findings` runs its statements under (restored after it). The correlated checks of
`GONE` make PostgreSQL estimate a cost past `jit_above_cost` for statements that take a fraction
of a second, and compiling them took about a second each (docs/bench/evaluate-findings.md)."""

_DROP_GONE = f"DELETE FROM _matches x WHERE {GONE}"

_RESOLVE_GONE = f"""
UPDATE findings x
SET state = 'resolved', resolved_at = :t, evaluated_at = :t, resolved_reason = '{RESOLVED_GONE}'
WHERE x.state <> 'resolved' AND x.last_seen <= :t AND x.cluster = ANY(:clusters) AND x.rule = ANY(:rules)
  AND {GONE}
"""

_KEPT = """
SELECT count(*) FROM findings f JOIN _unsampled u ON u.entity = f.entity AND u.entity_key = f.entity_key
WHERE f.state <> 'resolved' AND f.last_seen < :t AND f.cluster = ANY(:clusters) AND f.rule = ANY(:rules)
"""


def _times(match: Match, evaluated_at: datetime, read_by: datetime) -> tuple[datetime, datetime]:
    """(observed_at, held_at) of `match` as merged: observed no later than the end of the
    evaluation's reads (a run begun while it read may have shown the condition: dated any
    earlier, its `for` would elapse early), held no later than the evaluation and never before
    observed."""
    observed = min(match.observed_at or evaluated_at, max(read_by, evaluated_at))
    return observed, min(max(match.held_at or observed, observed), evaluated_at)


def merge_findings(
    conn: Connection,
    matches: Sequence[Match],
    evaluated_at: datetime,
    *,
    clusters: Collection[str],
    rules: Collection[str],
    unsampled: Collection[tuple[str, str]] = (),
    stale_before: datetime | None = None,
    read_by: datetime | None = None,
) -> dict[str, int]:
    """Merge `matches` of an evaluation of `rules` over `clusters` at `evaluated_at`, whose reads
    of the store ended by `read_by` (None: `evaluated_at`).

    `unsampled` holds the (entity, entity_key) pairs the evaluation did not sample: their open
    findings are neither resolved nor changed, unless last seen before `stale_before` (None: kept
    however old). An entity the cluster no longer has (`GONE`) gives no match, and its open
    findings resolve with the reason `gone`, sampled or not. Returns counts: new, updated,
    resolved, gone (of those resolved), kept (open findings of unsampled entities left as they
    were), and the open findings by state afterwards. Raises the findings counter of each cluster
    merged (`monitor.store.changes`), which tells the alert cycle to read them again.
    """
    read_by = read_by or evaluated_at
    conn.execute(text(_STAGE))
    conn.execute(text("TRUNCATE _matches"))
    conn.execute(text(_STAGE_UNSAMPLED))
    conn.execute(text("TRUNCATE _unsampled"))
    copy_rows(conn, "_unsampled", ("entity", "entity_key"), list(unsampled))
    copy_rows(
        conn,
        "_matches",
        ("rule", "entity", "entity_key", "cluster", "labels", "severity", "value", "summary", "description",
         "annotations", "for_seconds", "observed_at", "held_at"),
        [
            (m.rule, m.entity, m.entity_key, m.cluster, json.dumps(m.labels), m.severity, m.value, m.summary,
             m.description, json.dumps(m.annotations), m.for_seconds, *_times(m, evaluated_at, read_by))
            for m in matches
        ],
    )  # fmt: skip
    params: dict[str, Any] = {"t": evaluated_at}
    scope = {**params, "clusters": list(clusters), "rules": list(rules), "stale_before": stale_before}
    with local_settings(conn, MERGE_SETTINGS):
        conn.execute(text(_DROP_GONE))
        updated = conn.execute(text(_UPDATE), params).rowcount
        new = conn.execute(text(_INSERT), params).rowcount
        gone = conn.execute(text(_RESOLVE_GONE), scope).rowcount
        resolved = gone + conn.execute(text(_RESOLVE), scope).rowcount
        kept = conn.execute(text(_KEPT), scope).scalar_one() if unsampled else 0
    raise_versions(conn, (findings_of(c) for c in {*clusters, *(m.cluster for m in matches)}))
    counted = conn.execute(
        text("SELECT state, count(*) FROM findings WHERE state <> 'resolved' GROUP BY state")
    )
    states: dict[str, int] = {str(state): int(n) for state, n in counted.all()}
    return {
        "new": int(new),
        "updated": int(updated),
        "resolved": int(resolved),
        "gone": int(gone),
        "kept": int(kept),
        "pending": int(states.get("pending", 0)),
        "firing": int(states.get("firing", 0)),
    }


def next_due(conn: Connection, clusters: Collection[str], seen_at: datetime) -> list[Due]:
    """When the pending findings of `clusters` that the evaluation at `seen_at` matched have held
    for their rule's `for`, counted in sample time as `merge_findings` counts it (`first_seen +
    for`, reached once a run of one of the entity's jobs (core.derived.SOURCES) finishes then or
    later): the earliest of each cluster's entity. A finding kept as it was (its entity not
    sampled) waits for the evaluation's interval rather than asking at every sample."""
    rows = conn.execute(
        text(
            "SELECT cluster, entity, min(first_seen + make_interval(secs => for_seconds)) FROM findings"
            " WHERE state = 'pending' AND cluster = ANY(:clusters) AND last_seen >= :seen"
            " GROUP BY cluster, entity ORDER BY 3, 1, 2"
        ),
        {"clusters": list(clusters), "seen": seen_at},
    )
    return [
        Due(str(cluster), at, frozenset(SOURCES.get(str(entity), ()))) for cluster, entity, at in rows.all()
    ]
