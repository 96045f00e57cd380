"""The Alertmanager receiver against Debian's real Alertmanager: a firing alert shows in its API
and reaches the receiver Alertmanager notifies; the resolved notice resolves it there; an alert
Alertmanager refuses is given up with its reason; Alertmanager away is retried."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from monitor.alert.model import FailureReason, Notification
from monitor.alert.receivers.alertmanager import AlertmanagerReceiver, AlertmanagerSettings
from monitor.alert.render import Templates
from monitor.devtools.servers import AlertmanagerServer
from tests.conditions import wait_for
from tests.fixtures.receivers import free_port, sample_notification

EXTERNAL = "http://kafka-health.example.com"


def _now_notification(kind: str = "firing", **alert_changes: Any) -> Notification:
    now = datetime.now(UTC)
    base = sample_notification("single_critical", "am")
    (alert,) = base.alerts
    alert = replace(alert, starts_at=now - timedelta(minutes=2), **alert_changes)
    return replace(base, kind=kind, created_at=now, alerts=(alert,))  # type: ignore[arg-type]


def _active(server: AlertmanagerServer) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/api/v2/alerts", params={"active": "true"}, timeout=5)
    response.raise_for_status()
    alerts: list[dict[str, Any]] = response.json()
    return alerts


def test_alerts_fire_and_resolve_in_a_real_alertmanager(httpserver: HTTPServer, tmp_path: Path) -> None:
    hooks: list[dict[str, Any]] = []

    def hook(request: Request) -> Response:
        hooks.append(json.loads(request.get_data()))
        return Response("", status=200)

    httpserver.expect_request("/am-hook", method="POST").respond_with_handler(hook)
    with AlertmanagerServer(
        tmp_path / "am", free_port(), webhook_url=httpserver.url_for("/am-hook")
    ) as server:
        receiver = AlertmanagerReceiver(
            "am",
            AlertmanagerSettings(url=server.url, extra_labels={"source": "kafka-health"}),
            Templates(EXTERNAL),
        )
        try:
            firing = _now_notification()
            assert receiver.send(firing).ok
            (shown,) = wait_for(lambda: _active(server), 30, "the alert in Alertmanager's API")
            assert shown["labels"]["alertname"] == "UnderMinIsr"
            assert shown["labels"]["cluster"] == "prod" and shown["labels"]["source"] == "kafka-health"
            assert shown["annotations"]["summary"] == firing.alerts[0].summary
            assert shown["status"]["state"] == "active"
            assert shown["generatorURL"] == f"{EXTERNAL}/alerts#alert-{firing.alerts[0].fingerprint}"
            told = wait_for(
                lambda: [h for h in hooks if h["status"] == "firing"], 30, "Alertmanager to notify"
            )
            assert told[0]["alerts"][0]["labels"]["severity"] == "critical"

            resolved = _now_notification("resolved", state="resolved", ends_at=datetime.now(UTC))
            assert receiver.send(resolved).ok
            wait_for(lambda: not _active(server), 30, "the alert to resolve in Alertmanager")
            wait_for(
                lambda: [h for h in hooks if h["status"] == "resolved"], 30, "Alertmanager's resolved notice"
            )
        finally:
            receiver.close()


def test_an_alert_alertmanager_refuses_is_given_up_with_its_reason(
    alertmanager_server: AlertmanagerServer,
) -> None:
    receiver = AlertmanagerReceiver(
        "am", AlertmanagerSettings(url=alertmanager_server.url), Templates(EXTERNAL)
    )
    try:
        result = receiver.send(_now_notification(labels={"bad-name": "x", "cluster": "prod"}))
    finally:
        receiver.close()
    assert not result.ok and not result.retryable
    assert result.failure is FailureReason.CLIENT_ERROR
    assert result.status == 400 and "bad-name" in result.reason


def test_alertmanager_away_is_retried() -> None:
    receiver = AlertmanagerReceiver(
        "am", AlertmanagerSettings(url=f"http://127.0.0.1:{free_port()}", timeout=2), Templates(EXTERNAL)
    )
    try:
        result = receiver.send(_now_notification())
    finally:
        receiver.close()
    assert not result.ok and result.retryable
    assert result.failure is FailureReason.CONNECTION
