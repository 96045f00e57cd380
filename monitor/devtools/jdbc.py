"""The PostgreSQL JDBC driver for the development stack, the tests and the benchmarks: the one the
evaluate stage pins, fetched once over HTTPS (`monitor.evaluate.jdbc_driver.fetch`)."""

from __future__ import annotations

from monitor.evaluate.jdbc_driver import fetch as ensure_jdbc_driver

__all__ = ["ensure_jdbc_driver"]
