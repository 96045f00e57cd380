"""The queries/ catalogue of ready SQL for incident reviews.

Every `.sql` file in queries/ has a complete header whose parameters are exactly the psql variables
it uses, is listed in queries/README.md, and runs as a member of the read-only role
`kafka_health_reader`: bound through psycopg, and in psql itself (the documented command and the
test's values), against a migrated database holding one known incident on cluster `prod`, with
decoys on cluster `stage` and before the window. The answers about the incident are checked exactly.
Every query also runs on `populated`, the database filled by a real collection, evaluation and
alert cycle.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, create_engine, insert, text
from sqlalchemy.exc import ProgrammingError

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.postgres import find_binaries
from monitor.store.partitions import ensure_partitions
from monitor.store.schema import metadata
from tests.fixtures.populated import UNREACHABLE, Populated
from tests.query_files import Header, QueryFileError, body, parse_header, to_pyformat

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"
FILES = sorted(QUERIES.glob("*.sql"))

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
E0, E1, E2 = T0 - 180 * MINUTE, T0 - 30 * MINUTE, T0  # evaluations: before the window, in it, latest
PARAMS = {
    "cluster": "prod",
    "since": "2026-06-01 11:00:00+00",  # T0 - 1 h
    "until": "2026-06-01 13:00:00+00",  # T0 + 1 h
    "group": "billing",
    "pager": "oncall-pager",
}


def _header(path: Path) -> Header:
    return parse_header(path.read_text())


def run_query(engine: Engine, path: Path, params: dict[str, str]) -> list[dict[str, Any]]:
    """Rows of a query file, its psql variables bound from `params`."""
    sql, names = to_pyformat(body(path.read_text()))
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute(sql, {name: params[name] for name in names})
        columns = [column.name for column in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def query(engine: Engine, name: str, **params: str) -> list[dict[str, Any]]:
    return run_query(engine, QUERIES / name, {**PARAMS, **params})


# ---------------------------------------------------------------------------------------------
# The files themselves


def test_the_catalogue_is_found() -> None:
    # With no file found, the tests parametrized over the files would all pass.
    assert len(FILES) >= 12, f"queries/ holds {len(FILES)} .sql files"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_header_declares_exactly_the_parameters_the_query_uses(path: Path) -> None:
    try:
        header = _header(path)
    except QueryFileError as exc:
        pytest.fail(f"{path.name}: {exc}")
    used = set(to_pyformat(body(path.read_text()))[1])
    declared = set(header.parameters)
    assert used <= declared, f"{path.name} uses {sorted(used - declared)} without declaring them"
    assert declared <= used, f"{path.name} declares {sorted(declared - used)} and does not use them"
    assert header.question.endswith("?") or header.question.endswith("."), header.question


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_run_line_is_a_psql_command_setting_every_parameter(path: Path) -> None:
    header = _header(path)
    words = shlex.split(header.run)
    assert words[0] == "psql" and words[-2:] == ["-f", f"queries/{path.name}"], header.run
    settings = [words[i + 1] for i, word in enumerate(words) if word == "-v"]
    assert sorted(s.split("=", 1)[0] for s in settings) == sorted(header.parameters), header.run


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_query_is_one_statement(path: Path) -> None:
    sql = body(path.read_text()).strip()
    assert sql.endswith(";") and ";" not in sql[:-1], f"{path.name}: one statement, ending with ';'"


def test_readme_indexes_every_query() -> None:
    rows = {}
    for line in (QUERIES / "README.md").read_text().splitlines():
        files = re.findall(r"`([a-z0-9_]+\.sql)`", line)
        if line.startswith("| ") and files:
            assert len(files) == 1, f"one file per catalogue row: {line}"
            rows[files[0]] = line
    assert set(rows) == {path.name for path in FILES}
    for path in FILES:
        parameters = set(re.findall(r"`([a-z_]+)`", rows[path.name].rsplit("|", 2)[1]))
        assert parameters == set(_header(path).parameters), f"README row of {path.name}: {parameters}"


# ---------------------------------------------------------------------------------------------
# A database with one known incident


def _insert(conn: Connection, table: str, *rows: dict[str, Any]) -> None:
    for row in rows:
        conn.execute(insert(metadata.tables[table]).values(**row))


def _group_partition(
    cluster: str, at: datetime, group: str, topic: str, partition: int, lag: int, seconds: float,
    until_loss: float | None, status: str, *, loss: bool = False, method: str = "exact",
) -> dict[str, Any]:  # fmt: skip
    return {
        "cluster": cluster, "evaluated_at": at, "group_id": group, "topic": topic,
        "partition": partition, "offset_lag": lag, "lag_seconds": seconds,
        "time_until_data_loss_seconds": until_loss, "data_loss_occurred": loss, "status": status,
        "lag_seconds_method": method, "data_loss_limit": "size" if partition else "time",
        "consume_rate": 1.0, "produce_rate": 2.0, "group_state": "Stable", "members": 2,
    }  # fmt: skip


def _group(
    cluster: str, at: datetime, group: str, lag: int, seconds: float, status: str, members: int,
    **more: Any,
) -> dict[str, Any]:  # fmt: skip
    return {
        "cluster": cluster, "evaluated_at": at, "group_id": group, "offset_lag": lag,
        "max_offset_lag": lag, "lag_seconds": seconds, "max_lag_seconds": seconds, "status": status,
        "group_state": "Stable" if members else "Empty", "members": members, **more,
    }  # fmt: skip


def _fill(conn: Connection) -> None:
    ensure_partitions(conn, T0, ahead_days=1)
    day_before = T0 - 20 * 60 * MINUTE  # yesterday: outside the window, inside a partition
    _insert(conn, "clusters",
        {"name": "prod", "bootstrap": "k:9092", "controller_id": 1, "first_seen": day_before, "last_seen": T0},
        {"name": "stage", "bootstrap": "k2:9092", "controller_id": 1, "first_seen": day_before, "last_seen": T0},
    )  # fmt: skip
    _insert(conn, "brokers", *(
        {"cluster": "prod", "broker_id": b, "host": f"b{b}", "port": 9092, "rack": f"r{b}",
         "first_seen": day_before, "last_seen": T0, "up": b != 3} for b in (1, 2, 3)
    ), {"cluster": "stage", "broker_id": 1, "host": "s1", "port": 9092, "rack": None, "first_seen": day_before,
        "last_seen": T0, "up": True})  # fmt: skip
    _insert(conn, "partitions",
        {"cluster": "prod", "topic": "orders", "partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2], "updated_at": T0},
        {"cluster": "prod", "topic": "orders", "partition": 1, "leader": None, "replicas": [3, 1, 2], "isr": [], "updated_at": T0},
        {"cluster": "prod", "topic": "payments", "partition": 0, "leader": 2, "replicas": [1, 2, 3], "isr": [1, 2, 3], "updated_at": T0},
        {"cluster": "stage", "topic": "orders", "partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1], "updated_at": T0},
    )  # fmt: skip

    # Evaluations: prod at E0 (before the window), E1 and E2 (latest); stage at E1.
    _insert(conn, "derived_cluster",
        *({"cluster": "prod", "evaluated_at": at, "brokers": 3, "brokers_down": 1, "partitions": 3,
           "offline_partitions": 1, "under_replicated_partitions": 2, "under_min_isr_partitions": 1,
           "max_leader_imbalance": 2.0, "collection_age_seconds": 12.0, "unreachable": False} for at in (E0, E1, E2)),
        {"cluster": "stage", "evaluated_at": E1, "brokers": 1, "brokers_down": 0, "partitions": 1,
         "offline_partitions": 0, "under_replicated_partitions": 1, "under_min_isr_partitions": 0,
         "max_leader_imbalance": 1.0, "collection_age_seconds": 9.0, "unreachable": False},
    )  # fmt: skip
    gp = _group_partition
    _insert(conn, "derived_group_partition",
        gp("prod", E0, "billing", "orders", 0, 99999, 99999, None, "OK"),  # huge, but before the window
        gp("prod", E1, "billing", "orders", 0, 100, 60, 3600, "WARN"),
        gp("prod", E1, "billing", "orders", 1, 4000, 3000, 600, "WARN", method="interpolated"),
        gp("prod", E1, "audit", "orders", 0, 0, 0, None, "OK"),
        gp("prod", E1, "reports", "payments", 0, 10, 30, 500000, "STALL"),
        gp("prod", E2, "billing", "orders", 0, 250, 120, 1800, "STOP"),
        gp("prod", E2, "billing", "orders", 1, 5000, 4000, None, "STOP", loss=True, method="interpolated"),
        gp("prod", E2, "audit", "orders", 0, 0, 0, None, "OK"),
        gp("prod", E2, "reports", "payments", 0, 12, 40, 499990, "STALL"),
        gp("stage", E1, "billing", "orders", 0, 7, 5, 10, "STOP"),  # the most urgent of all, elsewhere
    )  # fmt: skip
    _insert(conn, "derived_group",
        _group("prod", E0, "billing", 99999, 99999, "OK", 2),
        _group("prod", E1, "billing", 4100, 3000, "WARN", 2),
        _group("prod", E1, "audit", 0, 0, "OK", 1),
        _group("prod", E1, "reports", 10, 30, "ERR", 0),
        _group("prod", E2, "billing", 5250, 4000, "ERR", 2, consumers_needed=4, time_until_data_loss_seconds=1800),
        _group("prod", E2, "audit", 0, 0, "OK", 1, consumers_needed=1),
        _group("prod", E2, "reports", 12, 40, "ERR", 0),
        _group("prod", E2, "search", 900, 60, "WARN", 1, consumers_needed=1, advice_limited_by="hot_partition",
               hot_topic="queries", hot_partition=3),
        _group("prod", E2, "index", 50, 10, "OK", 3, consumers_needed=2),
        _group("stage", E1, "billing", 7, 5, "ERR", 1),
    )  # fmt: skip
    _insert(conn, "derived_group_topic",
        {"cluster": "prod", "evaluated_at": E2, "group_id": "billing", "topic": "orders", "partitions": 2,
         "offset_lag": 5250, "max_offset_lag": 5000, "lag_seconds": 4000, "max_lag_seconds": 4000,
         "data_loss_occurred": True, "status": "ERR"},
        {"cluster": "prod", "evaluated_at": E2, "group_id": "audit", "topic": "orders", "partitions": 1,
         "offset_lag": 0, "max_offset_lag": 0, "lag_seconds": 0, "max_lag_seconds": 0, "status": "OK"},
        {"cluster": "prod", "evaluated_at": E2, "group_id": "reports", "topic": "payments", "partitions": 1,
         "offset_lag": 12, "max_offset_lag": 12, "lag_seconds": 40, "max_lag_seconds": 40,
         "time_until_data_loss_seconds": 499990, "status": "ERR"},
        {"cluster": "stage", "evaluated_at": E1, "group_id": "billing", "topic": "orders", "partitions": 1,
         "offset_lag": 7, "max_offset_lag": 7, "lag_seconds": 99999, "max_lag_seconds": 99999, "status": "ERR"},
    )  # fmt: skip
    _insert(conn, "derived_topic",
        {"cluster": "prod", "evaluated_at": E2, "topic": "orders", "partitions": 2, "retention_ms": 3_600_000,
         "retention_bytes": 1_000_000, "min_time_coverage_seconds": 1200, "retention_shortfall_seconds": 2400,
         "max_size_ratio": 0.9, "produce_bytes_rate": 2048, "min_time_until_data_loss_seconds": 1800},
        {"cluster": "prod", "evaluated_at": E2, "topic": "payments", "partitions": 1,
         "retention_ms": 604_800_000, "min_time_coverage_seconds": 604_000, "retention_shortfall_seconds": 0},
        {"cluster": "stage", "evaluated_at": E1, "topic": "orders", "partitions": 1, "retention_ms": 60_000,
         "min_time_coverage_seconds": 50, "retention_shortfall_seconds": 10},
    )  # fmt: skip
    partition = {"cluster": "prod", "evaluated_at": E2, "replication_factor": 3, "min_insync_replicas": 2,
                 "retention_ms": 3_600_000, "retention_bytes": 1_000_000}  # fmt: skip
    _insert(conn, "derived_partition",
        {**partition, "topic": "orders", "partition": 0, "size_bytes": 900_000, "size_ratio": 0.9, "leader": 1,
         "isr": 2, "replicas_lost": 1, "under_replicated": True, "under_min_isr": False, "offline": False},
        {**partition, "topic": "orders", "partition": 1, "size_bytes": 990_000, "size_ratio": 0.99, "leader": None,
         "isr": 0, "replicas_lost": 3, "under_replicated": True, "under_min_isr": True, "offline": True},
        {**partition, "topic": "payments", "partition": 0, "leader": 2, "isr": 3, "replicas_lost": 0,
         "under_replicated": False, "under_min_isr": False, "offline": False, "non_preferred_leader": True,
         "retention_ms": 604_800_000, "retention_bytes": None},
    )  # fmt: skip
    tib = 1 << 40
    _insert(conn, "derived_broker",
        {"cluster": "prod", "evaluated_at": E2, "broker_id": 1, "up": True, "leaders": 2, "fair_share_leaders": 1.0,
         "leader_imbalance": 2.0, "non_preferred_leaders": 0, "replicas": 3, "disk_total_bytes": tib,
         "disk_usable_bytes": tib // 10, "disk_used_ratio": 0.9},
        {"cluster": "prod", "evaluated_at": E2, "broker_id": 2, "up": True, "leaders": 1, "fair_share_leaders": 1.0,
         "leader_imbalance": 1.0, "non_preferred_leaders": 1, "replicas": 3, "disk_total_bytes": tib,
         "disk_usable_bytes": tib // 2, "disk_used_ratio": 0.5},
        {"cluster": "prod", "evaluated_at": E2, "broker_id": 3, "up": False, "down": True, "leaders": 0,
         "fair_share_leaders": 1.0, "leader_imbalance": 0.0, "non_preferred_leaders": 0, "replicas": 3},
    )  # fmt: skip

    # Samples and events.
    _insert(conn, "replica_states",
        *({"cluster": "prod", "topic": "orders", "partition": 1, "sampled_at": T0 + m * MINUTE, "leader": leader,
           "replicas": [3, 1, 2], "isr": isr} for m, leader, isr in ((-20, None, []), (-10, None, []), (10, 3, [3]))),
        {"cluster": "prod", "topic": "orders", "partition": 0, "sampled_at": T0 - 20 * MINUTE, "leader": 1,
         "replicas": [1, 2, 3], "isr": [1, 2]},
        {"cluster": "prod", "topic": "payments", "partition": 0, "sampled_at": day_before, "leader": None,
         "replicas": [1, 2, 3], "isr": []},
        {"cluster": "stage", "topic": "orders", "partition": 0, "sampled_at": T0 - 15 * MINUTE, "leader": None,
         "replicas": [1, 2], "isr": []},
    )  # fmt: skip
    loss = {"topic": "orders", "committed_offset": 1000, "start_offset": 1700, "messages_lost": 700}
    _insert(conn, "data_loss_events",
        {**loss, "cluster": "prod", "group_id": "billing", "partition": 1, "detected_at": T0},
        {**loss, "cluster": "prod", "group_id": "ancient", "partition": 0, "detected_at": day_before},
        {**loss, "cluster": "stage", "group_id": "stage-only", "partition": 0, "detected_at": T0},
    )  # fmt: skip
    config = {"topic": "orders", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False}
    _insert(conn, "topic_configs",
        {**config, "cluster": "prod", "name": "retention.ms", "value": "604800000",
         "valid_from": T0 - 10 * 1440 * MINUTE, "valid_to": E1},
        {**config, "cluster": "prod", "name": "retention.ms", "value": "3600000", "valid_from": E1,
         "valid_to": T0 + 15 * MINUTE},  # cut by hand: no request
        {**config, "cluster": "prod", "name": "retention.ms", "value": "86400000", "valid_from": T0 + 15 * MINUTE,
         "valid_to": None},  # raised by request 7
        {**config, "cluster": "prod", "name": "retention.bytes", "value": "-1",
         "valid_from": T0 - 10 * 1440 * MINUTE, "valid_to": day_before},
        {**config, "cluster": "prod", "name": "retention.bytes", "value": "1000000", "valid_from": day_before,
         "valid_to": None},  # changed, but the day before
        {**config, "cluster": "stage", "name": "retention.ms", "value": "1", "valid_from": T0 - 60 * MINUTE,
         "valid_to": T0},
        {**config, "cluster": "stage", "name": "retention.ms", "value": "2", "valid_from": T0, "valid_to": None},
    )  # fmt: skip
    request = {"cluster": "prod", "topic": "orders", "state": "verified", "tier": "reviewed", "team": "billing",
               "requested_by": "erin", "reason": "billing is a day behind", "old_configs": {}, "new_configs": {},
               "duration_ms": 86_400_000, "created_at": T0, "updated_at": T0}  # fmt: skip
    _insert(conn, "retention_requests",
        {**request, "id": 6, "state": "reverted", "requested_by": "frank", "reason": "older raise"},
        {**request, "id": 7, "approved_by": "dave", "approved_at": T0 + 10 * MINUTE, "review": "approved",
         "commit_id": "c0ffee"},
    )  # fmt: skip
    audit = {"cluster": "prod", "topic": "orders", "actor": "kafka-health", "action": "applied"}
    _insert(conn, "audit_log",
        {**audit, "at": T0 - 40 * MINUTE, "request_id": 6, "old_value": {"retention.ms": "604800000"},
         "new_value": {"retention.ms": "172800000"}},  # other values: not the E1 change
        {**audit, "at": T0 + 14 * MINUTE, "request_id": 7, "old_value": {"retention.ms": "3600000"},
         "new_value": {"retention.ms": "86400000"}, "commit_id": "c0ffee"},
        {**audit, "at": T0 + 14 * MINUTE, "request_id": 7, "action": "verified",
         "new_value": {"retention.ms": "86400000"}},
    )  # fmt: skip
    run = {"instance": "kh-1", "counts": {}}
    _insert(conn, "collection_runs",
        {**run, "cluster": "prod", "job": "offsets", "started_at": T0 - 50 * MINUTE, "status": "failed",
         "error": "cluster unreachable"},
        {**run, "cluster": "prod", "job": "offsets", "started_at": T0 - 49 * MINUTE, "status": "failed",
         "error": "cluster unreachable"},
        {**run, "cluster": "prod", "job": "offsets", "started_at": T0 - 48 * MINUTE, "status": "ok"},
        {**run, "cluster": "prod", "job": "log_dirs", "started_at": T0 - 40 * MINUTE, "status": "partial",
         "error": "broker 3: timed out"},
        {**run, "cluster": "prod", "job": "offsets", "started_at": day_before, "status": "failed", "error": "old"},
        {**run, "cluster": "stage", "job": "offsets", "started_at": T0 - 50 * MINUTE, "status": "failed",
         "error": "elsewhere"},
    )  # fmt: skip
    _insert(conn, "group_members",
        *({"cluster": "prod", "group_id": "billing", "member_id": f"m{p}", "client_id": f"billing-{p}",
           "host": f"/10.0.0.{p}", "assignment": [f"orders:{p}"], "updated_at": T0} for p in (0, 1)),
        {"cluster": "prod", "group_id": "audit", "member_id": "a", "client_id": "audit", "host": "/10.0.1.1",
         "assignment": ["orders:0"], "updated_at": T0},
        {"cluster": "stage", "group_id": "billing", "member_id": "s", "client_id": "billing-stage",
         "host": "/10.9.0.1", "assignment": ["orders:0"], "updated_at": T0},
    )  # fmt: skip

    # Share groups: a queue whose consumers are gone and one that keeps up (newest sample at T0);
    # a cluster without share groups has a support row and nothing else.
    _insert(conn, "share_group_support",
        {"cluster": "prod", "available": True, "reason": None, "sampled_at": T0},
        {"cluster": "stage", "available": False, "reason": "not available: the brokers lack "
         "ShareGroupDescribe v1 (Kafka 4.1+)", "sampled_at": T0},
    )  # fmt: skip
    _insert(conn, "share_group_states",
        *({"cluster": "prod", "group_id": g, "sampled_at": at, "state": state, "members": members,
           "assignor": "simple", "coordinator": 1}
          for at in (T0 - MINUTE, T0)
          for g, state, members in (("jobs", "Empty", 0), ("mails", "Stable", 2))),
    )  # fmt: skip
    _insert(conn, "share_group_offsets",
        *({"cluster": "prod", "group_id": g, "topic": "orders", "partition": p, "sampled_at": at,
           "start_offset": 100, "end_offset": 100 + lag, "lag": lag, "lag_method": "broker"}
          for at in (T0 - MINUTE, T0)
          for g, lags in (("jobs", (400, 20)), ("mails", (0, 0)))
          for p, lag in enumerate(lags)),
    )  # fmt: skip

    # Alerting: alerts, a silence, incidents, acknowledgements and deliveries.
    _insert(conn, "silences",
        {"id": 1, "matchers": [{"name": "rule", "op": "=", "value": "PartitionOffline"}], "starts_at": T0 - 25 * MINUTE,
         "ends_at": T0 + 95 * MINUTE, "created_by": "bob", "comment": "broker 3 replacement",
         "created_at": T0 - 25 * MINUTE},
        {"id": 2, "matchers": [], "starts_at": T0 - 2880 * MINUTE, "ends_at": T0 + 95 * MINUTE, "created_by": "carol",
         "comment": "expired early", "created_at": T0 - 2880 * MINUTE, "expired_at": T0 - 1440 * MINUTE},
    )  # fmt: skip

    def alert(id_: int, rule: str, cluster: str, severity: str, state: str, starts: datetime | None,
              resolved: datetime | None, **extra: Any) -> dict[str, Any]:  # fmt: skip
        return {
            "id": id_, "fingerprint": f"f{id_}", "rule": rule, "cluster": cluster, "entity": "partition",
            "entity_key": f"{cluster}/orders/{id_}", "labels": {"cluster": cluster, "rule": rule, "team": "ops"},
            "severity": severity, "state": state, "summary": f"{rule} on {cluster}", "description": "",
            "pending_since": starts or T0, "starts_at": starts, "resolved_at": resolved,
            "updated_at": resolved or T0 + 30 * MINUTE, **extra,
        }  # fmt: skip

    _insert(conn, "alerts",
        alert(1, "DataLossOccurred", "prod", "critical", "resolved", T0, T0 + 20 * MINUTE),
        alert(2, "TimeUntilDataLoss", "prod", "critical", "firing", T0 - 29 * MINUTE, None),
        alert(3, "PartitionReplicaLost", "prod", "warning", "resolved", day_before, day_before + 60 * MINUTE),
        alert(4, "BrokerDown", "stage", "critical", "firing", T0 - 15 * MINUTE, None),
        alert(5, "ConsumerLagSeconds", "prod", "warning", "pending", None, None),
        alert(6, "PartitionOffline", "prod", "critical", "resolved", T0 - 20 * MINUTE, T0 + 10 * MINUTE, silenced_by=1),
    )  # fmt: skip

    def incident(id_: int, receiver: str, severity: str, first: datetime, **extra: Any) -> dict[str, Any]:
        return {
            "id": id_, "receiver": receiver, "group_key": f"{receiver}:{id_}",
            "group_labels": {"cluster": "prod", "rule": "DataLossOccurred"}, "route_path": "0",
            "dedup_key": f"d{id_}", "ack_token": f"t{id_}", "severity": severity, "created_at": first,
            "first_notified_at": first, "last_notified_at": first, "notified": {}, **extra,
        }  # fmt: skip

    _insert(conn, "alert_groups",
        incident(1, "oncall-pager", "critical", T0 + timedelta(seconds=10),
                 acknowledged_at=T0 + timedelta(seconds=310), acknowledged_by="alice", closed_at=T0 + 20 * MINUTE),
        incident(2, "ops-slack", "warning", T0 - 175 * MINUTE, escalated_at=T0 - 55 * MINUTE,
                 escalated_to="oncall-pager", closed_at=T0 - 10 * MINUTE),
        incident(3, "ops-slack", "critical", T0 + timedelta(seconds=10)),  # told Slack: not a page
        incident(4, "oncall-pager", "critical", day_before),  # paged the day before
    )  # fmt: skip
    _insert(conn, "acks",
        {"alert_group_id": 1, "acknowledged_by": "alice", "comment": "looking", "via": "web",
         "created_at": T0 + timedelta(seconds=310)},
    )  # fmt: skip
    outbox = {"group_key": "g", "payload": "{}", "attempts": 1}
    _insert(conn, "notification_outbox",
        {**outbox, "id": 1, "receiver": "oncall-pager", "kind": "firing", "dedup_key": "d1", "state": "sent",
         "created_at": T0 + timedelta(seconds=10), "next_attempt_at": T0, "sent_at": T0 + timedelta(seconds=12)},
        {**outbox, "id": 2, "receiver": "ops-email", "kind": "firing", "dedup_key": "d2", "state": "failed",
         "created_at": T0 - 28 * MINUTE, "next_attempt_at": T0},
        {**outbox, "id": 3, "receiver": "ops-slack", "kind": "repeat", "dedup_key": "d3", "state": "sent",
         "created_at": day_before, "next_attempt_at": day_before},
    )  # fmt: skip
    log = {"instance": "kh-1", "alerts": 1}
    _insert(conn, "notification_log",
        {**log, "outbox_id": 1, "receiver": "oncall-pager", "kind": "firing", "dedup_key": "d1", "attempt": 1,
         "at": T0 + timedelta(seconds=10), "outcome": "retry", "status": 503, "reason": "Service Unavailable"},
        {**log, "outbox_id": 1, "receiver": "oncall-pager", "kind": "firing", "dedup_key": "d1", "attempt": 2,
         "at": T0 + timedelta(seconds=12), "outcome": "sent", "status": 202},
        {**log, "outbox_id": 2, "receiver": "ops-email", "kind": "firing", "dedup_key": "d2", "attempt": 1,
         "at": T0 - 28 * MINUTE, "outcome": "failed", "status": 550, "reason": "mailbox unavailable"},
        {**log, "outbox_id": 3, "receiver": "ops-slack", "kind": "repeat", "dedup_key": "d3", "attempt": 1,
         "at": day_before, "outcome": "retry", "status": 429, "reason": "rate limited"},
    )  # fmt: skip
    # The billing group's lag objective: 3 minutes of the hour before T0 bad, and one minute the day before.
    _insert(conn, "objective_minutes", *(
        {"cluster": "prod", "objective": "billing-fresh", "group_id": "billing", "minute": T0 - n * MINUTE,
         "bad": n <= 3} for n in range(1, 61)
    ), {"cluster": "prod", "objective": "billing-fresh", "group_id": "billing", "minute": day_before, "bad": True},
       {"cluster": "stage", "objective": "billing-fresh", "group_id": "billing", "minute": T0, "bad": True})  # fmt: skip


@pytest.fixture(scope="module")
def reader_role(pg_server: object, engine: Engine) -> Iterator[str]:
    """A login role that is only a member of kafka_health_reader (roles are server-wide, so it can
    connect to every database the migrations granted to that role)."""
    role = f"kh_queries_reader_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN IN ROLE kafka_health_reader"))
    try:
        yield role
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP ROLE {role}"))


def _as(role: str, engine: Engine) -> Engine:
    return create_engine(engine.url.set(username=role, password=None))


def _psql_url(role: str, engine: Engine) -> str:
    return engine.url.set(drivername="postgresql", username=role, password=None).render_as_string(
        hide_password=False
    )


@pytest.fixture(scope="module")
def reader(engine: Engine, reader_role: str) -> Iterator[Engine]:
    """The incident database, connected as the reader role."""
    with engine.begin() as conn:
        _fill(conn)
    as_reader = _as(reader_role, engine)
    try:
        yield as_reader
    finally:
        as_reader.dispose()


def test_the_reader_role_cannot_write(reader: Engine) -> None:
    with reader.connect() as conn, pytest.raises(ProgrammingError, match="permission denied"):
        conn.execute(text("DELETE FROM alerts"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_query_runs_as_the_reader_and_answers(reader: Engine, path: Path) -> None:
    assert run_query(reader, path, PARAMS), f"{path.name} found nothing in the incident"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_reads_names_every_relation_the_query_reads(reader: Engine, path: Path) -> None:
    with reader.connect() as conn:
        relations = set(
            conn.execute(
                text(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')"
                )
            ).scalars()
        )
    listed = _header(path).reads
    assert set(listed) <= relations, (
        f"{path.name}: Reads names what does not exist: {set(listed) - relations}"
    )
    named = {m.group(1) for m in re.finditer(r"\b(?:FROM|JOIN)\s+([a-z_][a-z0-9_]*)", body(path.read_text()))}
    assert named & relations == set(listed), f"{path.name}: reads {sorted(named & relations)}"


def find_psql() -> str | None:
    """psql on PATH, else beside the PostgreSQL server binaries the project runs (Debian's
    `postgresql` package, which `scripts/system-deps.sh` installs, brings its client)."""
    on_path = shutil.which("psql")
    if on_path is not None:
        return on_path
    try:
        bindir = find_binaries(install=False, log=lambda message: None)
    except DevEnvironmentError:
        return None
    beside = bindir / "psql"
    return str(beside) if beside.is_file() else None


@pytest.fixture(scope="module")
def psql() -> str:
    """The psql program. Missing, it skips these tests on a developer's machine, and fails them in
    CI (`CI` set), where the setup installs it."""
    found = find_psql()
    if found is None:
        message = (
            "psql was found neither on PATH nor beside the PostgreSQL server binaries; install "
            "Debian's postgresql-client (`make test` does, through scripts/system-deps.sh)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{message}. CI installs it, so here its absence is a broken setup", pytrace=False)
        pytest.skip(message)
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_query_runs_in_psql(
    psql: str, reader: Engine, engine: Engine, reader_role: str, path: Path
) -> None:
    """The documented command runs as written, and with the test's values psql finds the rows the
    bound query finds."""
    header = _header(path)
    base = [psql, "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1", "-d", _psql_url(reader_role, engine)]
    documented = subprocess.run(
        [*base, *shlex.split(header.run)[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert documented.returncode == 0, documented.stderr
    variables = [arg for name in header.parameters for arg in ("-v", f"{name}={PARAMS[name]}")]
    ours = subprocess.run([*base, *variables, "-f", str(path)], capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    rows = list(csv.reader(io.StringIO(ours.stdout)))
    assert len(rows) - 1 == len(run_query(reader, path, PARAMS))


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


# file -> (columns, expected rows projected on them)
EXPECTED: dict[str, tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {
    "groups_that_lost_data.sql": (
        ("group_id", "topic", "partitions", "losses", "messages_lost", "first_detected_at"),
        [("billing", "orders", [1], 1, 700, T0)],
    ),
    "top_lagging_partitions_in_window.sql": (
        ("group_id", "topic", "partition", "max_lag", "max_offset_lag", "worst_at", "data_loss_occurred"),
        [
            ("billing", "orders", 1, _seconds(4000), 5000, E2, True),
            ("billing", "orders", 0, _seconds(120), 250, E2, False),
            ("reports", "payments", 0, _seconds(40), 12, E2, False),
        ],
    ),
    "retention_changes.sql": (
        (
            "changed_at",
            "name",
            "old_readable",
            "new_readable",
            "made_by",
            "requested_by",
            "approved_by",
            "commit_id",
        ),
        [
            (E1, "retention.ms", "7 days", "01:00:00", "outside the monitor", None, None, None),
            (
                T0 + 15 * MINUTE,
                "retention.ms",
                "01:00:00",
                "1 day",
                "applied by request 7",
                "erin",
                "dave",
                "c0ffee",
            ),
        ],
    ),
    "under_replicated_partitions_now.sql": (
        ("topic", "partition", "out_of_sync", "replicas_lost", "under_min_isr", "offline"),
        [("orders", 1, [3, 1, 2], 3, True, True), ("orders", 0, [3], 1, False, False)],
    ),
    "partitions_offline_during_window.sql": (
        (
            "topic",
            "partition",
            "first_seen_offline",
            "last_seen_offline",
            "offline_samples",
            "leader_back_at",
        ),
        [("orders", 1, T0 - 20 * MINUTE, T0 - 10 * MINUTE, 2, T0 + 10 * MINUTE)],
    ),
    "groups_stopped_or_stalled.sql": (
        ("group_id", "statuses", "partitions", "first_seen", "group_states", "min_members"),
        [
            ("reports", "STALL", "payments-0", E1, "Empty", 0),
            ("billing", "STOP", "orders-0, orders-1", E2, "Stable", 2),
        ],
    ),
    "groups_that_need_consumers.sql": (
        ("group_id", "members", "consumers_needed", "consumers_to_add", "advice_limited_by", "hot_partition"),
        [
            ("billing", 2, 4, 2, None, None),  # deletion ahead first
            ("search", 1, 1, 0, "hot_partition", 3),  # more consumers cannot help
            ("reports", 0, None, None, None, None),  # stopped: start one
        ],
    ),
    "time_until_data_loss_most_urgent.sql": (
        ("group_id", "topic", "partition", "time_left", "data_loss_occurred", "retention"),
        [
            ("billing", "orders", 1, timedelta(0), True, _seconds(3600)),
            ("billing", "orders", 0, _seconds(1800), False, _seconds(3600)),
            ("reports", "payments", 0, _seconds(499990), False, timedelta(days=7)),
        ],
    ),
    "broker_disk_headroom.sql": (
        ("broker_id", "up", "used_percent", "usable"),
        [(1, True, Decimal("90.0"), "102 GB"), (2, True, Decimal("50.0"), "512 GB"), (3, False, None, None)],
    ),
    "leader_imbalance_by_broker.sql": (
        ("broker_id", "leaders", "leader_imbalance", "non_preferred_leaders", "preferred_leaderships"),
        [(1, 2, Decimal("2.00"), 0, 2), (2, 1, Decimal("1.00"), 1, 0), (3, 0, Decimal("0.00"), 0, 1)],
    ),
    "alerts_fired_in_window.sql": (
        ("rule", "severity", "starts_at", "silenced_by"),
        [
            ("TimeUntilDataLoss", "critical", T0 - 29 * MINUTE, None),
            ("PartitionOffline", "critical", T0 - 20 * MINUTE, 1),
            ("DataLossOccurred", "critical", T0, None),
        ],
    ),
    "pages_and_time_to_acknowledge.sql": (
        ("incident", "paged_at", "how", "acknowledged_by", "time_to_acknowledge", "acks"),
        [
            (2, T0 - 55 * MINUTE, "escalated from ops-slack", None, None, None),
            (1, T0 + _seconds(10), "paged", "alice", _seconds(300), "alice via web: looking"),
        ],
    ),
    "notification_failures.sql": (
        ("at", "receiver", "outcome", "status", "reason", "final_state"),
        [
            (T0 - 28 * MINUTE, "ops-email", "failed", 550, "mailbox unavailable", "failed"),
            (T0 + _seconds(10), "oncall-pager", "retry", 503, "Service Unavailable", "sent"),
        ],
    ),
    "collection_failures.sql": (
        ("job", "status", "error", "runs", "runs_of_job", "first_at"),
        [
            ("offsets", "failed", "cluster unreachable", 2, 3, T0 - 50 * MINUTE),
            ("log_dirs", "partial", "broker 3: timed out", 1, 1, T0 - 40 * MINUTE),
        ],
    ),
    "lag_history_of_group.sql": (
        ("evaluated_at", "status", "offset_lag", "lag"),
        [(E1, "WARN", 4100, _seconds(3000)), (E2, "ERR", 5250, _seconds(4000))],
    ),
    "topics_whose_retention_is_shorter_than_consumer_lag.sql": (
        ("topic", "group_id", "max_lag", "retention", "history_kept", "lag_to_history"),
        [("orders", "billing", _seconds(4000), _seconds(3600), _seconds(1200), Decimal("3.33"))],
    ),
    "retention_shortfall_topics.sql": (
        ("topic", "retention_promised", "history_kept", "shortfall", "produce_bytes_rate"),
        [("orders", _seconds(3600), _seconds(1200), _seconds(2400), "2048 bytes/s")],
    ),
    "cluster_overview_now.sql": (
        ("cluster", "brokers_down", "offline_partitions", "alerts_firing", "critical_firing", "evaluated_at"),
        [("prod", 1, 1, 1, 1, E2), ("stage", 0, 0, 1, 1, E1)],
    ),
    "silences_during_window.sql": (
        ("silence", "created_by", "comment", "ended_at", "alerts_muted"),
        [(1, "bob", "broker 3 replacement", T0 + 95 * MINUTE, 1)],
    ),
    "share_groups_waiting.sql": (
        ("group_id", "state", "members", "partitions", "records_waiting", "lag_method", "sampled_at"),
        [("jobs", "Empty", 0, 2, 420, "broker", T0), ("mails", "Stable", 2, 2, 0, "broker", T0)],
    ),
    "lag_objective_compliance_by_day.sql": (
        ("objective", "group_id", "day", "good_minutes", "bad_minutes", "compliance"),
        [("billing-fresh", "billing", T0.replace(hour=0), 57, 3, Decimal("95.000"))],
    ),
    "group_members_now.sql": (
        ("client_id", "host", "assignment", "group_state", "status", "group_offset_lag"),
        [
            ("billing-0", "/10.0.0.0", "orders:0", "Stable", "ERR", 5250),
            ("billing-1", "/10.0.0.1", "orders:1", "Stable", "ERR", 5250),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_answers_about_the_incident(reader: Engine, name: str) -> None:
    columns, expected = EXPECTED[name]
    rows = query(reader, name)
    assert [tuple(row[c] for c in columns) for row in rows] == expected


# ---------------------------------------------------------------------------------------------
# A database filled by a real collection


@pytest.fixture(scope="module")
def populated_reader(populated: Populated, reader_role: str) -> Iterator[Engine]:
    as_reader = _as(reader_role, populated.engine)
    try:
        yield as_reader
    finally:
        as_reader.dispose()


def _populated_params(populated: Populated, **overrides: str) -> dict[str, str]:
    return {
        "cluster": populated.cluster,
        "group": populated.groups["lagging"].name,
        "since": (populated.collected_at - timedelta(hours=1)).isoformat(),
        "until": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        "pager": "oncall-pager",
        **overrides,
    }


@pytest.mark.spark
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_query_runs_on_a_collected_database(
    populated: Populated, populated_reader: Engine, path: Path
) -> None:
    rows = run_query(populated_reader, path, _populated_params(populated))
    groups = {row.get("group_id") for row in rows}
    if path.name == "groups_that_lost_data.sql":
        assert populated.groups["lost"].name in groups
    if path.name == "time_until_data_loss_most_urgent.sql":
        assert {populated.groups["at_risk"].name, populated.groups["lost"].name} <= groups
    if path.name == "lag_history_of_group.sql":
        assert rows and rows[-1]["offset_lag"] == populated.groups["lagging"].lag
    if path.name == "silences_during_window.sql":
        assert populated.silence_id in {row["silence"] for row in rows}


@pytest.mark.spark
def test_collection_failures_show_the_unreachable_cluster(
    populated: Populated, populated_reader: Engine
) -> None:
    params = _populated_params(populated, cluster=UNREACHABLE)
    rows = run_query(populated_reader, QUERIES / "collection_failures.sql", params)
    assert rows and {row["status"] for row in rows} == {"failed"}
