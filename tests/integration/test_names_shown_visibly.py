"""A name with a control, C1, bidirectional or zero-width character is shown visibly on every
page, as the command line and the log show it (`core.formatting.printable`, the pages'
`finalize`): it cannot display as another group's name, and its links still address the real
name. The notifications' side is in tests/unit/test_names_visible_in_notifications.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from monitor.core.clock import FakeClock
from monitor.core.formatting import printable
from monitor.expose.web.app import create_app
from tests.fixtures.read_model import T1, fill, insert

HOSTILE = [
    "pay\u202estnemyap",  # right-to-left override: would display as "payments..." reversed
    "payments\u200b",  # zero-width space: would display as "payments"
    "pay\u2066ments\u2069",  # an isolate
    "pay\u200fments",  # a right-to-left mark
    "grp\x1b[31mred\x1b[0m",  # an ANSI escape
    "grp\x9b31mc1",  # a C1 control (CSI)
    "grp\nINFO forged",  # a newline
    "<b>bold</b>\x07",  # markup and a bell
]
UNSEEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)
"""What must never reach a page raw (a page's own newlines and tabs aside)."""


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[TestClient]:
    with engine.begin() as conn:
        fill(conn)
        for name in HOSTILE:
            insert(conn, "derived_group", [
                {"cluster": "prod", "group_id": name, "evaluated_at": T1, "topics": 1, "partitions": 1,
                 "offset_lag": 5, "max_offset_lag": 5, "lag_seconds": 60.0, "max_lag_seconds": 60.0,
                 "data_loss_occurred": False, "status": "WARN", "group_state": "Stable", "members": 1,
                 "lag_growing": False},
            ])  # fmt: skip
            insert(conn, "derived_group_topic", [
                {"cluster": "prod", "group_id": name, "topic": "orders", "evaluated_at": T1, "partitions": 1,
                 "offset_lag": 5, "max_offset_lag": 5, "lag_seconds": 60.0, "max_lag_seconds": 60.0,
                 "data_loss_occurred": False, "status": "WARN", "group_state": "Stable", "members": 1},
            ])  # fmt: skip
        insert(conn, "alerts", [
            {"fingerprint": f"fp-{i}", "rule": "ConsumerAppendLag", "cluster": "prod", "entity": "group",
             "entity_key": f"prod/{name}", "labels": json.dumps({"cluster": "prod", "group_id": name}),
             "severity": "warning", "state": "firing", "summary": f"{name} is behind", "description": "",
             "pending_since": T1, "starts_at": T1, "updated_at": T1}
            for i, name in enumerate(HOSTILE)
        ], jsonb=["labels"])  # fmt: skip
    app = create_app(engine, stale_after=timedelta(days=3650), clock=FakeClock(T1 + timedelta(seconds=5)))
    with TestClient(app) as http:
        yield http


def _raw_free(html: str, name: str) -> None:
    body = html.replace("\n", "").replace("\t", "")
    found = UNSEEN.search(body)
    context = body[max(0, found.start() - 120) : found.end() + 20] if found else ""
    assert found is None, f"a raw control character of {name!r} reached the page: {context!r}"
    assert "<b>bold</b>" not in html


@pytest.mark.parametrize("name", HOSTILE, ids=[printable(n) for n in HOSTILE])
def test_a_hostile_group_name_is_shown_visibly_and_linked_by_its_real_name(
    client: TestClient, name: str
) -> None:
    shown = printable(name).replace("<", "&lt;").replace(">", "&gt;")
    href = f"/clusters/prod/groups/{quote(name)}"

    listing = client.get("/clusters/prod/groups", params={"q": name[:3]})
    assert listing.status_code == 200
    _raw_free(listing.text, name)
    assert shown in listing.text
    assert f'href="{href}"' in listing.text, "the link addresses the real name"

    page = client.get(href)
    assert page.status_code == 200, page.text[:300]
    _raw_free(page.text, name)
    assert shown in page.text

    cluster = client.get("/clusters/prod")
    assert cluster.status_code == 200
    _raw_free(cluster.text, name)

    alerts = client.get("/alerts")
    assert alerts.status_code == 200
    _raw_free(alerts.text, name)
    assert f"{shown} is behind" in alerts.text
