"""The install step (`kafka-health setup`) fetches the pinned PostgreSQL JDBC driver over HTTPS
and installs nothing else: here the "Maven Central" is a local HTTP server that answers wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from monitor.evaluate import jdbc_driver


def test_the_install_step_refuses_a_file_that_is_not_the_pinned_driver(
    tmp_path: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the server sends, only the pinned file is installed: another one is refused by its
    SHA-256, an error answer by its status, and neither leaves a file behind."""
    monkeypatch.setattr(jdbc_driver, "URL", httpserver.url_for("/postgresql.jar"))
    for answer, says in (
        ({"response_data": b"PK not the driver"}, "SHA-256"),
        ({"status": 404, "response_data": b"no"}, "HTTP 404"),
    ):
        httpserver.clear()
        httpserver.expect_request("/postgresql.jar").respond_with_data(**answer)
        with pytest.raises(jdbc_driver.DriverError, match=says):
            jdbc_driver.fetch(tmp_path, report=lambda _: None)
        assert list((tmp_path / "jdbc").iterdir()) == []
