"""Read layer: clusters, their brokers, and the open findings.

A cluster's numbers come from its newest evaluation (`derived_cluster`, what `cluster_state`
shows) joined to the collected metadata, with counts the overview needs beside them: brokers up,
topics, consumer groups by status, open findings by severity; and the Kafka release its brokers
run, with what that release cannot give (`monitor.core.kafka_features`). Its consumer groups and
lagging groups are counted from the offset lag as fresh as the store holds it
(`monitor.expose.read.fresh.group_count`), so a commit moves them between evaluations and the
groups count before the first. See `monitor.expose.read.queries` for the conventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from monitor.core.kafka_features import (
    FIRST_RELEASE,
    parse_version,
    unavailable_features,
    unavailable_text,
    version_text,
)
from monitor.core.vocabulary import most_severe_first_sql
from monitor.expose.read.derived_records import BrokerColumns, ClusterColumns
from monitor.expose.read.fields import Described
from monitor.expose.read.fresh import Counter, group_count
from monitor.expose.read.queries import (
    FIRST_PAGE,
    Listing,
    Page,
    fetch_page,
    latest_evaluation,
    records,
)
from monitor.expose.read.record_columns import select_list
from monitor.store.evaluation import latest_rows


@dataclass(frozen=True, slots=True)
class Unavailable(Described):
    """A feature the cluster's Kafka release cannot give, said once for the cluster."""

    feature: str
    text: str
    from_version: str


def unavailable(kafka_version: str | None) -> list[Unavailable]:
    """What a cluster of release `kafka_version` ("2.8") cannot give; nothing when the release is
    unknown (null)."""
    if kafka_version is None:
        return []
    version = parse_version(kafka_version)
    return [
        Unavailable(feature.value, unavailable_text(feature, version), version_text(FIRST_RELEASE[feature]))
        for feature in unavailable_features(version)
    ]


def kafka_releases(conn: Connection) -> dict[str, tuple[str | None, list[Unavailable]]]:
    """The Kafka release of every cluster the monitor has seen (None: not identified) and what it
    cannot give, by name."""
    rows = conn.execute(text("SELECT name, kafka_version FROM clusters ORDER BY name"))
    return {str(name): (version, unavailable(version)) for name, version in rows}


@dataclass(frozen=True, slots=True)
class ClusterState(ClusterColumns, Described):
    """A cluster: its metadata, the health numbers of its newest evaluation, and the counts an
    overview shows. The evaluated numbers are null before the first evaluation."""

    __entity__ = "cluster"
    __overrides__ = {"partitions": "partitions in the cluster"}

    cluster: str
    cluster_id: str | None
    bootstrap: str
    controller_id: int | None
    first_seen: datetime
    last_seen: datetime
    brokers_up: int
    topics: int
    consumer_groups: int
    lagging_groups: int
    groups_by_status: dict[str, int]
    findings_by_severity: dict[str, int]
    evaluated_at: datetime | None
    kafka_version: str | None
    unavailable: list[Unavailable]
    offset_lag_as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class BrokerState(BrokerColumns, Described):
    """A broker as the metadata shows it, with its leadership, disk and probe numbers."""

    __entity__ = "broker"

    host: str
    port: int
    rack: str | None
    up: bool
    first_seen: datetime
    last_seen: datetime
    evaluated_at: datetime | None


@dataclass(frozen=True, slots=True)
class Finding(Described):
    """An open finding: a rule that matches an entity now (pending until its `for` holds)."""

    __overrides__ = {
        "first_seen": "when the rule first matched",
        "last_seen": "the last evaluation in which the rule matched",
        "evaluated_at": "the evaluation that last updated the finding",
    }

    id: int
    cluster: str
    rule: str
    entity: str
    entity_key: str
    labels: dict[str, str]
    severity: str
    value: float | None
    summary: str
    description: str
    annotations: dict[str, str]
    state: str
    first_seen: datetime
    last_seen: datetime
    evaluated_at: datetime


