"""The group-partitions' window samples gathered by PostgreSQL (`extract.group_windows_query`,
`Inputs.group_windows`) against the same samples grouped by Spark from the three tables (the
transforms' own path when no `group_windows` is given): on the same rows of a real PostgreSQL,
every derived row of the group entities is identical.

The rows are random but seeded: group-partitions with many samples or one, lags unknown at some
samples, consumed timestamps missing, rewinds, caught-up stretches, samples on the window's edges
and outside it, group-partitions with a newest commit (`latest_commits`) and without, a group the
plan carries, another cluster, and samples and a commit without a latest row.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, text

from monitor.evaluate import extract
from monitor.evaluate.spark import jdbc_target
from monitor.store.evaluation import set_clock
from monitor.store.partitions import create_day_partitions, day_of
from tests.fixtures.spark import derived_once

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from monitor.evaluate.transforms import Inputs

pytestmark = pytest.mark.spark

NOW = datetime(2031, 3, 1, 12, 0, tzinfo=UTC)
PLAN = "b" * 32
WINDOW = timedelta(minutes=15)
GROUPS, PARTITIONS = 12, 5
CARRIED_GROUP = "group-3"


def _samples(rng: random.Random) -> list[dict[str, Any]]:
    """One group-partition's samples, oldest first: from none to 40, on irregular times, some
    outside the window or on its edges."""
    count = rng.choice([0, 1, 2, 3, 8, 20, 40])
    times = sorted({rng.randint(0, 1100) for _ in range(count)})
    offset, end = rng.randint(0, 1000), 0
    rows = []
    for age in reversed(times):
        end = max(end, offset) + rng.choice([0, 0, 3, 10, 50])
        step = rng.choice([0, 0, 1, 5, 40, -30]) if rng.random() < 0.9 else -200
        offset = max(0, min(end, offset + step))
        lag = None if rng.random() < 0.1 else end - offset
        consumed = None if rng.random() < 0.15 else NOW - timedelta(seconds=age + rng.randint(0, 300))
        at = NOW - timedelta(seconds=age)
        rows.append(
            {"sampled_at": at, "committed_offset": offset, "lag": lag, "consumed_timestamp": consumed}
        )
    edges = [NOW - WINDOW, NOW + timedelta(seconds=1)] if rng.random() < 0.3 else []
    for at in edges:  # just outside the window: never read
        rows.append({"sampled_at": at, "committed_offset": 0, "lag": 10**9, "consumed_timestamp": None})
    return rows


@pytest.fixture(scope="module")
def filled(engine: Engine) -> Engine:
    rng = random.Random(20311)
    samples: list[dict[str, Any]] = []
    latest: list[dict[str, Any]] = []
    commits: list[dict[str, Any]] = []
    for cluster in ("c", "other"):
        for g in range(GROUPS):
            for p in range(PARTITIONS):
                key = {
                    "cluster": cluster,
                    "group_id": f"group-{g}",
                    "topic": f"topic-{g % 3}",
                    "partition": p,
                }
                rows = [{**key, **row} for row in _samples(rng)]
                samples.extend(rows)
                commit = None
                if rng.random() < 0.7:
                    at = NOW - timedelta(seconds=rng.randint(0, 1200))
                    commit = {**key, "observed_at": at, "committed_offset": rng.randint(0, 900)}
                if (g, p) == (GROUPS - 1, 0):
                    commits.append({**key, "observed_at": NOW, "committed_offset": 1})
                    continue  # samples and a commit without a latest row: not evaluated
                if commit is not None:
                    commits.append(commit)
                current = max(rows, key=lambda r: r["sampled_at"]) if rows else {}
                latest.append(
                    {
                        **key,
                        "sampled_at": min(current.get("sampled_at", NOW), NOW),
                        "committed_offset": current.get("committed_offset", 7),
                        "end_offset": rng.choice([None, 2000]),
                        "start_offset": rng.choice([None, 0, 500]),
                        "lag": current.get("lag"),
                        "consumed_timestamp": current.get("consumed_timestamp"),
                    }
                )
    with engine.begin() as conn:
        create_day_partitions(conn, "group_offsets", [day_of(NOW - timedelta(days=1)), day_of(NOW)])
        conn.execute(
            text(
                "INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, committed_offset,"
                " lag, consumed_timestamp) VALUES (:cluster, :group_id, :topic, :partition, :sampled_at,"
                " :committed_offset, :lag, :consumed_timestamp) ON CONFLICT DO NOTHING"
            ),
            samples,
        )
        conn.execute(
            text(
                "INSERT INTO latest_group_offsets (cluster, group_id, topic, partition, sampled_at,"
                " committed_offset, end_offset, start_offset, lag, consumed_timestamp)"
                " VALUES (:cluster, :group_id, :topic, :partition, :sampled_at,"
                " :committed_offset, :end_offset, :start_offset, :lag, :consumed_timestamp)"
            ),
            latest,
        )
        conn.execute(
            text(
                "INSERT INTO latest_commits (cluster, group_id, topic, partition, observed_at,"
                " committed_offset) VALUES (:cluster, :group_id, :topic, :partition, :observed_at,"
                " :committed_offset)"
            ),
            commits,
        )
        set_clock(conn, PLAN, NOW)
        conn.execute(
            text("INSERT INTO evaluation_carried (plan_id, cluster, group_id) VALUES (:p, 'c', :g)"),
            {"p": PLAN, "g": CARRIED_GROUP},
        )
    return engine


@pytest.fixture(scope="module")
def inputs(filled: Engine, db_url: str, spark: SparkSession) -> Iterator[Inputs]:
    yield extract.read_inputs(spark, jdbc_target(db_url), ["c"], WINDOW, PLAN, NOW)


def _rows(frames: dict[str, Any], entity: str, rounded: bool = False) -> list[tuple[Any, ...]]:
    """The entity's rows, sorted; with `rounded`, doubles to 12 significant digits."""

    def value(v: Any) -> Any:
        return float(f"{v:.12g}") if rounded and isinstance(v, float) else v

    return sorted((tuple(value(v) for v in row) for row in frames[entity].collect()), key=repr)


