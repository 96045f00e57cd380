"""Retention requests for tests that need one without a database."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from monitor.act.request import COLUMNS, Request

CREATED = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)


def request_in(state: str, **fields: Any) -> Request:
    """A request in `state` on topic `orders`: a raise of retention.ms from 1 d to 2 d for 1 d."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        id=1,
        cluster="local",
        topic="orders",
        state=state,
        tier="instant",
        team="payments",
        requested_by="alice",
        reason="lag",
        old_configs={"retention.ms": {"value": "86400000", "source": "DYNAMIC_TOPIC_CONFIG"}},
        new_configs={"retention.ms": "172800000"},
        duration_ms=86_400_000,
        disk={},
        created_at=CREATED,
        updated_at=CREATED,
        attempts=0,
    )
    row.update(fields)
    return Request.from_row(row)
