"""The PostgreSQL JDBC driver for the development stack, the tests and the benchmarks: the one the
evaluate stage pins (`monitor.evaluate.jdbc_driver`), fetched once over HTTPS."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from monitor.evaluate import jdbc_driver

log = logging.getLogger(__name__)


def ensure_jdbc_driver(cache: Path | None = None, report: Callable[[str], None] = log.info) -> Path:
    """Path to the PostgreSQL JDBC jar, fetched from Maven Central on first use.

    Raises DriverError (a MonitorError) when the download fails or is not the pinned file."""
    return jdbc_driver.fetch(cache, report)
