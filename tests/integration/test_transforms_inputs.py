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
