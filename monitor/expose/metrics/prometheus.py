"""Prometheus `/metrics`: a custom collector that reads the current state from the SQL views at
scrape time, served from its own registry together with this process's counters.

Reading at scrape time means there is nothing to keep in sync and no stale series: a group,
topic or broker that is gone from the latest evaluation is gone from the next scrape. The metric
names, labels and meanings are the catalogue's (`catalogue.py`); the SQL is
`state_queries.py`, one query per group of families.

Failure policy:
- every query of one scrape runs in one read-only REPEATABLE READ transaction, so all numbers come
  from the same snapshot; each under `statement_timeout` = what is left of
  `metrics.scrape_timeout_seconds`, in its own savepoint, so a slow query costs only its own
  families and a slow database cannot hang a scrape;
- a query that fails or times out leaves its families out and sets
  `kafka_health_scrape_error{query}` to 1; PostgreSQL unreachable leaves every state family out;
  either way `kafka_health_up` is 0, the process metrics are still served, and the answer is 200;
- partition-level series are capped by `metrics.max_partition_series`: the most urgent rows are
  kept (a prefix in urgency order, whole rows only), the rest are counted in
  `kafka_health_partition_series_dropped`, and a warning is logged when the cap starts cutting
  (and an info line when it stops), not on every scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from sqlalchemy import Connection, Engine, RowMapping, text
from sqlalchemy.exc import SQLAlchemyError

from monitor.core.errors import MonitorError
from monitor.core.settings import MetricsConfig
from monitor.expose.metrics.catalogue import BY_NAME, STATE
from monitor.expose.metrics.state_queries import LABEL_COLUMNS, StateQuery, queries

log = logging.getLogger(__name__)

Row = RowMapping


def metrics_registry(
    engine: Engine, settings: MetricsConfig, process: CollectorRegistry = REGISTRY
) -> CollectorRegistry:
    """The registry `/metrics` serves: the state read from `engine`, then the metrics of
    `process` (the default registry, where this process's counters and prometheus_client's
    process and gc collectors register themselves when their modules are imported)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(engine, settings))
    registry.register(_Forward(process))
    return registry