_CLUSTER_STATE = f"""
    SELECT s.name AS cluster, s.cluster_id, s.bootstrap, s.controller_id, s.first_seen, s.last_seen,
           {select_list(ClusterColumns, "d")}, d.evaluated_at, s.kafka_version,
           (SELECT count(*) FROM brokers b WHERE b.cluster = s.name AND b.up) AS brokers_up,
           (SELECT count(*) FROM topics t WHERE t.cluster = s.name AND t.deleted_at IS NULL)
               AS topics,
           coalesce(g.groups_by_status, '{{}}'::jsonb) AS groups_by_status,
           coalesce(f.findings_by_severity, '{{}}'::jsonb) AS findings_by_severity
    FROM clusters s
    LEFT JOIN {latest_rows("cluster")} d ON d.cluster = s.name
    LEFT JOIN LATERAL (
        SELECT jsonb_object_agg(status, n) AS groups_by_status
        FROM (SELECT coalesce(status, 'UNKNOWN') AS status, count(*) AS n
              FROM group_lag WHERE cluster = s.name GROUP BY 1) x
    ) g ON true
    LEFT JOIN LATERAL (
        SELECT jsonb_object_agg(severity, n) AS findings_by_severity
        FROM (SELECT severity, count(*) AS n FROM findings
              WHERE cluster = s.name AND state <> 'resolved' GROUP BY severity) y
    ) f ON true
"""


def _cluster_states(
    conn: Connection, where: str, params: dict[str, Any], count: Counter
) -> list[ClusterState]:
    rows = conn.execute(text(_CLUSTER_STATE + where), params).all()
    return [
        ClusterState(
            **row._mapping,
            **asdict(count(conn, row.cluster)),
            unavailable=unavailable(row._mapping["kafka_version"]),
        )
        for row in rows
    ]


def counted(conn: Connection, state: ClusterState, count: Counter = group_count) -> ClusterState:
    """`state` (kept between evaluations) with its groups and lagging groups counted again from the
    offsets the store holds now (`fresh.group_count`, or `count`)."""
    return replace(state, **asdict(count(conn, state.cluster)))


def clusters(conn: Connection, count: Counter = group_count) -> list[ClusterState]:
    """Every cluster the monitor has seen, by name; their groups counted by `count` (live unless
    a reader keeps the counts: `fresh.KeptCounts`)."""
    return _cluster_states(conn, " ORDER BY s.name", {}, count)


def cluster(conn: Connection, name: str, count: Counter = group_count) -> ClusterState | None:
    """One cluster, or None when the monitor has never seen it; its groups counted by `count`."""
    found = _cluster_states(conn, " WHERE s.name = :c", {"c": name}, count)
    return found[0] if found else None


_BROKER_COLUMNS = select_list(BrokerColumns, "d", {"broker_id": "b"})
"""The broker's id from the metadata (a broker not evaluated yet has one), its numbers from the
newest evaluation."""


def brokers(conn: Connection, cluster: str) -> list[BrokerState]:
    """The brokers of `cluster` by id, down ones included (a broker down is `up = false`)."""
    return records(
        conn,
        BrokerState,
        f"""
        SELECT {_BROKER_COLUMNS}, b.host, b.port, b.rack, b.up, b.first_seen, b.last_seen, d.evaluated_at
        FROM brokers b
        LEFT JOIN {latest_rows("broker")} d ON d.cluster = b.cluster AND d.broker_id = b.broker_id
        WHERE b.cluster = :c ORDER BY b.broker_id
        """,
        {"c": cluster},
    )


def findings(
    conn: Connection,
    *,
    cluster: str | None = None,
    severity: Sequence[str] = (),
    rule: Sequence[str] = (),
    page: Page = FIRST_PAGE,
) -> Listing[Finding]:
    """Open findings (pending and firing), most severe first, then oldest first; filtered by
    cluster, severities and rules when given. `evaluated_at` is the cluster's newest evaluation
    when one cluster is asked for."""
    where = ["state <> 'resolved'"]
    params: dict[str, Any] = {}
    if cluster is not None:
        where.append("cluster = :cluster")
        params["cluster"] = cluster
    if severity:
        where.append("severity = ANY(:severity)")
        params["severity"] = list(severity)
    if rule:
        where.append("rule = ANY(:rule)")
        params["rule"] = list(rule)
    body = f"""
        SELECT id, cluster, rule, entity, entity_key, labels, severity, value, summary,
               description, annotations, state, first_seen, last_seen, evaluated_at
        FROM findings WHERE {" AND ".join(where)}
    """
    order = f"{most_severe_first_sql('severity')}, first_seen, id"
    evaluated_at = latest_evaluation(conn, cluster) if cluster is not None else None
    return fetch_page(conn, Finding, body, params, order, page, evaluated_at)
