"""A gap in the data is not a condition turned false, on the real PostgreSQL and Spark: a group the
offsets run could not sample keeps its finding and its alert (state, `for` timer, pending_since)
until data returns; a group sampled and found healthy is resolved.

Four groups lag on `orders` at T (run 1). Run 2, at T+30 s, is partial: `missing` is not in it
(NotCoordinator on its OffsetFetch); `blind`'s committed offset is, but not the partition's
offsets, so its lag and the age of its oldest unread message are unknown (what a stopped broker
did to ConsumerLagSeconds, whose condition is then false); `healed` has caught up; `behind` still
lags. Run 3, at T+60 s, samples them all again. The second and third evaluations run the plan the
first built, as the daemon's do every 30 s: they compile no generated class (nor do the warm runs
of a large cluster's plan, whose first run compiles some).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, text

from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.cycle import run_cycle
from monitor.core.clock import to_millis
from monitor.core.records import (
    CommittedOffset,
    GroupOffsetSample,
    OffsetsBatch,
    PartitionOffsets,
    PartitionSample,
)
from monitor.evaluate import job as evaluation_job
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import Rule
from monitor.evaluate.spark import jdbc_target
from monitor.store.samples import write_offsets_batch
from tests.fixtures.sql import record_offsets_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

CLUSTER = "gaps"
T = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
RULE = Rule.model_validate({
    "name": "GroupLagging", "description": "the group has unread messages", "entity": "group_topic",
    "condition": "max_lag_seconds > 0", "value": "max_lag_seconds", "for": "10m",
    "severities": [{"severity": "warning"}], "summary": "{{ group_id }} lags on {{ topic }}",
})  # fmt: skip


def run(
    engine: Engine,
    at: datetime,
    status: str,
    end: int,
    committed: dict[str, int],
    blind: tuple[str, ...] = (),
    cluster: str = CLUSTER,
) -> None:
    """One offsets run started 2 s before `at`, its batch sampled 1 s before it; the oldest unread
    message of a lagging group is a minute old; the groups in `blind` have no partition offsets."""
    sampled = at - timedelta(seconds=1)
    with engine.begin() as conn:
        record_offsets_run(conn, cluster, at - timedelta(seconds=2), sampled, status)
        ms = to_millis(sampled)
        write_offsets_batch(conn, OffsetsBatch(
            cluster, sampled,
            partitions=[PartitionSample(PartitionOffsets("orders", 0, 0, end), ms - 600_000, ms, "CreateTime")],
            group_offsets=[
                GroupOffsetSample(CommittedOffset(group, "orders", 0, offset), None, None, None)
                if group in blind
                else GroupOffsetSample(CommittedOffset(group, "orders", 0, offset), end, 0, end - offset, False,
                                       ms - 60_000 if offset < end else None)
                for group, offset in committed.items()
            ],
        ))  # fmt: skip


def evaluate_and_alert(
    spark: SparkSession, db_url: str, engine: Engine, at: datetime, plans: Plans
) -> dict[str, int]:
    """One evaluation at `at` and an alert cycle. The plan in `plans` runs again, as in the daemon:
    built once (seconds of driver time), not once per evaluation."""
    result = run_evaluation(spark, jdbc_target(db_url), engine, [RULE], [CLUSTER], at, JobSettings(), plans)
    with engine.begin() as conn:
        run_cycle(conn, load_routing(*default_routing_paths()), at, "http://monitor.test")
    return result.findings


def evaluate_warm(
    spark: SparkSession, db_url: str, engine: Engine, at: datetime, plans: Plans
) -> dict[str, int]:
    """`evaluate_and_alert` with the plan in `plans` run before, at a new time: the daemon's
    evaluation every 30 s, which may generate and compile no class again (the JIT compilers then
    spent half of a small evaluation's CPU)."""
    before = _compilations(spark)
    counts = evaluate_and_alert(spark, db_url, engine, at, plans)
    compiled = _compilations(spark) - before
    assert compiled == 0, f"the warm evaluation at {at} compiled {compiled} generated classes"
    assert counts["new"] + counts["updated"] >= 1, "the lagging group is found"
    return counts


def alerts(engine: Engine) -> dict[str, dict[str, Any]]:
    """Per group, its alerts (oldest first) as (id, state, pending_since)."""
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, entity_key, state, pending_since FROM alerts WHERE cluster = :c ORDER BY id"),
            {"c": CLUSTER},
        )
        found: dict[str, Any] = {}
        for row in rows:
            found.setdefault(row.entity_key.split("/")[1], []).append((row.id, row.state, row.pending_since))
        return found


