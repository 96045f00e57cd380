"""A prepared evaluation: the job's DataFrames built once, then run at any time.

Building the derive plan and the rules' matches costs seconds of driver time (tens of
thousands of calls from Python into Spark's JVM, each re-analysing a growing plan), whatever the
data: for a small cluster, more than running it (docs/bench/evaluation-profile.md). Nothing in
the plan depends on the time of an evaluation: the inputs' window and every "now" of the
transforms come from the plan's row in `evaluation_clocks` (`extract.clock`), read by Spark when
the plan runs. So a plan is built once per session and set of things it is built from (`PlanKey`),
and each evaluation sets the clock, caches the plan's kept frames, runs it and releases them.

A plan holds DataFrames only: each run makes fresh Datasets from them (`fresh`), so that Spark
plans the run anew against the frames cached for it, and no physical plan (its shuffle files,
broadcasts or cached relations) of an earlier run is reused.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache

from monitor.core.derived import columns_of
from monitor.core.objectives import Objective
from monitor.evaluate import extract
from monitor.evaluate.engine import (
    MATCH_DDL,
    evaluate_rules,
    rule_matches,
    unsampled_key,
    unsampled_keys,
    with_unsampled,
)
from monitor.evaluate.rules import Rule
from monitor.evaluate.spark import JdbcTarget
from monitor.evaluate.transforms import derive

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession


@dataclass(frozen=True)
class PlanKey:
    """What a plan is built from: the same key, the same plan."""

    session: int
    """The SparkSession's identity: a plan belongs to the session it was built in."""
    target: str
    clusters: tuple[str, ...]
    rules: str
    """A digest of the rules' definitions (they are reloaded every evaluation)."""
    window: timedelta
    window_commits: int
    readers: int
    """The read slices and shuffle partitions it was sized for (monitor.evaluate.job)."""
    one_action: bool
    """Whether it runs as one action (`Plan.gathered`)."""
    objectives: tuple[Objective, ...] = ()
    """The lag objectives (reloaded every evaluation, like the rules)."""


def plan_key(
    spark: SparkSession,
    target: JdbcTarget,
    clusters: Sequence[str],
    rules: Sequence[Rule],
    window: timedelta,
    window_commits: int,
    readers: int,
    one_action: bool,
    objectives: Sequence[Objective] = (),
) -> PlanKey:
    digest = hashlib.sha256()
    for rule in rules:
        digest.update(rule.model_dump_json().encode())
    return PlanKey(
        id(spark),
        target.url,
        tuple(clusters),
        digest.hexdigest(),
        window,
        window_commits,
        readers,
        one_action,
        tuple(objectives),
    )


@dataclass(frozen=True)
class Plan:
    """An evaluation's DataFrames: the entities (monitor.core.derived) over the inputs of the
    window ending at the clock of `plan_id`, and what its one action brings to the driver
    (`action`). `kept` are the frames used more than once, in the order they were built (each may
    read the ones before it): cached during a run, in that order.

    In a plan for one action, `gathered`: every entity's rows with the rules' verdicts on each
    (`gather`), brought to the driver at once. Otherwise `verdicts`: the rules' matches and the
    unsampled keys (engine.with_unsampled), and Spark writes the entities."""

    plan_id: str
    frames: dict[str, DataFrame]
    kept: tuple[DataFrame, ...]
    verdicts: DataFrame | None = None
    gathered: DataFrame | None = None

    @property
    def action(self) -> DataFrame:
        """The DataFrame a run collects: `gathered` or `verdicts`."""
        action = self.gathered if self.gathered is not None else self.verdicts
        assert action is not None, "a plan has gathered rows or verdicts"
        return action


def build_plan(
    spark: SparkSession, target: JdbcTarget, rules: Sequence[Rule], key: PlanKey, built_at: datetime
) -> Plan:
    """A new plan of `key` (`plan_key`: `rules` are those it was made of) with a clock of its own
    (set it before running the plan: store.evaluation.set_clock); for one action, with its
    `gathered` frame."""
    plan_id = uuid.uuid4().hex
    kept: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        kept.append(frame)
        return frame

    inputs = extract.read_inputs(
        spark, target, key.clusters, key.window, plan_id, built_at, key.readers, keep=keep
    )
    objectives = extract.read_objectives(spark, target, key.clusters, key.objectives, plan_id)
    frames = derive(inputs, key.window_commits, keep, objectives, read_once=key.one_action)
    if key.one_action:
        return Plan(plan_id, frames, tuple(kept), gathered=gather(frames, rules))
    verdicts = with_unsampled(evaluate_rules(frames, rules, inputs.now), unsampled_keys(frames, rules))
    return Plan(plan_id, frames, tuple(kept), verdicts=verdicts)


PART = "part"
"""The column of `gather` naming the entity a row is a row of."""
MATCHES = "matches"
"""The column of `gather` holding the rules' matches on a row (engine.MATCH_DDL structs)."""
UNSAMPLED = "unsampled_key"
"""The column of `gather` holding a row's `entity_key` where it was not sampled (engine.unsampled_key)."""


