"""What is over is deleted by the store's maintenance once older than
`database.history_retention_days`; what is over but newer, and what is still open however old,
stays: a firing alert, an open incident, a pending notification, an active silence."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, text

from monitor.core.clock import FakeClock
from monitor.core.settings import DatabaseConfig
from monitor.store.alerting import Ack, Alert, AlertGroup, NotificationLogEntry, OutboxEntry, Silence
from monitor.store.evaluation import Finding
from monitor.store.expiry import EXPIRED
from monitor.store.models import DataLossEvent
from monitor.store.retention import Notice
from monitor.store.service import StoreService

NOW = datetime(2031, 6, 1, 12, tzinfo=UTC)
DAYS = 30
OLD = NOW - timedelta(days=DAYS + 1)
RECENT = NOW - timedelta(days=DAYS - 1)


def _finding(key: str, state: str, resolved_at: datetime | None) -> dict[str, Any]:
    return {
        "rule": "ConsumerAppendLag",
        "entity": "group_topic",
        "entity_key": key,
        "cluster": "prod",
        "labels": {"cluster": "prod"},
        "severity": "warning",
        "value": 1.0,
        "summary": "behind",
        "description": "",
        "for_seconds": 0,
        "state": state,
        "first_seen": OLD - timedelta(days=1),
        "last_seen": resolved_at or NOW,
        "resolved_at": resolved_at,
        "evaluated_at": resolved_at or NOW,
    }


def _alert(fp: str, state: str, resolved_at: datetime | None) -> dict[str, Any]:
    return {
        "fingerprint": fp,
        "rule": "ConsumerAppendLag",
        "cluster": "prod",
        "entity": "group_topic",
        "entity_key": fp,
        "labels": {"cluster": "prod"},
        "severity": "warning",
        "state": state,
        "summary": "behind",
        "description": "",
        "value": 1.0,
        "pending_since": OLD - timedelta(days=1),
        "starts_at": OLD - timedelta(days=1),
        "resolved_at": resolved_at,
        "updated_at": resolved_at or NOW,
    }


def _group(key: str, closed_at: datetime | None) -> dict[str, Any]:
    return {
        "receiver": "team",
        "group_key": key,
        "group_labels": {"alertname": key},
        "route_path": "0",
        "dedup_key": key,
        "ack_token": f"token-{key}",
        "severity": "warning",
        "created_at": OLD - timedelta(days=1),
        "notified": {},
        "closed_at": closed_at,
    }


def _outbox(key: str, state: str, created_at: datetime) -> dict[str, Any]:
    return {
        "receiver": "team",
        "kind": "firing",
        "group_key": key,
        "dedup_key": key,
        "payload": json.dumps({}),
        "state": state,
        "attempts": 1,
        "created_at": created_at,
        "next_attempt_at": created_at,
    }


def _silence(comment: str, ends_at: datetime, expired_at: datetime | None = None) -> dict[str, Any]:
    return {
        "matchers": ["team=payments"],
        "starts_at": OLD - timedelta(days=2),
        "ends_at": ends_at,
        "created_by": "alice",
        "comment": comment,
        "created_at": OLD - timedelta(days=2),
        "expired_at": expired_at,
    }


def _log(key: str, at: datetime) -> dict[str, Any]:
    return {
        "outbox_id": 1,
        "receiver": "team",
        "kind": "firing",
        "dedup_key": key,
        "attempt": 1,
        "at": at,
        "outcome": "sent",
        "instance": "test",
        "alerts": 1,
    }


def _notice(topic: str, at: datetime) -> dict[str, Any]:
    return {
        "created_at": at,
        "cluster": "prod",
        "topic": topic,
        "kind": "reverted",
        "severity": "info",
        "summary": "reverted",
        "description": "",
    }


def _loss(topic: str, at: datetime) -> dict[str, Any]:
    return {
        "cluster": "prod",
        "group_id": "g",
        "topic": topic,
        "partition": 0,
        "committed_offset": 1,
        "start_offset": 5,
        "messages_lost": 4,
        "detected_at": at,
    }


def _maintain(db_url: str) -> None:
    """One maintenance pass of a store started at NOW, as the daemon runs it."""
    store = StoreService(db_url, DatabaseConfig(history_retention_days=DAYS), FakeClock(NOW))
    store.start()
    try:
        store.maintain()
    finally:
        store.stop()


@pytest.fixture(scope="module")
def maintained(engine: Engine, db_url: str) -> dict[str, set[str]]:
    """Rows of every kind written, one maintenance pass run at NOW; what is left per table."""
    with engine.begin() as conn:
        conn.execute(
            insert(Finding),
            [
                _finding("old-resolved", "resolved", OLD),
                _finding("recent-resolved", "resolved", RECENT),
                _finding("old-firing", "firing", None),
            ],
        )
        conn.execute(
            insert(Alert),
            [
                _alert("old-resolved", "resolved", OLD),
                _alert("recent-resolved", "resolved", RECENT),
                _alert("old-firing", "firing", None),
            ],
        )
        groups = conn.execute(
            insert(AlertGroup).returning(AlertGroup.group_key, AlertGroup.id),
            [_group("old-closed", OLD), _group("recent-closed", RECENT), _group("old-open", None)],
        ).all()
        conn.execute(
            insert(Ack),
            [
                {
                    "alert_group_id": gid,
                    "acknowledged_by": "alice",
                    "comment": key,
                    "via": "api",
                    "created_at": OLD,
                }
                for key, gid in groups
            ],
        )
        conn.execute(
            insert(OutboxEntry),
            [
                _outbox("old-sent", "sent", OLD),
                _outbox("old-dropped", "dropped", OLD),
                _outbox("recent-sent", "sent", RECENT),
                _outbox("old-pending", "pending", OLD),
            ],
        )
        conn.execute(insert(NotificationLogEntry), [_log("old", OLD), _log("recent", RECENT)])
        conn.execute(
            insert(Silence),
            [
                _silence("old-ended", OLD),
                _silence("recent-ended", RECENT),
                _silence("expired-early", NOW + timedelta(days=1), expired_at=OLD),
                _silence("active", NOW + timedelta(days=1)),
            ],
        )
        conn.execute(insert(Notice), [_notice("old", OLD), _notice("recent", RECENT)])
        conn.execute(insert(DataLossEvent), [_loss("old", OLD), _loss("recent", RECENT)])
    _maintain(db_url)
    columns = {
        Finding: Finding.entity_key,
        Alert: Alert.fingerprint,
        AlertGroup: AlertGroup.group_key,
        Ack: Ack.comment,
        OutboxEntry: OutboxEntry.dedup_key,
        NotificationLogEntry: NotificationLogEntry.dedup_key,
        Silence: Silence.comment,
        Notice: Notice.topic,
        DataLossEvent: DataLossEvent.topic,
    }
    with engine.connect() as conn:
        return {
            str(model.__tablename__): set(conn.execute(select(column)).scalars())
            for model, column in columns.items()
        }


def test_what_is_over_and_older_than_the_retention_is_deleted_and_the_rest_kept(
    maintained: dict[str, set[str]],
) -> None:
    assert maintained == {
        "findings": {"recent-resolved", "old-firing"},
        "alerts": {"recent-resolved", "old-firing"},
        "alert_groups": {"recent-closed", "old-open"},
        "acks": {"recent-closed", "old-open"},  # an incident's acknowledgements go with it
        "notification_outbox": {"recent-sent", "old-pending"},
        "notification_log": {"recent"},
        "silences": {"recent-ended", "active"},
        "notices": {"recent"},
        "data_loss_events": {"recent"},
    }


def test_every_table_the_expiry_names_exists_and_a_second_pass_deletes_nothing(
    engine: Engine, db_url: str, maintained: dict[str, set[str]]
) -> None:
    assert {table for table, _ in EXPIRED} <= set(maintained) | {"acks"}
    with engine.connect() as conn:
        before = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in maintained}
    _maintain(db_url)
    with engine.connect() as conn:
        assert {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in maintained} == before


def test_the_setting_is_bounded_and_explained() -> None:
    assert DatabaseConfig().history_retention_days == 400
    with pytest.raises(ValueError, match="history_retention_days"):
        DatabaseConfig(history_retention_days=0)
