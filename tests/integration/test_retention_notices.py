"""Notices of the act stage reach the owning team's receivers through the alert stage's outbox,
once however often the cycle runs."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, text

from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.notices import forward_notices


def test_a_notice_is_forwarded_once_to_the_team_receivers(engine: Engine) -> None:
    routing = load_routing(*default_routing_paths())
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO notices (created_at, request_id, cluster, topic, team, kind, severity, summary,"
                " description) VALUES (:now, 7, 'prod', 'payments.orders', 'payments', 'expiring', 'warning',"
                " 'Retention raise of payments.orders reverts soon', 'extend it if needed')"
            ),
            {"now": now},
        )
        assert forward_notices(conn, routing, now) >= 1
        assert forward_notices(conn, routing, now) == 0
        rows = conn.execute(
            text("SELECT receiver, kind, payload FROM notification_outbox WHERE group_key LIKE 'notice:%'")
        ).all()
    assert "payments-slack" in {r.receiver for r in rows}
    assert all("Retention raise of payments.orders reverts soon" in r.payload for r in rows)
