"""The security headers are on every kind of answer: a page, the API, an error (404, 405 with its
`Allow`, 422, a refused change, a NUL in the path refused before routing), a static file, /metrics,
the API's documentation; HSTS only when `web.behind_tls` says the monitor is reached over HTTPS."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from monitor.core.settings import IdentityConfig
from monitor.expose.web.app import create_app
from monitor.expose.web.security import HSTS, REDOC_REFUSED

ANSWERS = [
    ("GET", "/", 200),
    ("GET", "/api/v1/clusters", 200),
    ("GET", "/api/v1/clusters/nowhere", 404),
    ("POST", "/api/v1/clusters", 405),
    ("PUT", "/api/v1/silences", 405),
    ("PUT", "/api/v1/silences/1", 405),
    ("GET", "/api/v1/alerts?limit=%C2%B2", 422),
    ("POST", "/api/v1/silences", 401),
    ("GET", "/api/v1/alerts%00", 422),
    ("GET", "/static/kafka-health.css", 200),
    ("GET", "/static/nothing.css", 404),
    ("GET", "/metrics", 200),
    ("GET", "/docs", 200),
    ("GET", "/redoc", 404),
    ("GET", "/clusters/nowhere", 404),
]


@pytest.mark.parametrize("hsts", [False, True])
def test_every_kind_of_answer_carries_the_security_headers(engine: Engine, hsts: bool) -> None:
    app = create_app(engine, stale_after=timedelta(minutes=5), identity=IdentityConfig(), hsts=hsts)
    http = TestClient(app)
    for method, path, status in ANSWERS:
        answer = http.request(method, path)
        assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text[:200]}"
        headers = answer.headers
        policy = headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy, (method, path, policy)
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"
        assert headers.get("strict-transport-security") == (HSTS if hsts else None), (method, path)
        if path == "/redoc":  # not served (its styles need 'unsafe-inline'): says where the docs are
            assert answer.json()["error"]["message"] == REDOC_REFUSED and "/docs" in REDOC_REFUSED
        if status == 405:  # it says every method the path takes
            allowed = {
                "/api/v1/clusters": "GET",
                "/api/v1/silences": "GET, POST",
                "/api/v1/silences/1": "DELETE",
            }
            assert headers["allow"] == allowed[path]