class _Forward:
    """Another registry's metrics, collected at each scrape."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source.collect()


@dataclass
class _Budget:
    """The partition-level series one scrape may still serve."""

    limit: int
    served: int = 0
    dropped: int = 0
    closed: bool = False
    """Set when a row did not fit: later rows are less urgent and are dropped too."""

    @property
    def left(self) -> int:
        return 0 if self.closed else self.limit - self.served


class StateCollector:
    """The state metrics of the catalogue, read from PostgreSQL at each `collect()`."""

    def __init__(self, engine: Engine, settings: MetricsConfig) -> None:
        self._engine = engine
        self._settings = settings
        self._lock = threading.Lock()
        self._capped = False

    def describe(self) -> Iterable[Metric]:
        """Nothing: registering must not query the database (and the names are the catalogue's)."""
        return []

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        families = {
            spec.name: GaugeMetricFamily(spec.name, spec.meaning, labels=spec.labels) for spec in STATE
        }
        budget = _Budget(self._settings.max_partition_series)
        todo = queries(self._settings.partition_series)
        answered = self._read(todo, families, budget, started + self._settings.scrape_timeout_seconds)
        for family in families.values():
            if family.samples:
                yield family
        yield from self._scrape_families(todo, answered, budget, time.monotonic() - started)

    def _read(
        self,
        todo: Sequence[StateQuery],
        families: dict[str, GaugeMetricFamily],
        budget: _Budget,
        deadline: float,
    ) -> set[str]:
        """Run `todo` in one snapshot and add their rows to `families`; the names of the queries
        that answered."""
        answered: set[str] = set()
        try:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                with conn.begin():
                    for query in todo:
                        rows = _run(conn, query, max(budget.left, 1), deadline)
                        if rows is not None:
                            answered.add(query.name)
                            _add(families, query, rows, budget)
        except (SQLAlchemyError, MonitorError) as exc:
            log.warning("metrics: PostgreSQL did not answer; state metrics left out: %s", exc)
        except Exception:  # a scrape must still serve the process metrics; the bug is logged
            log.exception("metrics: reading the state failed; state metrics left out")
        if {q.name for q in todo if q.partition_level} <= answered:
            self._note_cap(budget)
        return answered

    def _note_cap(self, budget: _Budget) -> None:
        """Log when the cap starts or stops cutting, not on every scrape."""
        with self._lock:
            capped = budget.dropped > 0
            if capped == self._capped:
                return
            self._capped = capped
        if capped:
            log.warning(
                "metrics: metrics.max_partition_series (%d) left out %d partition-level series; "
                "the most urgent are served. Raise the cap, or set metrics.partition_series: false "
                "and use the group, topic and cluster series",
                budget.limit,
                budget.dropped,
            )
        else:
            log.info("metrics: every partition-level series fits under metrics.max_partition_series again")

    def _scrape_families(
        self, todo: Sequence[StateQuery], answered: set[str], budget: _Budget, seconds: float
    ) -> Iterator[Metric]:
        def gauge(name: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, BY_NAME[name].meaning, value=value)

        yield gauge("kafka_health_up", 1.0 if len(answered) == len(todo) else 0.0)
        errors = GaugeMetricFamily(
            "kafka_health_scrape_error", BY_NAME["kafka_health_scrape_error"].meaning, labels=["query"]
        )
        for query in todo:
            errors.add_metric([query.name], 0.0 if query.name in answered else 1.0)
        yield errors
        yield gauge("kafka_health_scrape_duration_seconds", seconds)
        if self._settings.partition_series:
            yield gauge("kafka_health_partition_series", budget.served)
            yield gauge("kafka_health_partition_series_dropped", budget.dropped)


def _run(conn: Connection, query: StateQuery, limit: int, deadline: float) -> list[Row] | None:
    """The rows of `query`, or None when it failed or the scrape's time is up. Runs in a savepoint
    so that a timeout leaves the transaction usable for the next query."""
    left_ms = int((deadline - time.monotonic()) * 1000)
    if left_ms <= 0:
        log.warning("metrics: no time left for the %s query (metrics.scrape_timeout_seconds)", query.name)
        return None
    try:
        with conn.begin_nested():
            conn.execute(text(f"SET LOCAL statement_timeout = {left_ms}"))
            return list(conn.execute(text(query.statement()), {"limit": limit}).mappings().all())
    except SQLAlchemyError as exc:
        log.warning("metrics: the %s query failed: %s", query.name, str(exc).splitlines()[0])
        return None


def _add(families: dict[str, GaugeMetricFamily], query: StateQuery, rows: list[Row], budget: _Budget) -> None:
    """One sample per (row, catalogued column) with a value; partition-level rows while they fit."""
    specs = query.specs
    served = 0
    for row in rows:
        samples = [
            (spec.name, labels, _number(row[spec.column]))
            for spec in specs
            if spec.column is not None
            and row[spec.column] is not None
            and (labels := _labels(row, spec.labels)) is not None
        ]
        if query.partition_level:
            if len(samples) > budget.left:
                budget.closed = True
                break
            budget.served += len(samples)
            served += len(samples)
        for name, labels, value in samples:
            families[name].add_metric(labels, value)
    if query.partition_level and rows:
        budget.dropped += int(rows[0]["total_series"]) - served


def _labels(row: Row, names: Sequence[str]) -> list[str] | None:
    """The label values of `row`; None when one is missing (no series then)."""
    values = [row[LABEL_COLUMNS[name]] for name in names]
    return None if any(v is None for v in values) else [str(v) for v in values]


def _number(value: object) -> float:
    if isinstance(value, bool | int | float | Decimal):
        return float(value)
    raise TypeError(f"not a number: {value!r}")
