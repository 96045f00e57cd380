"""What Spark measured while it ran a job: the rows and the time of its JDBC reads.

The extract's reads are lazy (they run inside the jobs that use their rows), so the time spent
reading is not a phase of its own on the clock. Spark records it on each JDBC scan node of the
executed plans (`queryExecutionTime`: until the server answered; `fetchAndTransformToInternalRowsNs`:
fetching and converting the rows), summed over the scan's tasks. `jdbc_reads` walks the plans
that ran, into the plans that built cached frames, and adds them up once per scan.

This reads Spark's physical plan classes through py4j, which is not a public API: on a Spark
version where a name differs, the reads are reported as unknown (None) rather than failing the
evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_TIME_METRICS = ("queryExecutionTime", "fetchAndTransformToInternalRowsNs")
_NANOS = 1e-9


@dataclass(frozen=True)
class JdbcReads:
    """The JDBC scans of some jobs: how many, the rows read, and their time summed over tasks."""

    scans: int
    rows: int
    task_seconds: float


def jdbc_reads(frames: Iterable[DataFrame]) -> JdbcReads | None:
    """The JDBC reads of the jobs that computed `frames` (DataFrames whose action has run), each
    scan counted once however many plans share it. None when the plans cannot be read."""
    try:
        seen: set[int] = set()
        scans, rows, nanos = 0, 0, 0
        for frame in frames:
            for node in _nodes(frame._jdf.queryExecution().executedPlan(), seen):
                if node.nodeName().startswith("Scan JDBCRelation"):
                    scans += 1
                    rows += _metric(node, "numOutputRows")
                    nanos += sum(_metric(node, name) for name in _TIME_METRICS)
        return JdbcReads(scans, rows, nanos * _NANOS)
    except Exception as exc:  # py4j errors of another Spark version's plan classes
        log.warning("the JDBC read time is unknown: Spark's plan could not be read: %s", exc)
        return None


def _nodes(node: Any, seen: set[int]) -> Iterator[Any]:
    """Every node of a physical plan, into adaptive stages and the plans of cached frames."""
    if node.id() in seen:
        return
    seen.add(node.id())
    yield node
    for inner in _inside(node):
        yield from _nodes(inner, seen)


def _inside(node: Any) -> Iterator[Any]:
    kind = node.getClass().getSimpleName()
    if kind == "AdaptiveSparkPlanExec":
        yield node.executedPlan()
    elif kind.endswith("QueryStageExec"):
        yield node.plan()
    elif kind == "InMemoryTableScanExec":
        yield node.relation().cachedPlan()
    elif kind == "ReusedExchangeExec":
        yield node.child()
    children = node.children().iterator()
    while children.hasNext():
        yield children.next()


def _metric(node: Any, name: str) -> int:
    found = node.metrics().get(name)
    return int(found.get().value()) if found.isDefined() else 0
