"""The inputs of the transforms (schemas equal the store's tables) and the output contract, plus
`World`: the builder of hand-made inputs the other test_transforms_* modules use."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import ARRAY, BigInteger, Boolean, DateTime, Double, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB

from monitor.core.derived import COMMON, ENTITIES
from monitor.evaluate.transforms import SCHEMAS, Inputs, derive, empty_inputs
from monitor.evaluate.transforms.inputs import READ_COLUMNS, column_names, table_names
from monitor.store.schema import metadata

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
"""evaluated_at of every scenario."""
CLUSTER = "c1"


def ago(seconds: float) -> datetime:
    return AT - timedelta(seconds=seconds)


_DEFAULTS: dict[str, dict[str, Any]] = {
    "latest_group_offsets": {"lag_clamped": False, "timestamp_method": "exact"},
    "group_offsets": {"lag_clamped": False, "timestamp_method": "exact"},
    "partitions": {"updated_at": AT},
    "brokers": {"host": "localhost", "port": 9092, "first_seen": ago(86400), "last_seen": AT, "up": True},
    "topic_configs": {"source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False, "valid_from": ago(86400)},
    "log_dir_sizes": {"log_dir": "/data", "offset_lag": 0, "is_future": False},
    "group_states": {"protocol_type": "consumer", "is_simple": False},
    "collection_runs": {"instance": "test", "counts": "{}"},
}


class World:
    """Rows of every input table, added through helpers that mirror what the collector writes
    (the latest tables are the newest sample of their series)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def add(self, table: str, **values: Any) -> World:
        self.rows[table].append({"cluster": CLUSTER, **_DEFAULTS.get(table, {}), **values})
        return self

    def partition_offsets(self, topic: str, partition: int, *samples: dict[str, Any]) -> World:
        """Samples from `offsets(...)`, oldest first; the newest is also the latest row."""
        for sample in samples:
            self.add("partition_offsets", topic=topic, partition=partition, **sample)
        return self.add("latest_partition_offsets", topic=topic, partition=partition, **samples[-1])

    def group_offsets(
        self,
        group: str,
        topic: str,
        partition: int,
        *samples: dict[str, Any],
        last_commit: datetime | None = None,
    ) -> World:
        """Samples from `committed(...)`, oldest first. A changed committed offset is observed as a
        commit at its sample; `last_commit` dates one observed before the window."""
        key = {"group_id": group, "topic": topic, "partition": partition}
        for before, sample in zip((None, *samples), samples, strict=False):
            self.add("group_offsets", **key, **sample)
            if before is not None and before["committed_offset"] != sample["committed_offset"]:
                last_commit = sample["sampled_at"]
                self.add(
                    "commit_observations",
                    **key,
                    observed_at=last_commit,
                    committed_offset=sample["committed_offset"],
                    previous_offset=before["committed_offset"],
                )
        return self.add("latest_group_offsets", **key, **samples[-1], last_commit_observed_at=last_commit)

    def config(self, topic: str, **values: str) -> World:
        """Open topic_configs rows; keyword `retention_ms` stands for `retention.ms`."""
        for name, value in values.items():
            self.add("topic_configs", topic=topic, name=name.replace("_", "."), value=value)
        return self

    def inputs(self, spark: SparkSession, at: datetime = AT) -> Inputs:
        frames: dict[str, Any] = {table: self.frame(spark, table) for table in table_names()}
        return Inputs(**frames, evaluated_at=at)

    def frame(self, spark: SparkSession, table: str) -> DataFrame:
        columns = column_names(table)
        rows = [tuple(row.get(c) for c in columns) for row in self.rows.get(table, [])]
        return spark.createDataFrame(rows, SCHEMAS[table])


def offsets(
    at: datetime, start: int, end: int, start_ts: datetime | None, latest_ts: datetime | None
) -> dict[str, Any]:
    """One partition_offsets sample."""
    return {
        "sampled_at": at,
        "start_offset": start,
        "end_offset": end,
        "start_timestamp": start_ts,
        "latest_timestamp": latest_ts,
        "timestamp_type": "CreateTime",
    }


def committed(
    at: datetime,
    offset: int,
    end: int,
    start: int = 0,
    committed_ts: datetime | None = None,
    consumed_ts: datetime | None = None,
    method: str = "exact",
    error_ms: int | None = None,
) -> dict[str, Any]:
    """One group_offsets sample; lag = max(end - offset, 0) as the collector computes it."""
    return {
        "sampled_at": at,
        "committed_offset": offset,
        "end_offset": end,
        "start_offset": start,
        "lag": max(end - offset, 0),
        "committed_timestamp": committed_ts,
        "consumed_timestamp": consumed_ts,
        "timestamp_method": method,
        "timestamp_error_ms": error_ms,
    }


def rows_of(frame: DataFrame, key: str, *columns: str) -> dict[Any, tuple[Any, ...]]:
    """{key value: (column values...)} of a derived frame, for the odd direct look-up."""
    return {row[key]: tuple(row[c] for c in columns) for row in frame.select(key, *columns).collect()}


def assert_finite(frames: dict[str, DataFrame]) -> None:
    """No NaN or infinity in any double column of any frame."""
    for entity, frame in frames.items():
        for row in frame.collect():
            for name, value in row.asDict().items():
                if isinstance(value, float):
                    assert math.isfinite(value), f"{entity}.{name} = {value} in {row}"


def expect(spark: SparkSession, actual: DataFrame, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Order-insensitive equality of `columns` of `actual` with `rows` (floats to 1e-6 relative)."""
    from pyspark.testing import assertDataFrameEqual

    selected = actual.select(*columns)
    expected = spark.createDataFrame(rows, selected.schema)
    assertDataFrameEqual(selected, expected, rtol=1e-6)


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
