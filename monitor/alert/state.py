"""The SQL an alert cycle runs, and the rows it reads and writes as the cycle's records.

The cycle (`monitor.alert.cycle`) runs inside one transaction: `lock` first, so two daemons never
decide the same notification twice; then the reads; then `write_alerts` and `write_groups`. These
functions take the caller's connection and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import fields
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, text

from monitor.alert.alerts import AlertRow
from monitor.alert.dispatch.groups import GroupRow
from monitor.alert.model import PartitionDetail
from monitor.alert.mute.silence import SilenceRow
from monitor.store.ingest import copy_rows

CYCLE_LOCK = 0x6B68_616C  # pg_advisory_xact_lock key of the alert cycle ("khal")


def lock(conn: Connection) -> None:
    """Wait for the cycle's lock, held until the caller's transaction ends."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": CYCLE_LOCK})


def open_findings(conn: Connection, clusters: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The findings that are not resolved (pending or firing), as mappings: every cluster's, or
    those of `clusters`."""
    if clusters is None:
        result = conn.execute(_OPEN_FINDINGS)
    else:
        result = conn.execute(_OPEN_FINDINGS_OF, {"clusters": list(clusters)})
    names = tuple(result.keys())  # plain dicts from plain rows: a RowMapping per row costs twice as much
    return [dict(zip(names, row, strict=True)) for row in result.all()]


def resolved_reasons(conn: Connection, open_alerts: Iterable[AlertRow]) -> dict[tuple[str, str], str]:
    """(rule, entity_key) -> the reason (`gone`) the newest finding of each of `open_alerts`
    resolved with, for those whose finding resolved with one: what their alerts resolve with."""
    keys = [(a.rule, a.entity_key) for a in open_alerts]
    if not keys:
        return {}
    params = {"rules": [k[0] for k in keys], "keys": [k[1] for k in keys]}
    rows = conn.execute(_RESOLVED_REASONS, params)
    return {(r.rule, r.entity_key): r.resolved_reason for r in rows if r.resolved_reason is not None}


def open_alerts(conn: Connection) -> dict[str, AlertRow]:
    """The alerts that are not resolved, by fingerprint."""
    rows = conn.execute(_OPEN_ALERTS).all()  # one fetch: thousands of rows in a big incident
    return {r.fingerprint: _alert_from_row(r) for r in rows}


def active_silences(conn: Connection, now: datetime) -> list[SilenceRow]:
    return [SilenceRow(int(r.id), tuple(r.matchers)) for r in conn.execute(_ACTIVE_SILENCES, {"now": now})]


def open_groups(conn: Connection) -> dict[tuple[str, str], GroupRow]:
    """The open incidents, by (receiver, group key)."""
    rows = (_group_from_row(r._mapping) for r in conn.execute(_OPEN_GROUPS))
    return {(g.receiver, g.group_key): g for g in rows}


def latest_group_partitions(
    conn: Connection, cluster: str, group_id: str, floor: datetime
) -> list[PartitionDetail]:
    """The partitions of a consumer group in its newest evaluation since `floor` (`since` unset)."""
    params = {"cluster": cluster, "group_id": group_id, "floor": floor}
    return [
        PartitionDetail(
            topic=r.topic,
            partition=int(r.partition),
            status=r.status or "OK",
            since=None,
            offset_lag=None if r.offset_lag is None else int(r.offset_lag),
            lag_seconds=r.lag_seconds,
            time_until_data_loss_seconds=r.time_until_data_loss_seconds,
        )
        for r in conn.execute(_LATEST_GROUP_PARTITIONS, params)
    ]


def partition_status_since(
    conn: Connection, cluster: str, group_id: str, topic: str, partition: int, status: str, floor: datetime
) -> datetime | None:
    """When a group's partition entered `status` (its first evaluation in it since it was last in
    another), looking back to `floor`."""
    params = {
        "cluster": cluster,
        "group_id": group_id,
        "topic": topic,
        "partition": partition,
        "floor": floor,
        "status": status,
    }
    since: datetime | None = conn.execute(_STATUS_SINCE, params).scalar()
    return since


def latest_share_partitions(
    conn: Connection, cluster: str, group_id: str, floor: datetime
) -> list[PartitionDetail]:
    """The share partitions of a share group in its newest samples since `floor`: STALL since
    the sample its start offset took its current value at, when records arrived after that and
    wait (as the evaluation's `stalled_seconds`, monitor.evaluate.transforms.share); OK with
    its lag otherwise. Share partitions have no record timestamps nor a data-loss time."""
    params = {"cluster": cluster, "group_id": group_id, "floor": floor}
    return [
        PartitionDetail(
            topic=r.topic,
            partition=int(r.partition),
            status="STALL" if r.stalled else "OK",
            since=r.still_since if r.stalled else None,
            offset_lag=None if r.lag is None else int(r.lag),
            lag_seconds=None,
            time_until_data_loss_seconds=None,
        )
        for r in conn.execute(_LATEST_SHARE_PARTITIONS, params)
    ]


def last_alert(conn: Connection, fp: str) -> AlertRow | None:
    """The newest alert with fingerprint `fp`, resolved or not."""
    row = conn.execute(
        text(f"SELECT {_ALERT_ROW_COLUMNS} FROM alerts WHERE fingerprint = :fp ORDER BY id DESC LIMIT 1"),
        {"fp": fp},
    ).first()
    return _alert_from_row(row) if row is not None else None


_OPEN_FINDINGS = text(
    "SELECT rule, entity, entity_key, cluster, labels, severity, value, summary, description, annotations,"
    " state FROM findings WHERE state <> 'resolved'"
)
_OPEN_FINDINGS_OF = text(f"{_OPEN_FINDINGS.text} AND cluster = ANY(:clusters)")
_ROW_FIELDS = tuple(f.name for f in fields(AlertRow) if f.name not in ("changed", "impact"))
"""The fields of an AlertRow that are columns of `alerts` (all but this cycle's marks), in order."""
_ALERT_ROW_COLUMNS = ", ".join(_ROW_FIELDS)
_OPEN_ALERTS = text(f"SELECT {_ALERT_ROW_COLUMNS} FROM alerts WHERE state <> 'resolved'")
_RESOLVED_REASONS = text(
    "SELECT DISTINCT ON (f.rule, f.entity_key) f.rule, f.entity_key, f.resolved_reason"
    " FROM findings f JOIN unnest(CAST(:rules AS text[]), CAST(:keys AS text[])) AS k(rule, entity_key)"
    " ON f.rule = k.rule AND f.entity_key = k.entity_key"
    " WHERE f.state = 'resolved'"
    " AND NOT EXISTS (SELECT 1 FROM findings o WHERE o.rule = f.rule AND o.entity_key = f.entity_key"
    " AND o.state <> 'resolved')"
    " ORDER BY f.rule, f.entity_key, f.resolved_at DESC"
)
_OPEN_GROUPS = text("SELECT * FROM alert_groups WHERE closed_at IS NULL")
_ACTIVE_SILENCES = text(
    "SELECT id, matchers FROM silences WHERE starts_at <= :now AND ends_at > :now AND expired_at IS NULL"
    " ORDER BY id"
)


def _alert_from_row(r: Any) -> AlertRow:
    """An alert from a row of `_ALERT_ROW_COLUMNS`, in that order (AlertRow's own)."""
    return AlertRow(*r)


def _group_from_row(r: Any) -> GroupRow:
    values = {k: r[k] for k in GroupRow.__dataclass_fields__}
    values["group_labels"] = dict(values["group_labels"])
    values["notified"] = dict(values["notified"])
    return GroupRow(**values)


_INSERTED = (*_ROW_FIELDS[1:], "updated_at")
"""The columns a new alert is inserted with: its fields but the id, and when it was written."""
_stored_values = attrgetter(*_ROW_FIELDS[1:])


def _inserted_row(a: AlertRow, now: datetime) -> tuple[Any, ...]:
    """A new alert's values of the `_INSERTED` columns, in that order, as the binary COPY takes
    them (the labels as a dict)."""
    return (*_stored_values(a), now)


_UPDATED = (
    "id", "labels", "severity", "state", "summary", "description", "value", "annotations", "starts_at",
    "resolved_at", "updated_at", "silenced_by", "inhibited_by", "resolved_reason",
)  # fmt: skip
"""The columns a changed alert is written with: what a cycle changes of it, and when."""


def _updated_row(a: AlertRow, now: datetime) -> tuple[Any, ...]:
    """A changed alert's values of the `_UPDATED` columns, in that order, as the binary COPY takes
    them."""
    return (
        a.id, a.labels, a.severity, a.state, a.summary, a.description, a.value, a.annotations,
        a.starts_at, a.resolved_at, now, a.silenced_by, a.inhibited_by, a.resolved_reason,
    )  # fmt: skip


_STAGE_CHANGES = text(
    "CREATE TEMP TABLE IF NOT EXISTS _alert_changes ON COMMIT DROP"
    f" AS SELECT {', '.join(_UPDATED)} FROM alerts WITH NO DATA"
)
_APPLY_CHANGES = text(
    "UPDATE alerts a SET "
    + ", ".join(f"{c} = c.{c}" for c in _UPDATED if c != "id")
    + " FROM _alert_changes c WHERE a.id = c.id"
)


def write_alerts(conn: Connection, alerts: Iterable[AlertRow], now: datetime) -> None:
    """Insert the new alerts (setting their `id`), update the changed ones."""
    inserts: list[tuple[Any, ...]] = []
    inserted: dict[str, AlertRow] = {}
    updates: list[tuple[Any, ...]] = []
    for alert in alerts:
        if alert.id is None:
            inserts.append(_inserted_row(alert, now))
            inserted[alert.fingerprint] = alert
        elif alert.changed:
            updates.append(_updated_row(alert, now))
    if inserts:  # a binary COPY: a cluster going down opens thousands at once (10,000: 0.1 s, not 1 s)
        # Only a cycle inserts alerts, under the cycle's lock: the ids above the largest are these.
        floor = conn.execute(text("SELECT coalesce(max(id), 0) FROM alerts")).scalar_one()
        copy_rows(conn, "alerts", _INSERTED, inserts, binary=True)
        for alert_id, fp in conn.execute(
            text("SELECT id, fingerprint FROM alerts WHERE id > :floor"), {"floor": floor}
        ).all():
            inserted[fp].id = int(alert_id)
    if updates:  # staged by COPY and applied in one statement: an evaluation moves every value
        conn.execute(_STAGE_CHANGES)  # (25,000 alerts: 0.2 s, where one UPDATE each took 1.9 s)
        conn.execute(text("TRUNCATE _alert_changes"))
        copy_rows(conn, "_alert_changes", _UPDATED, updates, binary=True)
        conn.execute(_APPLY_CHANGES)


def _group_params(g: GroupRow) -> dict[str, Any]:
    values = {k: getattr(g, k) for k in GroupRow.__dataclass_fields__}
    values["group_labels"] = json.dumps(g.group_labels)
    values["notified"] = json.dumps(g.notified)
    return values


def write_groups(conn: Connection, groups: Iterable[GroupRow]) -> None:
    """Insert the new incidents, update the others."""
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for group in groups:
        (inserts if group.id is None else updates).append(_group_params(group))
    columns = [c for c in GroupRow.__dataclass_fields__ if c != "id"]
    if inserts:
        values = ", ".join(
            f"CAST(:{c} AS jsonb)" if c in ("group_labels", "notified") else f":{c}" for c in columns
        )
        conn.execute(text(f"INSERT INTO alert_groups ({', '.join(columns)}) VALUES ({values})"), inserts)
    if updates:
        sets = ", ".join(
            f"{c} = CAST(:{c} AS jsonb)" if c in ("group_labels", "notified") else f"{c} = :{c}"
            for c in columns
            if c not in ("receiver", "group_key", "dedup_key", "ack_token", "created_at")
        )
        conn.execute(text(f"UPDATE alert_groups SET {sets} WHERE id = :id"), updates)


_LATEST_GROUP_PARTITIONS = text(
    """
SELECT topic, partition, status, offset_lag, lag_seconds, time_until_data_loss_seconds
FROM derived_group_partition
WHERE cluster = :cluster AND group_id = :group_id
  AND evaluated_at = (SELECT max(evaluated_at) FROM derived_group_partition
                      WHERE cluster = :cluster AND group_id = :group_id AND evaluated_at >= :floor)
"""
)

_LATEST_SHARE_PARTITIONS = text(
    """
WITH s AS (
    SELECT topic, partition, sampled_at, start_offset, end_offset, lag FROM share_group_offsets
    WHERE cluster = :cluster AND group_id = :group_id AND sampled_at >= :floor
), newest AS (
    SELECT DISTINCT ON (topic, partition) topic, partition, start_offset, end_offset, lag
    FROM s ORDER BY topic, partition, sampled_at DESC
), still AS (
    SELECT DISTINCT ON (n.topic, n.partition) n.topic, n.partition, s.sampled_at, s.end_offset
    FROM newest n JOIN s USING (topic, partition)
    WHERE s.sampled_at > coalesce(
        (SELECT max(m.sampled_at) FROM s m WHERE m.topic = n.topic AND m.partition = n.partition
           AND m.start_offset IS DISTINCT FROM n.start_offset), '-infinity')
    ORDER BY n.topic, n.partition, s.sampled_at
)
SELECT n.topic, n.partition, n.lag, t.sampled_at AS still_since,
       coalesce(n.start_offset IS NOT NULL AND n.lag > 0 AND n.end_offset > t.end_offset, false) AS stalled
FROM newest n JOIN still t USING (topic, partition)
"""
)

_STATUS_SINCE = text(
    """
SELECT min(h.evaluated_at)
FROM derived_group_partition h
WHERE h.cluster = :cluster AND h.group_id = :group_id AND h.topic = :topic
  AND h.partition = :partition AND h.evaluated_at >= :floor
  AND h.evaluated_at > coalesce(
      (SELECT max(o.evaluated_at) FROM derived_group_partition o
       WHERE o.cluster = :cluster AND o.group_id = :group_id AND o.topic = :topic
         AND o.partition = :partition AND o.evaluated_at >= :floor
         AND o.status IS DISTINCT FROM :status),
      '-infinity'::timestamptz)
"""
)
