"""The state metrics of the catalogue read from the SQL views in one go: what a build of the
`/metrics` snapshot (`snapshot.py`) runs once per evaluation. The metric names, labels and
meanings are the catalogue's (`catalogue.py`); the SQL is `state_queries.py`, one query per group
of families.

Failure policy of one read:
- every query runs in one read-only REPEATABLE READ transaction, so all numbers come from the same
  database snapshot; each under `statement_timeout` = what is left of
  `metrics.build_timeout_seconds`, in its own savepoint, so a slow query costs only its own
  families and a slow database cannot hold up a build for long;
- a query that fails or times out leaves its families out and is missing from `answered`;
  PostgreSQL unreachable leaves every family out (the snapshot then keeps serving the last good
  read, `snapshot.py` says how);
- partition-level series are capped by `metrics.max_partition_series`: the most urgent rows are
  kept (a prefix in urgency order, whole rows only), the rest are counted in `dropped`, and a
  warning is logged when the cap starts cutting (and an info line when it stops), not on every
  read. Clusters with `partition_series: false` have no partition-level rows at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal

from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.samples import Sample
from sqlalchemy import Connection, Engine, RowMapping, text
from sqlalchemy.exc import SQLAlchemyError

from monitor.core.errors import MonitorError
from monitor.core.settings import MetricsConfig
from monitor.expose.metrics.catalogue import STATE
from monitor.expose.metrics.state_queries import LABEL_COLUMNS, StateQuery, queries

log = logging.getLogger(__name__)

Row = RowMapping


@dataclass(frozen=True, slots=True)
class StateRead:
    """One read of the state: the families that have samples, and how the read went."""

    families: tuple[GaugeMetricFamily, ...]
    queries: tuple[str, ...]
    """The queries asked (partition-level ones only when `metrics.partition_series` is on)."""
    answered: frozenset[str]
    seconds: float
    partition_series: int
    """Partition-level series served."""
    dropped: int
    """Partition-level series the cap left out."""

    @property
    def complete(self) -> bool:
        """Every query answered."""
        return self.answered >= set(self.queries)


@dataclass
class _Budget:
    """The partition-level series one read may still serve."""

    limit: int
    served: int = 0
    dropped: int = 0
    closed: bool = False
    """Set when a row did not fit: later rows are less urgent and are dropped too."""

    @property
    def left(self) -> int:
        return 0 if self.closed else self.limit - self.served


class StateCollector:
    """Reads the state metrics of the catalogue from PostgreSQL, all of them at each `read()`."""

    def __init__(
        self, engine: Engine, settings: MetricsConfig, partition_series_off: Collection[str] = ()
    ) -> None:
        self._engine = engine
        self._settings = settings
        self._off = sorted(partition_series_off)
        self._lock = threading.Lock()
        self._capped = False

    def read(self) -> StateRead:
        """Every state family with samples, read in one transaction. Blocks for at most about
        `metrics.build_timeout_seconds`; raises nothing (what failed is left out, and logged)."""
        started = time.monotonic()
        families = {
            spec.name: GaugeMetricFamily(spec.name, spec.meaning, labels=spec.labels) for spec in STATE
        }
        budget = _Budget(self._settings.max_partition_series)
        todo = queries(self._settings.partition_series)
        answered = self._read(todo, families, budget, started + self._settings.build_timeout_seconds)
        return StateRead(
            families=tuple(family for family in families.values() if family.samples),
            queries=tuple(query.name for query in todo),
            answered=frozenset(answered),
            seconds=time.monotonic() - started,
            partition_series=budget.served,
            dropped=budget.dropped,
        )

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
                        rows = _run(conn, query, {"limit": max(budget.left, 1), "off": self._off}, deadline)
                        if rows is not None:
                            answered.add(query.name)
                            _add(families, query, rows, budget)
        except (SQLAlchemyError, MonitorError) as exc:
            log.warning("metrics: PostgreSQL did not answer; state not read: %s", exc)
        except Exception:  # a build must not take the server down; the bug is logged
            log.exception("metrics: reading the state failed; state metrics left out")
        if {q.name for q in todo if q.partition_level} <= answered:
            self._note_cap(budget)
        return answered

    def _note_cap(self, budget: _Budget) -> None:
        """Log when the cap starts or stops cutting, not on every read."""
        with self._lock:
            capped = budget.dropped > 0
            if capped == self._capped:
                return
            self._capped = capped
        if capped:
            log.warning(
                "metrics: metrics.max_partition_series (%d) left out %d partition-level series; "
                "the most urgent are served. Raise the cap, or set partition_series: false on the "
                "largest clusters (or metrics.partition_series: false for all) and use the group, "
                "topic and cluster series",
                budget.limit,
                budget.dropped,
            )
        else:
            log.info("metrics: every partition-level series fits under metrics.max_partition_series again")


def _run(conn: Connection, query: StateQuery, params: dict[str, object], deadline: float) -> list[Row] | None:
    """The rows of `query`, or None when it failed or the read's time is up. Runs in a savepoint
    so that a timeout leaves the transaction usable for the next query."""
    left_ms = int((deadline - time.monotonic()) * 1000)
    if left_ms <= 0:
        log.warning("metrics: no time left for the %s query (metrics.build_timeout_seconds)", query.name)
        return None
    try:
        with conn.begin_nested():
            conn.execute(text(f"SET LOCAL statement_timeout = {left_ms}"))
            return list(conn.execute(text(query.statement()), params).mappings().all())
    except SQLAlchemyError as exc:
        log.warning("metrics: the %s query failed: %s", query.name, str(exc).splitlines()[0])
        return None


def _add(families: dict[str, GaugeMetricFamily], query: StateQuery, rows: list[Row], budget: _Budget) -> None:
    """One sample per (row, catalogued column) with a value; partition-level rows while they fit.
    The samples of one row with the same label names share one labels mapping (read once per row,
    and written once per row by `text_format`): 650,000 samples at 100,000 group-partitions."""
    specs = [(spec.name, spec.column, spec.labels) for spec in query.specs if spec.column is not None]
    served = 0
    for row in rows:
        by_names: dict[tuple[str, ...], dict[str, str] | None] = {}
        samples = []
        for name, column, names in specs:
            value = row[column]
            if value is None:
                continue
            if names in by_names:
                labels = by_names[names]
            else:  # (read only for a value: a row need not have the labels of columns it has no value in)
                labels = by_names[names] = _labels(row, names)
            if labels is not None:
                samples.append(Sample(name, labels, _number(value)))
        if query.partition_level:
            if len(samples) > budget.left:
                budget.closed = True
                break
            budget.served += len(samples)
            served += len(samples)
        for sample in samples:
            families[sample.name].samples.append(sample)
    if query.partition_level and rows:
        budget.dropped += int(rows[0]["total_series"]) - served


def _labels(row: Row, names: Sequence[str]) -> dict[str, str] | None:
    """The labels `names` of `row`; None when a value is missing (no series then)."""
    values = [row[LABEL_COLUMNS[name]] for name in names]
    if any(v is None for v in values):
        return None
    return dict(zip(names, map(str, values), strict=True))


def _number(value: object) -> float:
    if isinstance(value, bool | int | float | Decimal):
        return float(value)
    raise TypeError(f"not a number: {value!r}")