def finding_states(engine: Engine) -> dict[str, tuple[str, datetime]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT entity_key, state, first_seen FROM findings WHERE cluster = :c AND state <> 'resolved'"
            ),
            {"c": CLUSTER},
        )
        return {row.entity_key.split("/")[1]: (row.state, row.first_seen) for row in rows}


def test_a_group_missing_from_a_partial_run_keeps_its_alert(
    spark: SparkSession, db_url: str, engine: Engine
) -> None:
    plans = Plans()
    run(engine, T, "ok", 1000, {"missing": 900, "blind": 900, "healed": 900, "behind": 900})
    evaluate_and_alert(spark, db_url, engine, T, plans)
    first = alerts(engine)
    assert {group: [state for _, state, _ in rows] for group, rows in first.items()} == {
        "missing": ["pending"], "blind": ["pending"], "healed": ["pending"], "behind": ["pending"],
    }  # fmt: skip

    at = T + timedelta(seconds=30)
    run(engine, at, "partial", 1100, {"blind": 950, "healed": 1100, "behind": 950}, blind=("blind",))
    counts = evaluate_warm(spark, db_url, engine, at, plans)
    assert (counts["resolved"], counts["kept"]) == (1, 2)
    pending = ("pending", T - timedelta(seconds=2))  # since the first run began, not the evaluation
    assert finding_states(engine) == {"missing": pending, "blind": pending, "behind": pending}
    second = alerts(engine)
    assert second["missing"] == first["missing"], "not sampled: the same alert, pending since T"
    assert second["blind"] == first["blind"], "no lag known: the same alert, pending since T"
    assert second["behind"] == first["behind"]
    assert [(alert_id, state) for alert_id, state, _ in second["healed"]] == [
        (first["healed"][0][0], "resolved")
    ]

    at = T + timedelta(seconds=60)
    run(engine, at, "ok", 1200, {"missing": 1000, "blind": 1000, "healed": 1200, "behind": 1000})
    counts = evaluate_warm(spark, db_url, engine, at, plans)
    assert (counts["new"], counts["updated"], counts["resolved"], counts["kept"]) == (0, 3, 0, 0)
    assert finding_states(engine) == {"missing": pending, "blind": pending, "behind": pending}
    third = alerts(engine)
    assert third["missing"] == first["missing"], "sampled again: still the first alert, never re-opened"
    assert third["blind"] == first["blind"]
    assert len(third["healed"]) == 1


def _compilations(spark: SparkSession) -> int:
    """How many classes Spark's code generator has compiled in this JVM."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def test_a_warm_evaluation_of_a_large_cluster_compiles_no_code_again(
    spark: SparkSession, db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large cluster's evaluation runs generated code (in several partitions): its classes are
    compiled by the first run of a plan, not by every run at a new clock, whose value must not be
    written into the generated source."""
    monkeypatch.setattr(evaluation_job, "ROWS_PER_SHUFFLE_PARTITION", 1)  # two rows: two partitions
    # Adaptive execution re-plans stages from the rows each run finds (an empty side, a smaller
    # join) and may compile a few classes for a plan it had not made before: off here, so that
    # only what the clock does is counted.
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        compiled = _compilations_per_run(spark, db_url, engine)
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    assert compiled[0] > 0, "the first run generates code: the premise of this test"
    assert compiled[1:] == [0, 0, 0], f"classes compiled per evaluation: {compiled}"


def _compilations_per_run(spark: SparkSession, db_url: str, engine: Engine) -> list[int]:
    plans, target = Plans(), jdbc_target(db_url)
    compiled = []
    for step in range(4):
        at = T + timedelta(seconds=30 * step)
        run(engine, at, "ok", 1000 + 100 * step, {"big-a": 900, "big-b": 1000 + 100 * step}, cluster="big")
        before = _compilations(spark)
        result = run_evaluation(spark, target, engine, [RULE], ["big"], at, JobSettings(), plans)
        compiled.append(_compilations(spark) - before)
        assert result.findings["new"] + result.findings["updated"] >= 1, "the lagging group is found"
    return compiled