def test_gathered_by_postgresql_or_by_spark_every_group_row_is_the_same(inputs: Inputs) -> None:
    assert inputs.group_windows is not None
    gathered = derived_once(inputs)
    grouped = derived_once(replace(inputs, group_windows=None))

    assert _rows(gathered, "group_partition") == _rows(grouped, "group_partition")
    for entity in ("group_topic", "group"):  # sums over partitions, in the order they arrive
        assert _rows(gathered, entity, rounded=True) == _rows(grouped, entity, rounded=True), entity
    partitions = gathered["group_partition"]
    keys = {(r.group_id, r.partition) for r in partitions.select("group_id", "partition").collect()}
    evaluated = {(f"group-{g}", p) for g in range(GROUPS) for p in range(PARTITIONS)}
    assert keys == evaluated - {(CARRIED_GROUP, p) for p in range(PARTITIONS)} - {(f"group-{GROUPS - 1}", 0)}
    # Not a comparison of empty or uniform columns: the random window exercises the rules.
    statuses = {r.status for r in partitions.select("status").collect()}
    assert {"OK", "STOP", "REWIND"} <= statuses, statuses
    assert partitions.where("commit_lag_seconds IS NOT NULL").count() > 0
    assert partitions.where("consume_rate < 0").count() > 0


def test_the_gathered_window_holds_every_sample_in_it_and_the_newest_commit(
    filled: Engine,
) -> None:
    sql = f"SELECT * FROM {extract.group_windows_query(['c'], WINDOW, PLAN)}"
    with filled.connect() as conn:
        gathered = {(r.group_id, r.topic, r.partition): r for r in conn.execute(text(sql))}
        expected_samples = dict(
            conn.execute(
                text(
                    "SELECT l.group_id || '/' || l.partition, count(g.sampled_at) + 1 FROM latest_group_offsets l"
                    " LEFT JOIN group_offsets g ON (g.cluster, g.group_id, g.topic, g.partition)"
                    " = (l.cluster, l.group_id, l.topic, l.partition)"
                    " AND g.sampled_at > :now - interval '15 minutes' AND g.sampled_at <= :now"
                    " WHERE l.cluster = 'c' GROUP BY 1"
                ),
                {"now": NOW},
            ).all()
        )
        newest = dict(
            conn.execute(
                text(
                    "SELECT group_id || '/' || partition, observed_at FROM latest_commits WHERE cluster = 'c'"
                )
            ).all()
        )
    assert gathered, "no group-partition gathered"
    assert all(key[0] != CARRIED_GROUP for key in gathered)
    for (group, _topic, partition), row in gathered.items():
        name = f"{group}/{partition}"
        assert len(row.window_at) == expected_samples[name], name
        assert len(row.window_lag) == len(row.window_offset) == len(row.window_consumed) == len(row.window_at)
        assert row.observed_at == newest.get(name), name
    assert any(row.observed_at is not None for row in gathered.values())
    assert any(None in row.window_lag for row in gathered.values())


def test_each_slice_gathers_its_own_keys_reading_only_its_own_rows(filled: Engine) -> None:
    sql = extract.group_windows_query(["c"], WINDOW, PLAN)
    with filled.connect() as conn:
        conn.execute(text(extract.GROUPING_SCAN))
        whole = sorted(tuple(r[:4]) for r in conn.execute(text(f"SELECT * FROM {sql}")))
        parts = []
        for condition in extract.slices(2):
            query = f"SELECT * FROM {sql} WHERE {condition}"
            parts.append(sorted(tuple(r[:4]) for r in conn.execute(text(query))))
            plan = "\n".join(str(r[0]) for r in conn.execute(text(f"EXPLAIN {query}")))
            # The slice's condition is applied in each of the three reads, under the grouping,
            # which groups by hash instead of sorting every sample by key.
            assert plan.count("hashtext") >= 3, plan
            assert "HashAggregate" in plan and "Sort" not in plan, plan
        conn.execute(text("RESET ALL"))  # the settings are the connection's: not for the pool
    assert parts[0] and parts[1]
    assert sorted(parts[0] + parts[1]) == whole
