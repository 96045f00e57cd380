"""The lag objectives of each group: this minute's verdict, the burn rates and the error budget
(monitor.core.objectives has the arithmetic and the windows).

The history comes counted: per (cluster, objective, group), the bad and recorded minutes of each
burn window and of the objective's window before this minute (`HISTORY_DDL`, counted by the read
from `objective_minutes`, monitor.evaluate.extract), and whether an earlier evaluation of this
minute saw it bad. This minute is added here: each window is its minutes up to and including the
current one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from monitor.core.objectives import BURN_WINDOWS
from monitor.evaluate.transforms.common import local_frame

OBJECTIVES_DDL = (
    "objective string, group_pattern string, cluster_pattern string, lag_threshold_seconds double, "
    "target double, window_days int"
)
"""The objectives file, one row per objective (monitor.core.objectives.objectives_rows)."""

GROUPS_DDL = "objective string, cluster string, group_id string"
"""The groups each objective applies to (decided with RE2 before each evaluation:
monitor.store.objectives)."""

HISTORY_DDL = ", ".join(
    [
        "cluster string, objective string, group_id string, stored_bad boolean",
        *(f"bad_{w.column} bigint, minutes_{w.column} bigint" for w in BURN_WINDOWS),
        "bad_window bigint, minutes_window bigint",
    ]
)
"""The counted history (see the module docstring); `bad_<window column>`, `minutes_<...>`."""


def lag_objectives(
    group: DataFrame, objectives: DataFrame, groups: DataFrame, history: DataFrame
) -> DataFrame:
    """One row per (cluster, objective, group) of `groups` (GROUPS_DDL: the groups each objective
    applies to), with the columns of the lag_objective entity (monitor.core.derived) besides
    `evaluated_at`."""
    matched = (
        group.select("cluster", "group_id", "max_lag_seconds", "sampled")
        .join(groups, ["cluster", "group_id"])
        .join(objectives.drop("group_pattern", "cluster_pattern"), "objective")
    )
    now_bad = F.col("max_lag_seconds") > F.col("lag_threshold_seconds")
    stored = F.col("stored_bad")
    minute_bad = F.when(now_bad.isNull() & stored.isNull(), F.lit(None)).otherwise(
        F.coalesce(now_bad, F.lit(False)) | F.coalesce(stored, F.lit(False))
    )
    this_bad = F.when(F.col("minute_bad"), 1).otherwise(0)
    this_minute = F.when(F.col("minute_bad").isNotNull(), 1).otherwise(0)
    budget = 1.0 - F.col("target") / 100.0

    def counted(prefix: str, name: str, this: Column) -> Column:
        return F.coalesce(F.col(f"{prefix}_{name}"), F.lit(0)) + this

    burns = []
    for window in BURN_WINDOWS:
        bad, minutes = counted("bad", window.column, this_bad), counted("minutes", window.column, this_minute)
        burns.append(F.when(minutes > 0, bad / minutes / budget).alias(window.column))
    bad_minutes = counted("bad", "window", this_bad)
    recorded = counted("minutes", "window", this_minute)
    allowed = F.col("window_days") * 1440 * budget
    return (
        matched.join(history, ["cluster", "objective", "group_id"], "left")
        .withColumn("minute_bad", minute_bad)
        .select(
            "cluster",
            "objective",
            "group_id",
            "lag_threshold_seconds",
            "target",
            "window_days",
            "max_lag_seconds",
            "minute_bad",
            *burns,
            bad_minutes.alias("bad_minutes"),
            recorded.alias("recorded_minutes"),
            (1.0 - bad_minutes / allowed).alias("budget_remaining"),
            F.when(recorded > 0, 100.0 * (recorded - bad_minutes) / recorded).alias("compliance"),
            "sampled",
        )
    )


@dataclass(frozen=True)
class ObjectiveInputs:
    """What `lag_objectives` reads besides the groups: the objectives (OBJECTIVES_DDL), the groups
    each applies to (GROUPS_DDL) and their counted history (HISTORY_DDL)."""

    objectives: DataFrame
    groups: DataFrame
    history: DataFrame


def no_objectives(spark: SparkSession) -> ObjectiveInputs:
    """No objective and no history: the groups have no lag_objective row."""
    return ObjectiveInputs(
        local_frame(spark, OBJECTIVES_DDL),
        local_frame(spark, GROUPS_DDL),
        local_frame(spark, HISTORY_DDL),
    )