def row_column(entity: str) -> str:
    """The column of `gather` holding a row of `entity`."""
    return f"row_{entity}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class EntityRows:
    """The rows of one entity brought by `gather`, as tuples in the order of `columns` (the
    struct's), its timestamps as aware datetimes (exact to the microsecond): what COPY sends, made
    once per row instead of a dictionary per row and a tuple from it."""

    def __init__(self, entity: str, first: Row) -> None:
        self.columns: list[str] = list(first.asDict())
        timestamps = _timestamp_columns(entity)
        self._stamps = [at for at, name in enumerate(self.columns) if name in timestamps]
        self.rows: list[tuple[Any, ...]] = []

    def add(self, row: Row) -> None:
        """Add `row`, a struct of `gather` of this entity (with the columns of the first one)."""
        values = list(row)
        for at in self._stamps:
            micros = values[at]
            if micros is not None:
                values[at] = _EPOCH + timedelta(microseconds=micros)
        self.rows.append(tuple(values))


@functools.cache
def _timestamp_columns(entity: str) -> frozenset[str]:
    return frozenset(c.name for c in columns_of(entity).values() if c.type == "timestamp")


def gather(frames: dict[str, DataFrame], rules: Sequence[Rule]) -> DataFrame:
    """Every entity's rows and the rules' verdicts on them, in one DataFrame of a row per entity
    row: `PART` names the entity, `row_column(entity)` holds the row (a struct, its timestamps as
    microseconds since the epoch: `EntityRows` turns them back, whatever the driver's time zone;
    the other entities' columns are null), `MATCHES` the matches of the entity's rules on it
    (engine.rule_matches; empty or null where none) and `UNSAMPLED` its key where this evaluation
    did not sample it and rules apply to its entity.

    The rules are applied to the rows as they are gathered, so each entity's frame appears once in
    the plan: a separate frame of verdicts unioned with the rows held every entity's plan twice,
    which Spark analysed, told apart and planned twice at every run.

    The union is brought in one partition, by one task: each task of a stage deserialises the
    stage's whole plan (every entity's branch and every rule, 1.3 MB for the shipped rules), and a
    union of the entities' single partitions ran a task per entity (docs/bench/evaluation-profile.md)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, DataType, LongType, StructField, StructType, TimestampType

    from monitor.evaluate.transforms.common import union_by_position

    def micros(name: str, timestamp: bool) -> Column:
        return (F.unix_micros(F.col(name)) if timestamp else F.col(name)).alias(name)

    def row_type(schema: StructType) -> StructType:
        return StructType(
            [
                StructField(f.name, LongType() if isinstance(f.dataType, TimestampType) else f.dataType)
                for f in schema.fields
            ]
        )

    matches = rule_matches(frames, rules)
    ruled = {rule.entity for rule in rules}
    nothing = ArrayType(DataType.fromDDL(MATCH_DDL))
    schemas = {entity: frame.schema for entity, frame in frames.items()}  # a round trip to the JVM each
    types = {entity: row_type(schema) for entity, schema in schemas.items()}
    parts = []
    for entity, frame in frames.items():
        fields = [micros(f.name, isinstance(f.dataType, TimestampType)) for f in schemas[entity].fields]
        found = matches.get(entity)
        key = unsampled_key(entity, frame) if entity in ruled else None
        verdicts = F.filter(F.array(*found), lambda m: m.isNotNull()) if found else F.lit(None).cast(nothing)
        rows = [
            (F.struct(*fields) if other == entity else F.lit(None).cast(t)).alias(row_column(other))
            for other, t in types.items()
        ]
        parts.append(
            frame.select(
                F.lit(entity).alias(PART),
                verdicts.alias(MATCHES),
                (key if key is not None else F.lit(None).cast("string")).alias(UNSAMPLED),
                *rows,
            )
        )
    return union_by_position(parts).coalesce(1)


def fresh(frame: DataFrame) -> DataFrame:
    """A new Dataset of `frame`'s plan: Spark optimises and plans it when it runs, with the frames
    cached at that time."""
    return frame.select("*")


class _Dropping(LRUCache[PlanKey, Plan]):
    """An LRU map that keeps what it drops, for its clocks to be removed."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.dropped: list[Plan] = []

    def popitem(self) -> tuple[PlanKey, Plan]:
        key, plan = super().popitem()
        self.dropped.append(plan)
        return key, plan


class Plans:
    """The plans of a long-lived evaluator (the daemon's evaluate stage), at most `limit`, the
    least recently used dropped first. One evaluation at a time uses a plan (the stage runs one
    at a time); the lock keeps the map itself consistent."""

    def __init__(self, limit: int = 4) -> None:
        self._plans = _Dropping(limit)
        self._lock = threading.Lock()

    def get(self, key: PlanKey) -> Plan | None:
        with self._lock:
            return self._plans.get(key)

    def put(self, key: PlanKey, plan: Plan) -> list[Plan]:
        """Keep `plan`; returns the plans dropped to make room (their clocks can go)."""
        with self._lock:
            self._plans[key] = plan
            dropped, self._plans.dropped = self._plans.dropped, []
            return dropped

    def clear(self) -> list[Plan]:
        with self._lock:
            plans = list(self._plans.values())
            self._plans.clear()
            self._plans.dropped = []
            return plans

    def __len__(self) -> int:
        return len(self._plans)
