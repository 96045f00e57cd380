"""The inputs of the transforms (schemas equal the store's tables) and the output contract."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import ARRAY, BigInteger, Boolean, DateTime, Double, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB

from monitor.core.derived import COMMON, ENTITIES
from monitor.evaluate.transforms import SCHEMAS, Inputs, derive, empty_inputs
from monitor.evaluate.transforms.inputs import READ_COLUMNS, column_names, table_names
from monitor.store.schema import metadata
from tests.fixtures.transform_inputs import AT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

# ---------------------------------------------------------------------------------------------

_SQL_TO_SPARK = [
    (BigInteger, "bigint"), (Integer, "int"), (Boolean, "boolean"), (DateTime, "timestamp"), (Double, "double"),
]  # fmt: skip


def _spark_type(sql_type: Any) -> str:
    if isinstance(sql_type, ARRAY):
        return f"array<{_spark_type(sql_type.item_type)}>"
    if isinstance(sql_type, JSONB | Text):
        return "string"
    return next(spark for kind, spark in _SQL_TO_SPARK if isinstance(sql_type, kind))


@pytest.mark.parametrize("table", list(SCHEMAS))
def test_schemas_are_the_tables(table: str) -> None:
    columns = metadata.tables[table].columns
    expected = ", ".join(f"{c.name} {_spark_type(c.type)}" for c in columns)
    assert SCHEMAS[table] == expected


def test_one_input_per_schema() -> None:
    assert set(table_names()) == set(SCHEMAS)


def test_inputs_reject_naive_time_and_wrong_columns(spark: SparkSession) -> None:
    base = empty_inputs(spark, AT)
    with pytest.raises(ValueError, match="timezone-aware"):
        replace(base, evaluated_at=AT.replace(tzinfo=None))
    with pytest.raises(ValueError, match=r"brokers: missing \['up'\]"):
        replace(base, brokers=base.brokers.drop("up"))


def test_derive_needs_only_the_read_columns(spark: SparkSession) -> None:
    frames = {}
    for table in table_names():
        assert list(READ_COLUMNS[table]) == [c for c in column_names(table) if c in READ_COLUMNS[table]], (
            table
        )
        ddl = ", ".join(
            part for part in SCHEMAS[table].split(", ") if part.split(" ")[0] in READ_COLUMNS[table]
        )
        frames[table] = spark.createDataFrame([], ddl)
    derived = derive(Inputs(**frames, evaluated_at=AT))
    assert [f.name for f in derived["group_partition"].schema.fields][:3] == [
        "evaluated_at",
        "cluster",
        "group_id",
    ]


def test_outputs_have_exactly_the_contract_columns_and_types(spark: SparkSession) -> None:
    derived = derive(empty_inputs(spark, AT))
    assert list(derived) == list(ENTITIES)
    for entity, frame in derived.items():
        expected = [(c.name, c.type) for c in (*COMMON, *ENTITIES[entity])]
        actual = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
        assert actual == expected, entity


def test_window_commits_must_be_positive(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="window_commits"):
        derive(empty_inputs(spark, AT), window_commits=0)


# ---------------------------------------------------------------------------------------------
# Frames made from Python values stay in the JVM


def _scans_a_python_rdd(frame: Any) -> bool:
    """Whether the frame's physical plan reads an RDD made in Python (what createDataFrame of a
    list gives: a Python worker re-serialises its rows when it runs)."""
    return "ExistingRDD" in frame._jdf.queryExecution().executedPlan().toString()


def _types(frame: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]


def test_local_frames_hold_their_rows_and_types_and_start_no_python_worker(spark: SparkSession) -> None:
    from monitor.core.objectives import Objective, objectives_rows
    from monitor.evaluate.engine import FINDINGS_DDL
    from monitor.evaluate.transforms.common import local_frame
    from monitor.evaluate.transforms.objectives import HISTORY_DDL, OBJECTIVES_DDL

    rows = objectives_rows([
        Objective(name="payments-fast", group="pay.*", cluster="prod", lag_seconds=30.0, target=99.0, window_days=28),
        Objective(name="all", group=".*", cluster=".*", lag_seconds=600.5, target=99.9, window_days=7),
    ])  # fmt: skip
    made = local_frame(spark, OBJECTIVES_DDL, rows)
    assert _types(made) == _types(spark.createDataFrame(rows, OBJECTIVES_DDL))
    assert [tuple(r) for r in made.collect()] == rows
    assert not _scans_a_python_rdd(made)
    assert _scans_a_python_rdd(spark.createDataFrame(rows, OBJECTIVES_DDL))  # what it replaces
    for ddl in (OBJECTIVES_DDL, HISTORY_DDL, FINDINGS_DDL):
        empty = local_frame(spark, ddl)
        assert _types(empty) == _types(spark.createDataFrame([], ddl))
        assert empty.collect() == []
        assert not _scans_a_python_rdd(empty)
    inputs = empty_inputs(spark, AT)
    assert not any(_scans_a_python_rdd(getattr(inputs, table)) for table in table_names())
